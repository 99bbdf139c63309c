/* cugraph.Stream: a non-blocking CUDA stream, its frame fences
   (s:wait_value, s:write_value) and host hooks (s:host). The capture,
   label and conditional-node methods are added by the graph layer. */
#include <string.h>
#include "types/types.h"

static cg_stream *check(lua_State *L) { return cg_checkobj(L, 1, CG_STREAM); }

/* opts.priority of cuda.stream: an integer within the device's range or
   "highest" / "lowest" (numerically lower is higher, as CUDA has it). */
static int priority_of(lua_State *L, cg_ctx *ctx, int idx) {
  int least = 0, greatest = 0, ok;
  if (!cg_drv.cuStreamCreateWithPriority || !cg_drv.cuCtxGetStreamPriorityRange)
    luaL_error(L, "cuda.stream: this CUDA driver has no stream priorities");
  CU(L, ctx, cuCtxGetStreamPriorityRange, &least, &greatest);
  const char *name = lua_type(L, idx) == LUA_TSTRING
                     ? cg_checkname(L, idx, "cuda.stream: opts.priority") : NULL;
  if (name && !strcmp(name, "highest")) return greatest;
  if (name && !strcmp(name, "lowest")) return least;
  lua_Integer p = lua_tointegerx(L, idx, &ok);
  if (!ok || name || p < greatest || p > least)
    luaL_error(L, "cuda.stream: opts.priority must be \"highest\", "
               "\"lowest\" or an integer from %d (highest) to %d (lowest)",
               greatest, least);
  return (int)p;
}

/* cuda.stream([{priority = p}]) */
static int stream_new(lua_State *L) {
  static const char *const keys[] = { "priority", NULL };
  int has_priority = 0, priority = 0;
  cg_ctx *ctx = cg_context(L);
  cg_check_outside(L, ctx, "cannot create a stream", "create streams before capture");
  if (!lua_isnoneornil(L, 1)) {
    luaL_checktype(L, 1, LUA_TTABLE);
    cg_check_options(L, 1, "cuda.stream", keys);
    if (lua_getfield(L, 1, "priority") != LUA_TNIL) {
      priority = priority_of(L, ctx, lua_gettop(L));
      has_priority = 1;
    }
  }
  lua_settop(L, 1);
  cg_stream *s = cg_newobj(L, ctx, sizeof *s, CG_STREAM);
  if (has_priority)
    CU(L, ctx, cuStreamCreateWithPriority, &s->h.drv.stream,
       CU_STREAM_NON_BLOCKING, priority);
  else
    CU(L, ctx, cuStreamCreate, &s->h.drv.stream, CU_STREAM_NON_BLOCKING);
  s->priority = priority;
  s->h.open = 1;
  return 1;
}

/* s:priority() -> the priority it was made with */
static int stream_priority(lua_State *L) {
  lua_pushinteger(L, ((cg_stream *)cg_checkself(L, CG_STREAM))->priority);
  return 1;
}

/* Its private event, made in o's context. */
static void stream_release(lua_State *L, cg_obj *o) {
  cg_stream *s = (cg_stream *)o;
  cg_release(L, o->ctx, CG_H_EVENT, (cg_handle){ .event = s->join });
  s->join = NULL;
}

static int stream_free(lua_State *L) { return cg_close(L, CG_STREAM, 0); }
static int stream_gc(lua_State *L) { return cg_close(L, CG_STREAM, 1); }

/* s:synchronize([timeout_s]) */
static int stream_synchronize(lua_State *L) {
  cg_stream *s = check(L);
  double t = cg_opttimeout(L, 2);
  cg_check_outside(L, s->h.ctx, "stream:synchronize()",
                   "synchronize after the capture ends");
  cg_wait_stream(L, s->h.ctx, s->h.drv.stream, t);
  return 0;
}

/* s:query() -> true when all work on the stream is done */
static int stream_query(lua_State *L) {
  cg_stream *s = check(L);
  cg_check_outside(L, s->h.ctx, "stream:query()", "query after the capture ends");
  CUresult r = cg_drv.cuStreamQuery(s->h.drv.stream);
  if (r != CUDA_ERROR_NOT_READY) cg_check(L, s->h.ctx, "cuStreamQuery", r);
  lua_pushboolean(L, r == CUDA_SUCCESS);
  return 1;
}

/* Inside a conditional body, whether s captures into another level. */
static int elsewhere(lua_State *L, cg_ctx *ctx, CUstream s) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t seq = 0;
  CU(L, ctx, cuStreamGetCaptureInfo, s, &st, &seq, NULL, NULL, NULL, NULL);
  return st != CU_STREAM_CAPTURE_STATUS_NONE && seq != ctx->capture->seq;
}

/* s:wait(event | stream): later work on s waits for the event, or for all
   work queued so far on the other stream. Inside a capture this forks or
   joins streams: it becomes graph edges. */
static int stream_wait(lua_State *L) {
  cg_stream *s = check(L);
  cg_ctx *ctx = s->h.ctx;
  cg_pin(L, ctx, 1); /* pins allocate: handles are read after them */
  cg_pin(L, ctx, 2);
  cg_stream *other = cg_testobj(L, 2, CG_STREAM);
  CUevent e;
  if (ctx->capture && ctx->capture->depth &&
      (!other || elsewhere(L, ctx, s->h.drv.stream) ||
       elsewhere(L, ctx, ((cg_stream *)cg_checkobj(L, 2, CG_STREAM))->h.drv.stream)))
    luaL_error(L, "stream:wait() inside a conditional body across its edges: "
               "a body forks and joins only streams of its own (s2:wait(s) "
               "with s the body's stream), never events or outer streams");
  if (cg_recording(ctx)) { /* a fork or join, made again when the graph */
    if (other)                              /* is built */
      cg_capture_wait(L, ctx, s->h.drv.stream,
                      ((cg_stream *)cg_checkobj(L, 2, CG_STREAM))->h.drv.stream);
    else
      cg_checkobj(L, 2, CG_EVENT);
    cg_record_call(L, ctx, s->h.drv.stream, 2);
    lua_settop(L, 1);
    return 1;
  }
  if (other) { /* its event is made and recorded in its own context */
    other = cg_checkobj(L, 2, CG_STREAM);
    if (!other->join)
      CU(L, other->h.ctx, cuEventCreate, &other->join,
         CU_EVENT_DISABLE_TIMING);
    CU(L, other->h.ctx, cuEventRecord, other->join, other->h.drv.stream);
    e = other->join;
    if (ctx->capture) cg_capture_wait(L, ctx, s->h.drv.stream, other->h.drv.stream);
  } else {
    if (!cg_testobj(L, 2, CG_EVENT))
      luaL_typeerror(L, 2, "cugraph.Event or cugraph.Stream");
    e = ((cg_event *)cg_checkobj(L, 2, CG_EVENT))->h.drv.event;
  }
  cg_current(L, ctx); /* the checks made the other's context current */
  cg_recs_mark(L, ctx, s->h.drv.stream); /* a join ends the chain */
  CU(L, ctx, cuStreamWaitEvent, s->h.drv.stream, e, 0);
  cg_stamp_start(L, ctx, s->h.drv.stream); /* a profiling capture's */
  lua_settop(L, 1);
  return 1;
}

CUstream cg_optstream(lua_State *L, int idx, cg_ctx *ctx) {
  if (lua_isnoneornil(L, idx)) return ctx->stream;
  cg_stream *s = cg_checkobj(L, idx, CG_STREAM);
  if (s->h.ctx != ctx) cg_error_devices(L, ctx, s->h.ctx, "stream argument");
  return s->h.drv.stream;
}

/* s:handle(): the CUstream as an integer, for foreign code (which may
   send work to it unseen: the stream's last kernel is never known again) */
static int stream_handle(lua_State *L) {
  cg_stream *s = cg_checkself(L, CG_STREAM);
  s->lent = 1;
  lua_pushinteger(L, (lua_Integer)(intptr_t)s->h.drv.stream);
  return 1;
}

/* -- frame fences and hooks ---------------------------------------------- */

/* s:wait_value and s:write_value: the driver's stream memory operations
   (cuStreamWaitValue32/64, cuStreamWriteValue32/64) on a 32- or 64-bit
   counter in device memory (a Buffer's element, a Scalar) or page-locked
   host memory (a HostBuffer's element), eager or, inside a capture, a
   batch memory
   operation node (cuGraphAddNode). The value may be a Scalar of the
   counter's type: a graph then waits for or writes the value the scalar
   holds at each launch (the launch sets the node first, as it does for
   external semaphores), so one captured frame serves every frame, whether
   the script or C (cugraph_scalar_set) sets it. And s:host(fn [, data]):
   a C function of the engine's, called in stream order by the driver
   (cuLaunchHostFunc, a host node in a capture) on a thread of its own,
   where no CUDA call may be made and no lua_State used: only functions C
   registered (cugraph_pushhostfn) are taken, never a Lua function. */
static const char *const ops[] = { "geq", "eq", "and", "nor", NULL };
static const unsigned op_flags[] = {
  CU_STREAM_WAIT_VALUE_GEQ, CU_STREAM_WAIT_VALUE_EQ, CU_STREAM_WAIT_VALUE_AND,
  CU_STREAM_WAIT_VALUE_NOR
};

/* Whether device ctx has the memory operations of bit (the attributes
   are asked once). */
static int can(lua_State *L, cg_ctx *ctx, int bit) {
  if (!(ctx->memops & CG_MEMOPS_KNOWN)) {
    int wide = 0, nor = 0;
    CU(L, ctx, cuDeviceGetAttribute, &wide,
       CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, ctx->dev);
    CU(L, ctx, cuDeviceGetAttribute, &nor,
       CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, ctx->dev);
    ctx->memops = (unsigned char)(CG_MEMOPS_KNOWN |
                                  (wide ? CG_MEMOPS_64 : 0) |
                                  (nor ? CG_MEMOPS_NOR : 0));
  }
  return (ctx->memops & bit) != 0;
}

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
  if (*t == CG_U64 && !can(L, ctx, CG_MEMOPS_64))
    luaL_error(L, "%s: device %d has no 64-bit stream memory operations "
               "(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS): use a "
               "u32 counter", what, ctx->ordinal);
  return o;
}

/* The device address of counter o. */
static CUdeviceptr address_of(const cg_obj *o) {
  return o->kind == CG_HOSTBUF ? ((const cg_hostbuf *)o)->dev : o->drv.mem;
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

/* Raises inside the body of a conditional node, which takes none of the
   nodes of this file. */
static void check_top(lua_State *L, cg_ctx *ctx, const char *what) {
  if (ctx->capture->depth)
    luaL_error(L, "%s inside the body of a conditional node: the driver "
               "takes only kernel, memset, memcpy, child graph and "
               "conditional nodes there; call it before or after the "
               "conditional node", what);
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
  if (flags == CU_STREAM_WAIT_VALUE_NOR && !can(L, ctx, CG_MEMOPS_NOR))
    return luaL_error(L, "%s: device %d has no \"nor\" comparison "
                      "(CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR)",
                      what, ctx->ordinal);
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
    check_top(L, ctx, what);
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
    m.waitValue.address = address_of(c); /* at the same place */
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
  CUdeviceptr addr = address_of(c);
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

/* The registry's set of the host functions C registered (light userdata
   keys), made on first use. */
static const char hostfns_key = 'h';

static void push_hostfns(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &hostfns_key) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &hostfns_key);
}

_Static_assert(sizeof(CUhostFn) == sizeof(void *),
               "a host function travels as a light userdata");

void cg_push_hostfn(lua_State *L, CUhostFn fn) {
  if (!fn) luaL_error(L, "cugraph_pushhostfn: null function");
  void *p;
  memcpy(&p, &fn, sizeof p);
  push_hostfns(L);
  lua_pushlightuserdata(L, p);
  lua_pushboolean(L, 1);
  lua_rawset(L, -3);
  lua_pop(L, 1);
  lua_pushlightuserdata(L, p);
}

/* The host function at idx: one C registered. */
static CUhostFn hostfn_at(lua_State *L, int idx) {
  if (lua_isfunction(L, idx))
    luaL_error(L, "s:host: a Lua function cannot be a host function: the "
               "driver calls host functions on a thread of its own, where "
               "this lua_State may not run (one thread at a time) and no "
               "CUDA call may be made; give a C function (cugraph_pushhostfn), "
               "or have the stream write a counter (s:write_value) or record "
               "an event that the script reads on its own thread");
  if (lua_type(L, idx) != LUA_TLIGHTUSERDATA)
    luaL_typeerror(L, idx, "host function (cugraph_pushhostfn)");
  push_hostfns(L);
  lua_pushvalue(L, idx);
  int known = lua_rawget(L, -2) == LUA_TBOOLEAN;
  lua_pop(L, 2);
  if (!known)
    luaL_error(L, "s:host: the light userdata %p is no host function C "
               "registered (cugraph_pushhostfn)", lua_touserdata(L, idx));
  CUhostFn fn;
  void *p = lua_touserdata(L, idx);
  memcpy(&fn, &p, sizeof fn);
  return fn;
}

/* s:host(fn [, data]) */
static int stream_host(lua_State *L) {
  const char *what = "s:host";
  cg_stream *s = cg_checkobj(L, 1, CG_STREAM);
  cg_ctx *ctx = s->h.ctx;
  if (lua_gettop(L) > 3)
    return luaL_error(L, "%s: takes a host function and its data, got %d "
                      "arguments", what, lua_gettop(L) - 1);
  CUhostFn fn = hostfn_at(L, 2);
  int t = lua_type(L, 3);
  if (t != LUA_TNONE && t != LUA_TNIL && t != LUA_TLIGHTUSERDATA)
    luaL_typeerror(L, 3, "light userdata (the host function's data) or nil");
  void *data = lua_touserdata(L, 3);
  CUstream st = s->h.drv.stream;
  if (cg_recording(ctx)) { /* made again when the graph is built */
    cg_record_call(L, ctx, st, lua_gettop(L));
    lua_settop(L, 1);
    return 1;
  }
  if (!cg_drv.cuLaunchHostFunc)
    return luaL_error(L, "%s: this CUDA driver has no host functions", what);
  if (ctx->capture && cg_capturing_on(L, ctx, st)) {
    check_top(L, ctx, what);
    cg_pinobj(L, ctx, &s->h, 1);
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_HOST;
    p.host.fn = fn;
    p.host.userData = data;
    cg_capture_node(L, ctx, st, &p);
  } else {
    CU(L, ctx, cuLaunchHostFunc, st, fn, data);
  }
  lua_settop(L, 1);
  return 1;
}

static int stream_tostring(lua_State *L) {
  cg_stream *s = cg_toobj(L, 1, CG_STREAM);
  return cg_tostring(L, &s->h, " (%p%s)", (void *)s->h.drv.stream,
                     s->h.owned ? "" : ", borrowed");
}

void stream_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"synchronize", stream_synchronize}, {"query", stream_query},
    {"priority", stream_priority},
    {"wait", stream_wait}, {"handle", stream_handle}, {"free", stream_free},
    {"close", stream_free}, {"wait_value", stream_wait_value},
    {"write_value", stream_write_value}, {"host", stream_host},
    {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", stream_gc}, {"__close", stream_free},
    {"__tostring", stream_tostring}, {NULL, NULL}
  };
  cg_newtype(L, CG_STREAM, methods, meta, stream_release);
  lua_pushcfunction(L, stream_new);
  lua_setfield(L, -2, "stream");
}
