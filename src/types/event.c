/* cugraph.Event: markers in a stream, for ordering between streams and for
   timing. */
#include <string.h>
#include "types/types.h"

static cg_event *check(lua_State *L, int i) { return cg_checkobj(L, i, CG_EVENT); }

/* cuda.event([{timing = false}]) */
static int event_new(lua_State *L) {
  int timing = 1;
  if (!lua_isnoneornil(L, 1)) {
    static const char *const keys[] = { "timing", NULL };
    luaL_checktype(L, 1, LUA_TTABLE);
    cg_check_options(L, 1, "cuda.event", keys);
    if (lua_getfield(L, 1, "timing") != LUA_TNIL) timing = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  cg_ctx *ctx = cg_context(L);
  cg_event *e = cg_newobj(L, ctx, sizeof *e, CG_EVENT);
  e->timing = timing;
  CU(L, ctx, cuEventCreate, &e->h.drv.event,
     timing ? 0 : CU_EVENT_DISABLE_TIMING);
  e->h.open = 1;
  return 1;
}

static int event_free(lua_State *L) { return cg_close(L, CG_EVENT, 0); }
static int event_gc(lua_State *L) { return cg_close(L, CG_EVENT, 1); }

/* e:record([stream]) */
static int event_record(lua_State *L) {
  cg_event *e = check(L, 1);
  cg_ctx *ctx = e->h.ctx;
  if (ctx->capture && ctx->capture->depth)
    luaL_error(L, "event:record() inside a conditional body: events cannot "
               "cross a body's edges; fork and join with s2:wait(s) there");
  if (ctx->capture && lua_isnoneornil(L, 2))
    luaL_error(L, "event:record() without a stream inside a graph capture: "
               "pass the capture stream");
  if (cg_recording(ctx)) { /* made again when the graph is built */
    cg_record_call(L, ctx, cg_optstream(L, 2, ctx), 2);
    lua_settop(L, 1);
    return 1;
  }
  cg_pin(L, ctx, 1); /* pins allocate: handles are read after them */
  cg_pin(L, ctx, 2);
  CUstream s = cg_optstream(L, 2, ctx);
  CU(L, ctx, cuEventRecord, e->h.drv.event, s);
  lua_settop(L, 1);
  return 1;
}

/* e:synchronize([timeout_s]) */
static int event_synchronize(lua_State *L) {
  cg_event *e = check(L, 1);
  double t = cg_opttimeout(L, 2);
  cg_check_outside(L, e->h.ctx, "event:synchronize()",
                   "synchronize after the capture ends");
  cg_wait_event(L, e->h.ctx, e->h.drv.event, t);
  return 0;
}

/* e:query() -> true once the work before the record is done */
static int event_query(lua_State *L) {
  cg_event *e = check(L, 1);
  cg_check_outside(L, e->h.ctx, "event:query()", "query after the capture ends");
  CUresult r = cg_drv.cuEventQuery(e->h.drv.event);
  if (r != CUDA_ERROR_NOT_READY) cg_check(L, e->h.ctx, "cuEventQuery", r);
  lua_pushboolean(L, r != CUDA_ERROR_NOT_READY);
  return 1;
}

/* stop:elapsed(start) -> milliseconds from start to stop (waits for stop) */
static int event_elapsed(lua_State *L) {
  cg_event *stop = check(L, 1), *start = check(L, 2);
  cg_ctx *ctx = stop->h.ctx;
  if (!stop->timing || !start->timing)
    luaL_error(L, "elapsed: an event made with {timing = false} has no time");
  cg_check_outside(L, ctx, "event:elapsed()", "time after the capture ends");
  cg_wait_event(L, ctx, stop->h.drv.event, ctx->root->timeout);
  float ms = 0;
  CU(L, ctx, cuEventElapsedTime, &ms, start->h.drv.event,
     stop->h.drv.event);
  lua_pushnumber(L, ms);
  return 1;
}

static int event_tostring(lua_State *L) {
  cg_event *e = cg_toobj(L, 1, CG_EVENT);
  return cg_tostring(L, &e->h, " (%p%s)", (void *)e->h.drv.event,
                     e->h.owned ? "" : ", borrowed");
}

void event_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"record", event_record}, {"synchronize", event_synchronize},
    {"query", event_query}, {"elapsed", event_elapsed}, {"free", event_free},
    {"close", event_free}, {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", event_gc}, {"__close", event_free},
    {"__tostring", event_tostring}, {NULL, NULL}
  };
  cg_newtype(L, CG_EVENT, methods, meta, NULL);
  lua_pushcfunction(L, event_new);
  lua_setfield(L, -2, "event");
}
