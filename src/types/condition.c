/* cugraph.Condition: the value that steers a conditional node (the nodes
   themselves are the graph layer's: s:loop_while, s:branch, s:switch). A
   condition is a host object with a 4-byte device cell; its driver handle
   is made in each capture that uses it, in that capture's graph, and drives
   exactly one node there. Device code sets it: a kernel given the condition
   as an argument (cudaGraphSetConditional), or the built-in setters,
   one-thread kernels of src/kernel/setters.cu captured as nodes, launched
   through the Lua API of the module they are loaded into. */
#include <stdint.h>
#include <string.h>
#include "types/types.h"
#include "types/setters.h"

static const char setters_key = 's';

void cg_check_conditional(lua_State *L) {
  if (!cg_drv.cuGraphConditionalHandleCreate || !cg_drv.cuGraphAddNode ||
      !cg_drv.cuStreamGetCaptureInfo ||
      !cg_drv.cuStreamUpdateCaptureDependencies ||
      !cg_drv.cuStreamBeginCaptureToGraph)
    luaL_error(L, "conditional nodes need CUDA 12.4 or later (the driver "
               "lacks cuGraphConditionalHandleCreate and its kin)");
}

void cg_condition_handle(lua_State *L, cg_ctx *ctx, cg_condition *c,
                         int idx) {
  cg_capture *top = ctx->capture->top;
  cg_pinobj(L, ctx, &c->h, idx);
  if (c->bound == top->serial) return;
  cg_check_conditional(L);
  if (!top->root) {
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CU(L, ctx, cuStreamGetCaptureInfo, top->origin, &st, NULL, &top->root,
       NULL, NULL, NULL);
  }
  CU(L, ctx, cuGraphConditionalHandleCreate, &c->handle, top->root, ctx->cu,
     c->dflt, c->flags);
  c->bound = top->serial;
  top->handles++;
}

int cg_condition_arg(lua_State *L, cg_ctx *ctx, int idx, void *slot) {
  cg_condition *c = cg_testobj(L, idx, CG_CONDITION);
  if (!c) return 0;
  cg_check_open(L, &c->h);
  if (!ctx->capture)
    luaL_error(L, "a cugraph.Condition is a kernel argument only inside a "
               "capture: its handle belongs to the graph");
  cg_condition_handle(L, ctx, c, idx);
  memcpy(slot, &c->handle, sizeof c->handle);
  return 1;
}

/* -- the setters' module ------------------------------------------------- */

static const char loader_key = 'l';

/* Makes the module of src/types/setters.cu from its PTX text (upvalue 1:
   core.module) and its kernels, once a state: outside captures. */
static int load_setters(lua_State *L) {
  static const char *const names[] = {
    "cg_cond_set", "cg_cond_when", "cg_cond_countdown"
  };
  luaL_Buffer b;
  lua_pushvalue(L, lua_upvalueindex(1));
  luaL_buffinit(L, &b);
  for (int i = 0; setters_ptx[i]; i++) luaL_addstring(&b, setters_ptx[i]);
  luaL_pushresult(&b);
  lua_pushliteral(L, "cugraph setters");
  lua_call(L, 2, 1);
  for (int i = 0; i < 3; i++) { /* the kernels, made once */
    lua_getfield(L, -1, names[i]);
    lua_pop(L, 1);
  }
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &setters_key);
  return 1;
}

/* Pushes the setters' module, made on first use. */
static void push_setters(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &setters_key) != LUA_TNIL) return;
  lua_pop(L, 1);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &loader_key);
  lua_call(L, 0, 1);
}

CUfunction cg_setter_function(lua_State *L, cg_ctx *ctx, const char *name) {
  push_setters(L);
  cg_obj *m = cg_checkobj(L, -1, CG_MODULE);
  lua_pop(L, 1); /* the registry keeps it until the state closes */
  CUfunction f = NULL;
  if (m->ctx == ctx)
    CU(L, ctx, cuModuleGetFunction, &f, m->drv.module, name);
  cg_current(L, ctx); /* the check made the module's context current */
  return f;
}

/* -- conditions ----------------------------------------------------------- */

/* cuda.condition([default]): a default is the value at every launch;
   without one the value stays from launch to launch (set it before use).
   Loads the setters and the first body stream ahead of any capture. */
static int condition_new(lua_State *L) {
  int has = !lua_isnoneornil(L, 1);
  lua_Integer v = has ? luaL_checkinteger(L, 1) : 0;
  luaL_argcheck(L, v >= 0 && v <= (lua_Integer)UINT32_MAX, 1,
                "the default must be in 0..4294967295");
  cg_ctx *ctx = cg_context(L);
  cg_check_outside(L, ctx, "cannot create a condition",
           "create conditions before capture");
  cg_check_conditional(L);
  push_setters(L);
  lua_pop(L, 1);
  cg_condition *c = cg_newobj(L, ctx, sizeof *c, CG_CONDITION);
  c->dflt = (unsigned)v;
  c->flags = has ? CU_GRAPH_COND_ASSIGN_DEFAULT : 0;
  CU(L, ctx, cuMemAlloc, &c->h.drv.mem, 4);
  c->h.open = 1; /* from here __gc frees the cell */
  CU(L, ctx, cuMemsetD32Async, c->h.drv.mem, 0, 1, ctx->stream);
  cg_wait_stream(L, ctx, ctx->stream, ctx->root->timeout);
  return 1;
}

static int condition_free(lua_State *L) {
  return cg_close(L, CG_CONDITION, 0);
}
static int condition_gc(lua_State *L) { return cg_close(L, CG_CONDITION, 1); }

/* The condition at 1 and the stream at 2 of a setter, inside a capture. */
static cg_condition *setter_args(lua_State *L, const char *what) {
  cg_condition *c = cg_checkself(L, CG_CONDITION);
  cg_checkobj(L, 2, CG_STREAM);
  if (!c->h.ctx->capture)
    luaL_error(L, "condition:%s() outside a capture: setters run on the "
               "device as nodes of a graph; call them inside s:capture(fn)",
               what);
  if (cg_recording(c->h.ctx)) /* made again when the graph is built, */
    cg_record_call(L, c->h.ctx, /* where its handle is; setter() sends */
                   ((cg_stream *)lua_touserdata(L, 2))->h.drv.stream,
                   lua_gettop(L));
  cg_pinobj(L, c->h.ctx, &c->h, 1); /* its cell is read below */
  return c;
}

/* Launches setter `name` on the stream at 2 with the n values on top of the
   stack, the condition (1) first: one thread, a node of the capture. */
static int setter(lua_State *L, const char *name, int n) {
  if (cg_recording(cg_sentinel(L))) return 0; /* recorded by setter_args */
  int base = lua_gettop(L) - n;
  luaL_checkstack(L, n + 8, NULL);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &setters_key);
  lua_getfield(L, -1, name);
  lua_getfield(L, -1, "launch");
  lua_insert(L, -2);
  lua_remove(L, -3); /* launch, kernel */
  lua_pushvalue(L, 2);
  lua_pushinteger(L, 1);
  lua_pushinteger(L, 1);
  lua_pushvalue(L, 1);
  for (int i = 1; i <= n; i++) lua_pushvalue(L, base + i);
  lua_call(L, n + 5, 0);
  return 0;
}

static unsigned u32arg(lua_State *L, int idx, const char *what) {
  lua_Integer v = luaL_checkinteger(L, idx);
  if (v < 0 || v > (lua_Integer)UINT32_MAX)
    luaL_argerror(L, idx, lua_pushfstring(L, "%s must be in 0..4294967295",
                                          what));
  return (unsigned)v;
}

/* c:set(stream, value): the condition becomes value */
static int condition_set(lua_State *L) {
  setter_args(L, "set");
  lua_pushinteger(L, u32arg(L, 3, "the value"));
  return setter(L, "cg_cond_set", 1);
}

/* -1 when v is below every value of integer type t, 1 when above, else 0. */
static int outside(cg_type t, lua_Integer v) {
  static const lua_Integer lo[] = { 0, 0, INT8_MIN, 0, INT16_MIN, 0,
                                    INT32_MIN, 0, INT64_MIN, 0 };
  static const lua_Integer hi[] = { 0, 0, INT8_MAX, UINT8_MAX, INT16_MAX,
                                    UINT16_MAX, INT32_MAX, UINT32_MAX,
                                    INT64_MAX, INT64_MAX };
  return v < lo[t] ? -1 : v > hi[t] ? 1 : 0;
}

/* op (< <= > >= == ~=) of an element against a value beyond its range on
   side `past` (-1: below every element): the same for every element. */
static int constant(int op, int past) {
  int gt = past < 0, lt = past > 0;
  return op == 0 || op == 1 ? lt : op == 2 || op == 3 ? gt : op == 5;
}

/* c:set_when(stream, buffer, op, value [, index]): the condition becomes 1
   when buffer[index] op value holds, else 0 (op: < <= > >= == ~=) */
static int condition_set_when(lua_State *L) {
  static const char *const ops[] = { "<", "<=", ">", ">=", "==", "~=", "!=",
                                     NULL };
  cg_condition *c = setter_args(L, "set_when");
  cg_buffer *b = cg_checkobj(L, 3, CG_BUFFER);
  luaL_argcheck(L, b->type < CG_F16, 3, "a buffer of f16 or bf16 cannot be "
                "compared; compare a f32 copy");
  int op = cg_checkoption(L, 4, NULL, ops);
  lua_Integer i = luaL_optinteger(L, 6, 0);
  luaL_argcheck(L, i >= 0 && (size_t)i < b->n, 6, "index out of range");
  uint64_t bits;
  if (b->type == CG_F32 || b->type == CG_F64) {
    double d = luaL_checknumber(L, 5);
    memcpy(&bits, &d, 8);
  } else {
    int ok;
    lua_Integer v = lua_tointegerx(L, 5, &ok);
    if (!ok)
      luaL_argerror(L, 5, lua_pushfstring(L, "an integer for a buffer of %s",
                                          cg_type_names[b->type]));
    if (b->type == CG_U64 && v < 0)
      luaL_argerror(L, 5, "a negative value for a buffer of u64, whose "
                    "elements are 0..2^64-1; compare a buffer of i64");
    int past = outside(b->type, v); /* every element compares the same */
    if (past) {
      lua_pushinteger(L, constant(op > 5 ? 5 : op, past));
      return setter(L, "cg_cond_set", 1);
    }
    bits = (uint64_t)v;
  }
  const char *why = cg_mem_why(L, c->h.ctx, &b->h); /* the door: the */
  if (why) luaL_argerror(L, 3, why);       /* setter reads its address */
  cg_pinobj(L, c->h.ctx, &b->h, 3); /* read through its address below */
  lua_pushinteger(L, (lua_Integer)(b->h.drv.mem + (CUdeviceptr)i *
                                   cg_type_size[b->type]));
  lua_pushinteger(L, b->type);
  lua_pushinteger(L, op > 5 ? 5 : op);
  lua_pushinteger(L, (lua_Integer)bits);
  return setter(L, "cg_cond_when", 4);
}

/* c:count_down(stream, n): in a loop's body, ends the loop after n runs of
   it; needs a condition whose default starts every launch non-zero */
static int condition_count_down(lua_State *L) {
  cg_condition *c = setter_args(L, "count_down");
  unsigned n = u32arg(L, 3, "the count");
  luaL_argcheck(L, n > 0, 3, "the count must be at least 1");
  if (!(c->flags & CU_GRAPH_COND_ASSIGN_DEFAULT) || !c->dflt)
    luaL_error(L, "condition:count_down() needs a condition whose default is "
               "not 0, so that every launch starts the loop: "
               "cuda.condition(1)");
  lua_pushinteger(L, (lua_Integer)c->h.drv.mem);
  lua_pushinteger(L, n);
  return setter(L, "cg_cond_countdown", 2);
}

/* c:default() -> the value at every launch, or nil */
static int condition_default(lua_State *L) {
  cg_condition *c = cg_checkself(L, CG_CONDITION);
  if (c->flags & CU_GRAPH_COND_ASSIGN_DEFAULT) lua_pushinteger(L, c->dflt);
  else lua_pushnil(L);
  return 1;
}

static int condition_tostring(lua_State *L) {
  cg_condition *c = cg_toobj(L, 1, CG_CONDITION);
  if (c->flags & CU_GRAPH_COND_ASSIGN_DEFAULT)
    return cg_tostring(L, &c->h, " (default %d)", (int)c->dflt);
  return cg_tostring(L, &c->h, " (no default)");
}

void condition_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"set", condition_set}, {"set_when", condition_set_when},
    {"count_down", condition_count_down}, {"default", condition_default},
    {"free", condition_free}, {"close", condition_free}, {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", condition_gc}, {"__close", condition_free},
    {"__tostring", condition_tostring}, {NULL, NULL}
  };
  cg_newtype(L, CG_CONDITION, methods, meta, NULL);
  lua_getfield(L, -1, "module");
  lua_pushcclosure(L, load_setters, 1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &loader_key);
  lua_pushcfunction(L, condition_new);
  lua_setfield(L, -2, "condition");
}
