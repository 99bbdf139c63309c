/* cugraph.Stream: a non-blocking CUDA stream. The capture, label and
   conditional-node methods are added by the graph layer. */
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
    {"close", stream_free},
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
