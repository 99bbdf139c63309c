/* s:capture's core: a Lua closure run under stream capture into a graph,
   guarded (the closure runs under pcall; on any error the capture is
   ended, the partial graph destroyed and the error re-raised), and the
   bodies of conditional nodes captured into their body graphs. */
#include <string.h>
#include "graph/graph.h"

/* The registry slot of the set of pins of the capture in progress holds,
   between captures, an empty set the next capture may take (one a state):
   the set of a freed graph, emptied. */
static int pins_slot(lua_State *L, cg_ctx *ctx) {
  return cg_capstate_of(L, ctx)->pins_slot;
}

void cg_unpin_spare(lua_State *L, cg_ctx *ctx, int idx, unsigned id) {
  idx = lua_absindex(L, idx);
  cg_unpin_set(L, ctx, idx, id, 1);
  if (ctx->capture) return;
  lua_pushvalue(L, idx);
  lua_rawseti(L, LUA_REGISTRYINDEX, pins_slot(L, ctx));
}

/* Ends the capture on s. A failed end that leaves s capturing (the driver
   may) is ended again, so the stream is always usable afterwards; the
   partial graph of that second end is destroyed when owned (a body's
   graph belongs to its node). */
static CUresult endcapture(lua_State *L, cg_ctx *ctx, CUstream s,
                           CUgraph *g, int owned) {
  CUresult r = cg_drv.cuStreamEndCapture(s, g);
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  if (r != CUDA_SUCCESS &&
      cg_drv.cuStreamIsCapturing(s, &st) == CUDA_SUCCESS &&
      st != CU_STREAM_CAPTURE_STATUS_NONE) {
    CUgraph partial = NULL;
    cg_drv.cuStreamEndCapture(s, &partial);
    if (owned) cg_release(L, ctx, CG_H_GRAPH, (cg_handle){ .graph = partial });
  }
  return r;
}

/* Runs fn (at fnidx) under capture on the stream at sidx, passing it.
   restamp: the pins of the graph being updated (0: none), whose objects get
   their graph id back when this capture fails, if *alive (the graph is not
   freed meanwhile). On success returns the graph (the scalars it pinned in
   *scalars, its conditional nodes in *conds, what node.c recorded of its
   nodes in *recs) and leaves the set of pins on the stack; on any failure
   everything is undone (capture ended, partial graph destroyed, records
   and pins released) and the error is raised: the closure's own, or the
   driver's. */
CUgraph cg_capture_graph(lua_State *L, cg_ctx *ctx, cg_stream *s, int sidx,
                         int fnidx, CUstreamCaptureMode mode, unsigned id,
                         int *scalars, unsigned *conds, cg_recs **recs,
                         int restamp, const unsigned char *alive,
                         cg_stamps *stamps) {
  if (ctx->capture)
    luaL_error(L, "nested capture: a graph capture is already in progress");
  cg_capture cap = { .id = id, .serial = ++ctx->root->captures, .mode = mode };
  cap.top = &cap;
  cap.fn = lua_topointer(L, fnidx);
  cap.stamps = stamps;
  cap.pins = pins_slot(L, ctx);
  s->h.pinned = cap.serial; /* pinned before the allocations below */
  cg_use(&s->h, id);
  if (lua_rawgeti(L, LUA_REGISTRYINDEX, cap.pins) != LUA_TTABLE) {
    lua_pop(L, 1); /* no spare set */
    lua_createtable(L, 0, 8);
    lua_pushvalue(L, -1);
    lua_rawseti(L, LUA_REGISTRYINDEX, cap.pins);
  }
  int pins = lua_gettop(L);
  lua_pushvalue(L, sidx);
  lua_pushboolean(L, 1);
  lua_rawset(L, pins);
  cap.origin = s->h.drv.stream;
  lua_pushcfunction(L, cg_traceback);
  lua_pushvalue(L, fnidx);
  lua_pushvalue(L, sidx);
  ctx->root->broke.api = NULL; /* no call of this capture broke it yet */
  /* whole-device waits of other threads hold back; one that outlasts the
     state's timeout keeps the capture from beginning */
  int gate = cg_gate_enter(ctx);
  CUresult r = gate ? cg_drv.cuStreamBeginCapture(cap.origin, mode)
                    : CUDA_ERROR_TIMEOUT;
  int status = LUA_OK;
  CUresult mark = CUDA_SUCCESS, stamp = CUDA_SUCCESS;
  if (r == CUDA_SUCCESS) {
    cg_set_capture(ctx, &cap);
    if (stamps) /* the replay's start */
      stamp = cg_stamp_launch(ctx, cap.origin, cg_stamp_slot(ctx, cap.origin),
                              -2);
    if (stamp == CUDA_SUCCESS) status = lua_pcall(L, 1, 0, pins + 1);
    else lua_pop(L, 2); /* as a pcall leaves it: the handler */
    if (stamps && stamp == CUDA_SUCCESS && status == LUA_OK) /* a stamp's */
      stamp = cg_stamp_launch(ctx, cap.origin,              /* own time */
                              cg_stamp_slot(ctx, cap.origin),
                              (int)cg_recs_count(cap.recs));
    if (status == LUA_OK && stamp == CUDA_SUCCESS)
      mark = cg_recs_end(ctx); /* the chain's end */
    cg_set_capture(ctx, NULL);
  }
  CUgraph g = NULL;
  const char *api = "cuStreamBeginCapture"; /* the call that failed */
  CUresult end = r;
  if (r == CUDA_SUCCESS) {
    api = "cuStreamEndCapture";
    end = endcapture(L, ctx, cap.origin, &g, 1);
    if (mark != CUDA_SUCCESS) { /* the chain's end was not found */
      api = "cuStreamGetCaptureInfo";
      end = mark;
    }
    if (stamp != CUDA_SUCCESS) {
      api = "cuLaunchKernel";
      end = stamp;
    }
  }
  if (gate) cg_gate_leave(ctx);
  lua_pushboolean(L, 0);
  lua_rawseti(L, LUA_REGISTRYINDEX, cap.pins);
  cg_flush_deferred(L, ctx);
  size_t n = cg_recs_count(cap.recs); /* one recorded: the graph has one */
  if (status == LUA_OK && end == CUDA_SUCCESS && !n) {
    api = "cuGraphGetNodes";
    end = cg_drv.cuGraphGetNodes(g, NULL, &n);
  }
  /* a handle that drives no node would fail the instantiation */
  if (status == LUA_OK && end == CUDA_SUCCESS && n > 0 &&
      cap.handles == cap.conds) {
    *scalars = cap.scalars;
    *conds = cap.conds;
    *recs = cap.recs;
    cg_recs_done(ctx, cap.recs);
    lua_settop(L, pins);
    return g;
  }
  cg_recs_release(ctx, cap.recs);
  cg_unpin_set(L, ctx, pins, id, 0);
  if (restamp && *alive) cg_stamp_set(L, ctx, restamp, id);
  cg_release(L, ctx, CG_H_GRAPH, (cg_handle){ .graph = g });
  if (status != LUA_OK) lua_error(L); /* the closure's error, on top */
  if (!gate) cg_error_gate(L, ctx);
  if (end == CUDA_ERROR_STREAM_CAPTURE_UNJOINED) { /* name the forks */
    cg_driver_pusherror(L, api, end);
    cg_capture_pushforks(L, &cap);
    lua_setfield(L, -2, "unjoined");
    lua_error(L);
  }
  cg_check(L, ctx, api, end);
  if (n > 0)
    luaL_error(L, "a cugraph.Condition was set or passed to a kernel in this "
               "capture but drives no conditional node: make its node "
               "(s:loop_while, s:branch, s:switch) in the same capture");
  luaL_error(L, "the capture recorded no work: launch kernels, copies or "
             "fills on the capture stream inside the closure");
  return NULL;
}

static const char bodies_key = 'b';

CUstream cg_bodystream(lua_State *L, cg_ctx *ctx, int depth) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &bodies_key) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &bodies_key);
  }
  cg_stream *s = NULL;
  if (lua_rawgeti(L, -1, depth) == LUA_TUSERDATA) {
    s = lua_touserdata(L, -1);
  } else {
    lua_pop(L, 1);
    s = cg_newobj(L, ctx, sizeof *s, CG_STREAM);
    CU(L, ctx, cuStreamCreate, &s->h.drv.stream, CU_STREAM_NON_BLOCKING);
    s->h.open = 1;
    lua_pushvalue(L, -1);
    lua_rawseti(L, -3, depth);
  }
  lua_pop(L, 2);
  return s->h.drv.stream;
}

/* Makes *lvl the level of a body under the capture in progress, on the
   body's stream, and pushes what run_body calls: the message handler, the
   body (at fnidx) and the stream object (at sidx), which it returns. */
static cg_stream *body_level(lua_State *L, cg_ctx *ctx, cg_capture *lvl,
                             int sidx, int fnidx) {
  cg_capture *up = ctx->capture;
  *lvl = *up;
  sidx = lua_absindex(L, sidx);
  fnidx = lua_absindex(L, fnidx);
  lvl->origin = cg_bodystream(L, ctx, up->depth + 1);
  lvl->depth = up->depth + 1;
  lua_pushcfunction(L, cg_traceback);
  lua_pushvalue(L, fnidx);
  lua_pushvalue(L, sidx);
  return lua_touserdata(L, sidx);
}

/* Runs the body body_level pushed (its handler at h) at level lvl, s
   standing for the body's stream meanwhile; the pcall's status. */
static int run_body(lua_State *L, cg_ctx *ctx, cg_capture *lvl, cg_stream *s,
                    int h) {
  cg_capture *up = ctx->capture;
  CUstream outer = s->h.drv.stream;
  s->h.drv.stream = lvl->origin;
  cg_set_capture(ctx, lvl);
  int status = lua_pcall(L, 1, 0, h);
  cg_set_capture(ctx, up);
  s->h.drv.stream = outer;
  return status;
}

void cg_record_body(lua_State *L, cg_ctx *ctx, int sidx, int fnidx) {
  cg_capture lvl;
  int base = lua_gettop(L);
  cg_stream *s = body_level(L, ctx, &lvl, sidx, fnidx);
  if (run_body(L, ctx, &lvl, s, base + 1) != LUA_OK) lua_error(L);
  lua_settop(L, base);
}

void cg_capture_body(lua_State *L, cg_ctx *ctx, int sidx, int fnidx,
                     CUgraph body) {
  cg_capture *up = ctx->capture, lvl;
  int base = lua_gettop(L);
  cg_stream *s = body_level(L, ctx, &lvl, sidx, fnidx);
  const char *api = "cuStreamBeginCaptureToGraph";
  CUresult r = cg_drv.cuStreamBeginCaptureToGraph(lvl.origin, body, NULL,
                                                  NULL, 0, up->mode);
  int status = LUA_OK, began = r == CUDA_SUCCESS;
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  if (began) {
    api = "cuStreamGetCaptureInfo";
    r = cg_drv.cuStreamGetCaptureInfo(lvl.origin, &st, &lvl.seq, NULL, NULL,
                                      NULL, NULL);
  }
  if (r == CUDA_SUCCESS && up->top->stamps) { /* a turn's start, on a */
    api = "cuLaunchKernel";                   /* clock of this body's */
    lvl.stampslot = cg_stamp_newslot(up->top->stamps);
    r = cg_stamp_launch(ctx, lvl.origin, lvl.stampslot, -1);
  }
  if (r == CUDA_SUCCESS) status = run_body(L, ctx, &lvl, s, base + 1);
  if (began) { /* the body graph belongs to its node: never destroyed here */
    CUgraph g = NULL;
    CUresult end = endcapture(L, ctx, lvl.origin, &g, 0);
    if (r == CUDA_SUCCESS && end != CUDA_SUCCESS) {
      api = "cuStreamEndCapture";
      r = end;
    }
  }
  if (status != LUA_OK) lua_error(L);
  cg_check(L, ctx, api, r);
  size_t n = 0;
  CU(L, ctx, cuGraphGetNodes, body, NULL, &n);
  if (!n)
    luaL_error(L, "a conditional body recorded no work: launch kernels, "
               "copies or fills on the stream it is given");
  lua_settop(L, base);
}

