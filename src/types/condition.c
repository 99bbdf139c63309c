/* cugraph.Condition, and the conditional nodes it steers: s:loop_while,
   s:branch and s:switch make a node in the graph being captured and capture
   Lua closures as its bodies (graph.c's cg_capture_body), nested to any
   depth. A condition is a host object with a 4-byte device cell; its
   driver handle is made in each capture that uses it, in that capture's
   graph, and drives exactly one node there. Device code sets it: a kernel
   given the condition as an argument (cudaGraphSetConditional), or the
   built-in setters, one-thread kernels of src/kernel/setters.cu captured as nodes. */
#include <stdint.h>
#include <string.h>
#include "base/core.h"
#include "kernel/setters.h"

typedef struct cg_condition {
  cg_obj h;
  CUdeviceptr cell;     /* count_down's counter: 0 between launches */
  unsigned dflt;        /* the value each launch starts with ... */
  unsigned flags;       /* ... when this is CU_GRAPH_COND_ASSIGN_DEFAULT */
  unsigned bound;       /* serial of the capture whose graph has handle */
  unsigned node;        /* serial of the capture where it drives a node */
  CUgraphConditionalHandle handle;
} cg_condition;

static const char setters_key = 's';

static void need(lua_State *L) {
  if (!cg_drv.cuGraphConditionalHandleCreate || !cg_drv.cuGraphAddNode ||
      !cg_drv.cuStreamGetCaptureInfo ||
      !cg_drv.cuStreamUpdateCaptureDependencies ||
      !cg_drv.cuStreamBeginCaptureToGraph)
    luaL_error(L, "conditional nodes need CUDA 12.4 or later (the driver "
               "lacks cuGraphConditionalHandleCreate and its kin)");
}

CUgraphNode cg_capture_node(lua_State *L, cg_ctx *ctx, CUstream s,
                            CUgraphNodeParams *p) {
  if (!cg_drv.cuGraphAddNode || !cg_drv.cuStreamGetCaptureInfo ||
      !cg_drv.cuStreamUpdateCaptureDependencies)
    luaL_error(L, "child graph and conditional nodes need CUDA 12.4 or later "
               "(the driver lacks cuGraphAddNode_v2)");
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  CUgraph g = NULL;
  const CUgraphNode *deps = NULL; /* the driver's: valid until the next call */
  size_t n = 0;
  CUgraphNode node = NULL;
  CU(L, ctx, cuStreamGetCaptureInfo, s, &st, NULL, &g, &deps, NULL, &n);
  CU(L, ctx, cuGraphAddNode, &node, g, deps, NULL, n, p);
  CU(L, ctx, cuStreamUpdateCaptureDependencies, s, &node, NULL, 1,
     CU_STREAM_SET_CAPTURE_DEPENDENCIES);
  cg_note_node(L, ctx, node, p->type);
  return node;
}

/* The handle of c (at idx) in the capture in progress, made in its top
   graph on first use there; pins c. */
static void handle(lua_State *L, cg_ctx *ctx, cg_condition *c, int idx) {
  cg_capture *top = ctx->capture->top;
  cg_pinobj(L, ctx, &c->h, idx);
  if (c->bound == top->serial) return;
  need(L);
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
  cg_isopen(L, &c->h);
  if (!ctx->capture)
    luaL_error(L, "a cugraph.Condition is a kernel argument only inside a "
               "capture: its handle belongs to the graph");
  handle(L, ctx, c, idx);
  memcpy(slot, &c->handle, sizeof c->handle);
  return 1;
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
  cg_guard(L, ctx, "cannot create a condition",
           "create conditions before capture");
  need(L);
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &setters_key) == LUA_TNIL) {
    static const char *const names[] = {
      "cg_cond_set", "cg_cond_when", "cg_cond_countdown"
    };
    luaL_Buffer b;
    lua_pushvalue(L, lua_upvalueindex(1)); /* core.module */
    luaL_buffinit(L, &b);
    for (int i = 0; setters_ptx[i]; i++) luaL_addstring(&b, setters_ptx[i]);
    luaL_pushresult(&b);
    lua_pushliteral(L, "cugraph setters");
    lua_call(L, 2, 1);
    for (int i = 0; i < 3; i++) { /* the kernels, made once */
      lua_getfield(L, -1, names[i]);
      lua_pop(L, 1);
    }
    lua_rawsetp(L, LUA_REGISTRYINDEX, &setters_key);
  }
  lua_pop(L, 1);
  cg_bodystream(L, ctx, 1);
  cg_condition *c = cg_newobj(L, ctx, sizeof *c, CG_CONDITION);
  c->dflt = (unsigned)v;
  c->flags = has ? CU_GRAPH_COND_ASSIGN_DEFAULT : 0;
  CU(L, ctx, cuMemAlloc, &c->cell, 4);
  c->h.open = 1; /* from here __gc frees the cell */
  CU(L, ctx, cuMemsetD32Async, c->cell, 0, 1, ctx->stream);
  CU(L, ctx, cuStreamSynchronize, ctx->stream);
  return 1;
}

static void condition_release(lua_State *L, cg_obj *o) {
  cg_condition *c = (cg_condition *)o;
  cg_release(L, o->ctx, CG_FREE_MEM, (void *)(uintptr_t)c->cell);
  c->cell = 0;
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
  cg_pinobj(L, c->h.ctx, &c->h, 1); /* its cell is read below */
  return c;
}

/* Launches setter `name` on the stream at 2 with the n values on top of the
   stack, the condition (1) first: one thread, a node of the capture. */
static int setter(lua_State *L, const char *name, int n) {
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

/* c:set_when(stream, buffer, op, value [, index]): the condition becomes 1
   when buffer[index] op value holds, else 0 (op: < <= > >= == ~=) */
static int condition_set_when(lua_State *L) {
  static const char *const ops[] = { "<", "<=", ">", ">=", "==", "~=", "!=",
                                     NULL };
  cg_condition *c = setter_args(L, "set_when");
  cg_buffer *b = cg_checkobj(L, 3, CG_BUFFER);
  luaL_argcheck(L, b->type < CG_F16, 3, "a buffer of f16 or bf16 cannot be "
                "compared; compare a f32 copy");
  int op = luaL_checkoption(L, 4, NULL, ops);
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
    bits = (uint64_t)v;
  }
  cg_pinobj(L, c->h.ctx, &b->h, 3); /* read through its address below */
  lua_pushinteger(L, (lua_Integer)(b->ptr + (CUdeviceptr)i *
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
  lua_pushinteger(L, (lua_Integer)c->cell);
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

/* -- nodes ---------------------------------------------------------------- */

static const char *const type_names[] = { "if", "while", "switch" };

/* s:loop_while(cond, fn), s:branch(cond, then_fn [, else_fn]),
   s:switch(cond, {fn0, fn1, ...}): a conditional node after the stream's
   work, whose bodies are the functions, captured in turn; each gets s,
   which stands for the body's stream while it runs. */
static int node(lua_State *L, CUgraphConditionalNodeType type,
                const char *what) {
  cg_stream *s = cg_checkobj(L, 1, CG_STREAM);
  cg_condition *c = cg_checkobj(L, 2, CG_CONDITION);
  cg_ctx *ctx = s->h.ctx;
  int n = 1;
  if (type == CU_GRAPH_COND_TYPE_SWITCH) {
    luaL_checktype(L, 3, LUA_TTABLE);
    lua_Integer len = luaL_len(L, 3);
    luaL_argcheck(L, len >= 1 && len <= 65536, 3,
                  "expected a list of 1 to 65536 functions");
    n = (int)len;
    lua_settop(L, 3);
    luaL_checkstack(L, n + 8, NULL);
    for (int i = 1; i <= n; i++)
      if (lua_rawgeti(L, 3, i) != LUA_TFUNCTION)
        luaL_error(L, "s:switch(): case %d (list item %d) is a %s, not a "
                   "function", i - 1, i, luaL_typename(L, -1));
  } else {
    luaL_checktype(L, 3, LUA_TFUNCTION);
    if (type == CU_GRAPH_COND_TYPE_IF && !lua_isnoneornil(L, 4)) {
      luaL_checktype(L, 4, LUA_TFUNCTION);
      n = 2;
    }
    lua_settop(L, 2 + n);
  }
  int first = lua_gettop(L) - n + 1; /* the bodies */
  need(L);
  if (!ctx->capture)
    luaL_error(L, "%s outside a capture: conditional nodes are made inside "
               "s:capture(fn)", what);
  if (n > 1 || type == CU_GRAPH_COND_TYPE_SWITCH) {
    int version = 0;
    CU(L, ctx, cuDriverGetVersion, &version);
    if (version < 12080)
      luaL_error(L, "%s: switch nodes and else branches need CUDA 12.8 or "
                 "later", what);
  }
  cg_capture *top = ctx->capture->top;
  if (c->node == top->serial)
    luaL_error(L, "%s: this cugraph.Condition already drives a conditional "
               "node in this graph; make one condition per node", what);
  cg_pinobj(L, ctx, &s->h, 1);
  handle(L, ctx, c, 2);
  if (!cg_capturing_on(L, ctx, s->s))
    luaL_error(L, "%s on a stream that is not part of the capture; make the "
               "stream wait on the capture stream first", what);
  lua_rawgeti(L, LUA_REGISTRYINDEX, ctx->capture->pins);
  lua_createtable(L, n, 1); /* for g:nodes(true): the type, the bodies */
  lua_pushstring(L, type_names[type]);
  lua_setfield(L, -2, "type");
  int info = lua_gettop(L);
  CUgraphNodeParams p;
  memset(&p, 0, sizeof p);
  p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  p.conditional.handle = c->handle;
  p.conditional.type = type;
  p.conditional.size = (unsigned)n;
  p.conditional.ctx = ctx->cu;
  CUgraphNode nd = cg_capture_node(L, ctx, s->s, &p);
  c->node = top->serial;
  top->conds++;
  for (int i = 0; i < n; i++) { /* the driver's array lives with the node */
    lua_pushlightuserdata(L, p.conditional.phGraph_out[i]);
    lua_rawseti(L, info, i + 1);
  }
  lua_pushlightuserdata(L, nd);
  lua_pushvalue(L, info);
  lua_rawset(L, info - 1);
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, info, i + 1);
    CUgraph body = lua_touserdata(L, -1);
    lua_pop(L, 1);
    cg_capture_body(L, ctx, 1, first + i, body);
  }
  return 0;
}

static int stream_loop_while(lua_State *L) {
  return node(L, CU_GRAPH_COND_TYPE_WHILE, "s:loop_while()");
}

static int stream_branch(lua_State *L) {
  return node(L, CU_GRAPH_COND_TYPE_IF, "s:branch()");
}

static int stream_switch(lua_State *L) {
  return node(L, CU_GRAPH_COND_TYPE_SWITCH, "s:switch()");
}

void cond_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"set", condition_set}, {"set_when", condition_set_when},
    {"count_down", condition_count_down}, {"default", condition_default},
    {"free", condition_free}, {"close", condition_free}, {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", condition_gc}, {"__close", condition_free},
    {"__tostring", condition_tostring}, {NULL, NULL}
  };
  static const luaL_Reg smethods[] = {
    {"loop_while", stream_loop_while}, {"branch", stream_branch},
    {"switch", stream_switch}, {NULL, NULL}
  };
  cg_newtype(L, CG_CONDITION, methods, meta, condition_release);
  lua_getfield(L, -1, "module");
  lua_pushcclosure(L, condition_new, 1);
  lua_setfield(L, -2, "condition");
  luaL_getmetatable(L, cg_kind_names[CG_STREAM]);
  lua_getfield(L, -1, "methods");
  luaL_setfuncs(L, smethods, 0);
  lua_pop(L, 2);
}
