/* Frame fences: the Stream methods s:wait_value and s:write_value, the
   driver's stream memory operations (cuStreamWaitValue32/64,
   cuStreamWriteValue32/64) on a 32- or 64-bit counter in device memory
   (a Buffer's element, a Scalar) or page-locked host memory (a
   HostBuffer's element), eager or, inside a capture, a batch memory
   operation node (cuGraphAddNode). The value may be a Scalar of the
   counter's type: a graph then waits for or writes the value the scalar
   holds at each launch (the launch sets the node first, as it does for
   external semaphores), so one captured frame serves every frame, whether
   the script or C (cugraph_scalar_set) sets it. */
#include <string.h>
#include "types/types.h"

static const char *const ops[] = { "geq", "eq", "and", "nor", NULL };
static const unsigned op_flags[] = {
  CU_STREAM_WAIT_VALUE_GEQ, CU_STREAM_WAIT_VALUE_EQ, CU_STREAM_WAIT_VALUE_AND,
  CU_STREAM_WAIT_VALUE_NOR
};

/* The counter at idx: its object, element type (u32 or u64) and, once
   the checks passed, its device address. Every bad kind of memory is
   refused here, before the driver: the door's (cg_check_mem), managed
   memory (which the driver's memory operations do not take) and host
   memory of another device. */
static cg_obj *counter_of(lua_State *L, cg_ctx *ctx, int idx,
                          const char *what, cg_type *t) {
  cg_obj *o = cg_toany(L, ctx, idx);
  int kind = o ? o->kind : -1;
  if (kind == CG_SCALAR) {
    *t = ((cg_scalar *)o)->type;
  } else if (kind == CG_BUFFER) {
    *t = ((cg_buffer *)o)->type;
    if (((cg_buffer *)o)->managed)
      luaL_error(L, "%s: the counter is managed memory, which the driver's "
                 "stream memory operations do not take: use a cuda.buffer, "
                 "a cuda.host_buffer or a cuda.scalar", what);
  } else if (kind == CG_HOSTBUF) {
    *t = ((cg_hostbuf *)o)->type;
  } else {
    luaL_typeerror(L, idx, "cugraph.Buffer, cugraph.HostBuffer or "
                   "cugraph.Scalar (the counter)");
    return NULL; /* not reached */
  }
  if (*t != CG_U32 && *t != CG_U64)
    luaL_error(L, "%s: the counter must be u32 or u64, not %s", what,
               cg_type_names[*t]);
  if (kind == CG_HOSTBUF) {
    cg_check_open(L, o);
    if (o->ctx != ctx) cg_error_devices(L, ctx, o->ctx, what);
  } else {
    cg_check_mem(L, ctx, o, what);
  }
  if (*t == CG_U64 && !ctx->memops64) {
    int v = 0;
    CU(L, ctx, cuDeviceGetAttribute, &v,
       CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, ctx->dev);
    ctx->memops64 = v ? 1 : -1;
  }
  if (*t == CG_U64 && ctx->memops64 < 0)
    luaL_error(L, "%s: device %d has no 64-bit stream memory operations "
               "(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS): use a "
               "u32 counter", what, ctx->ordinal);
  return o;
}

/* The device address of counter o: a host buffer's is asked for once. */
static CUdeviceptr address_of(lua_State *L, cg_ctx *ctx, cg_obj *o) {
  if (o->kind != CG_HOSTBUF) return o->drv.mem;
  cg_hostbuf *h = (cg_hostbuf *)o;
  if (!h->dev)
    CU(L, ctx, cuMemHostGetDevicePointer, &h->dev, h->h.drv.host, 0);
  return h->dev;
}

/* The value at idx, as bits of type t, and the Scalar it came from (or
   NULL). */
static uint64_t value_of(lua_State *L, int idx, cg_type t, const char *what,
                         cg_scalar **sc) {
  uint64_t bits = 0;
  *sc = cg_testobj(L, idx, CG_SCALAR);
  if (*sc) {
    cg_check_open(L, &(*sc)->h);
    if ((*sc)->type != t)
      luaL_error(L, "%s: the value's cugraph.Scalar must be %s like the "
                 "counter, not %s", what, cg_type_names[t],
                 cg_type_names[(*sc)->type]);
    return (*sc)->bits;
  }
  if (lua_type(L, idx) != LUA_TNUMBER)
    luaL_error(L, "%s: the value must be an integer or a %s cugraph.Scalar, "
               "got %s", what, cg_type_names[t], luaL_typename(L, idx));
  char msg[64];
  snprintf(msg, sizeof msg, "%s: the value", what);
  cg_tobits(L, idx, t, &bits, msg);
  return bits;
}

/* s:wait_value(counter, v [, op]) and s:write_value(counter, v) */
static int fence(lua_State *L, int wait) {
  const char *what = wait ? "s:wait_value" : "s:write_value";
  int nargs = wait ? 4 : 3;
  cg_stream *s = cg_checkobj(L, 1, CG_STREAM);
  cg_ctx *ctx = s->h.ctx;
  if (lua_gettop(L) > nargs)
    return luaL_error(L, "%s: takes a counter, a value%s, got %d arguments",
                      what, wait ? " and a comparison" : "",
                      lua_gettop(L) - 1);
  unsigned flags = wait ? op_flags[cg_checkoption(L, 4, "geq", ops)] : 0;
  cg_type t = CG_U32;
  cg_obj *c = counter_of(L, ctx, 2, what, &t);
  cg_scalar *sc;
  uint64_t v = value_of(L, 3, t, what, &sc);
  if (sc && sc->h.ctx != ctx) cg_error_devices(L, ctx, sc->h.ctx, what);
  CUstream st = s->h.drv.stream;
  if (cg_recording(ctx)) { /* made again when the graph is built */
    cg_record_call(L, ctx, st, lua_gettop(L));
    lua_settop(L, 1);
    return 1;
  }
  int wide = t == CG_U64;
  int have = wide ? (wait ? !!cg_drv.cuStreamWaitValue64
                          : !!cg_drv.cuStreamWriteValue64)
                  : (wait ? !!cg_drv.cuStreamWaitValue32
                          : !!cg_drv.cuStreamWriteValue32);
  if (!have)
    return luaL_error(L, "%s: this CUDA driver has no stream memory "
                      "operations", what);
  if (ctx->capture && cg_capturing_on(L, ctx, st)) {
    if (sc && ctx->capture->depth)
      return luaL_error(L, "%s: a cugraph.Scalar value is set per launch in "
                        "the top graph only, not in the body of a "
                        "conditional node: give an integer there", what);
    cg_pinobj(L, ctx, &s->h, 1); /* pins allocate: handles are read after */
    cg_pinobj(L, ctx, c, 2);
    if (sc) cg_pinobj(L, ctx, &sc->h, 3);
    cg_check_open(L, c);
    CUstreamBatchMemOpParams m;
    memset(&m, 0, sizeof m);
    m.operation = wait ? (wide ? CU_STREAM_MEM_OP_WAIT_VALUE_64
                               : CU_STREAM_MEM_OP_WAIT_VALUE_32)
                       : (wide ? CU_STREAM_MEM_OP_WRITE_VALUE_64
                               : CU_STREAM_MEM_OP_WRITE_VALUE_32);
    m.waitValue.address = address_of(L, ctx, c); /* at the same place */
    if (wide) m.waitValue.value64 = v;            /* in a write's */
    else m.waitValue.value = (cuuint32_t)v;
    m.waitValue.flags = flags;
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
    p.memOp.ctx = ctx->cu;
    p.memOp.count = 1;
    p.memOp.paramArray = &m;
    CUgraphNode nd = cg_capture_node(L, ctx, st, &p);
    cg_note_memop(L, ctx, nd, wait, c, sc ? &sc->h : NULL, v, flags);
    lua_settop(L, 1);
    return 1;
  }
  if (c->kind == CG_SCALAR) /* a value set on the host comes first */
    cg_scalar_flush(L, (cg_scalar *)c, st);
  CUdeviceptr addr = address_of(L, ctx, c);
  cg_work_bound(ctx); /* the software driver waits inside the call */
  if (wait && wide)
    CU(L, ctx, cuStreamWaitValue64, st, addr, v, flags);
  else if (wait)
    CU(L, ctx, cuStreamWaitValue32, st, addr, (cuuint32_t)v, flags);
  else if (wide)
    CU(L, ctx, cuStreamWriteValue64, st, addr, v, 0);
  else
    CU(L, ctx, cuStreamWriteValue32, st, addr, (cuuint32_t)v, 0);
  lua_settop(L, 1);
  return 1; /* the stream, as methods that record work return it */
}
static int stream_wait_value(lua_State *L) { return fence(L, 1); }
static int stream_write_value(lua_State *L) { return fence(L, 0); }

void fence_open(lua_State *L) {
  luaL_getmetatable(L, cg_kind_names[CG_STREAM]);
  lua_getfield(L, -1, "methods");
  lua_pushcfunction(L, stream_wait_value);
  lua_setfield(L, -2, "wait_value");
  lua_pushcfunction(L, stream_write_value);
  lua_setfield(L, -2, "write_value");
  lua_pop(L, 2);
}
