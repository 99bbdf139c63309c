/* cugraph.Graph: a Lua closure captured from a stream into a CUDA graph.
   Capture is guarded (the closure runs under pcall; on any error the capture
   is ended, the partial graph destroyed and the error re-raised), and a graph
   pins every object the capture used (user value: a set of them), so the
   collector never frees what it reads and an explicit free is refused.
   Conditional nodes (cond.c) capture their bodies through cg_capture_body;
   g:launch() inside a capture embeds the graph as a child graph node. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "base/core.h"

static const char *const modes[] = { "global", "thread_local", "relaxed", NULL };
static const CUstreamCaptureMode mode_values[] = {
  CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
  CU_STREAM_CAPTURE_MODE_RELAXED
};

int cg_capturing_on(lua_State *L, cg_ctx *ctx, CUstream s) {
  if (ctx->capture && s == ctx->capture->origin) return 1;
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  if (ctx->capture && ctx->capture->depth) { /* a body: its own capture */
    cuuint64_t seq = 0;
    CU(L, ctx, cuStreamGetCaptureInfo, s, &st, &seq, NULL, NULL, NULL, NULL);
    return st == CU_STREAM_CAPTURE_STATUS_ACTIVE && seq == ctx->capture->seq;
  }
  CU(L, ctx, cuStreamIsCapturing, s, &st);
  return st == CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

static cg_obj *asobj(lua_State *L, cg_ctx *ctx, int idx) {
  if (!lua_getmetatable(L, idx)) return NULL;
  const void *mt = lua_topointer(L, -1);
  lua_pop(L, 1);
  for (int k = 0; k < CG_NKINDS; k++)
    if (mt == ctx->mt[k]) return lua_touserdata(L, idx);
  return NULL;
}

void cg_pin(lua_State *L, cg_ctx *ctx, int idx) {
  cg_obj *o;
  if (ctx->capture && (o = asobj(L, ctx, idx))) cg_pinobj(L, ctx, o, idx);
}

/* o is the object at idx. It counts as used before the set grows, so a
   finalizer that the allocation runs cannot free it; one freed earlier in
   the same call is refused here. */
void cg_pinobj_new(lua_State *L, cg_ctx *ctx, cg_obj *o, int idx) {
  o->pinned = ctx->capture->serial;
  if (o->uses++ == 0) o->graph = ctx->capture->id;
  ctx->capture->top->scalars += o->kind == CG_SCALAR;
  idx = lua_absindex(L, idx);
  lua_rawgeti(L, LUA_REGISTRYINDEX, ctx->capture->pins);
  lua_pushvalue(L, idx);
  lua_pushboolean(L, 1);
  lua_rawset(L, -3);
  lua_pop(L, 1);
  cg_isopen(L, o);
  cg_obj *up = NULL; /* and so a kernel's module, or a view's parent */
  if (o->kind == CG_KERNEL) {
    cg_kinfo k;
    cg_kernel_info(o, &k);
    up = k.module;
  } else if (o->kind == CG_BUFFER && ((cg_buffer *)o)->parent) {
    up = &((cg_buffer *)o)->parent->h;
  }
  if (up && up->pinned != ctx->capture->serial) {
    lua_getiuservalue(L, idx, 1); /* up itself */
    cg_pinobj_new(L, ctx, up, -1);
    lua_pop(L, 1);
  }
}

/* Releases every pin of graph id in the set at idx. An object keeps the id
   of a graph that holds it, or 0 when that is not known. Sets are only
   reached through the debug library otherwise; keys that are not objects
   of ours are passed over. empty: the set is emptied too. */
void cg_unpin_set(lua_State *L, cg_ctx *ctx, int idx, unsigned id,
                  int empty) {
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (empty) { /* an existing key: allowed while traversing */
      lua_pushvalue(L, -1);
      lua_pushnil(L);
      lua_rawset(L, idx);
    }
    cg_obj *o = asobj(L, ctx, -1);
    if (!o) continue;
    if (o->uses) o->uses--;
    if (!o->uses || o->graph == id) o->graph = 0;
    if (!o->uses) cg_unpinned(L, o);
  }
}

/* The registry slot of the set of pins of the capture in progress, and
   between captures of an empty set the next capture may take (one a
   state): the set of a freed graph, emptied. */
static int pins_slot(lua_State *L, cg_ctx *ctx) {
  cg_ctx *root = ctx->root;
  if (!root->pins_slot) {
    lua_pushboolean(L, 0);
    root->pins_slot = luaL_ref(L, LUA_REGISTRYINDEX);
  }
  return root->pins_slot;
}

/* Unpins the set at idx of graph id, which nothing else holds now, and
   keeps it, empty, for the next capture (unless one runs: the slot holds
   its set). */
static void unpin_spare(lua_State *L, cg_ctx *ctx, int idx, unsigned id) {
  idx = lua_absindex(L, idx);
  cg_unpin_set(L, ctx, idx, id, 1);
  if (ctx->capture) return;
  lua_pushvalue(L, idx);
  lua_rawseti(L, LUA_REGISTRYINDEX, pins_slot(L, ctx));
}

/* Marks every object of the set at idx as held by graph id. */
static void stamp(lua_State *L, cg_ctx *ctx, int idx, unsigned id) {
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    cg_obj *o = asobj(L, ctx, -2);
    if (o) o->graph = id;
    lua_pop(L, 1);
  }
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
    if (owned) cg_release(L, ctx, CG_FREE_GRAPH, partial);
  }
  return r;
}

/* Message handler: a string error gains the traceback; others stay as
   they are. */
int cg_traceback(lua_State *L) {
  if (lua_type(L, 1) == LUA_TSTRING)
    luaL_traceback(L, L, lua_tostring(L, 1), 1);
  else
    lua_settop(L, 1);
  return 1;
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
static CUgraph capture(lua_State *L, cg_ctx *ctx, cg_stream *s, int sidx,
                       int fnidx, CUstreamCaptureMode mode, unsigned id,
                       int *scalars, unsigned *conds, cg_recs **recs,
                       int restamp, const unsigned char *alive) {
  if (ctx->capture)
    luaL_error(L, "nested capture: a graph capture is already in progress");
  cg_capture cap = { .id = id, .serial = ++ctx->root->captures, .mode = mode };
  cap.top = &cap;
  cap.fn = lua_topointer(L, fnidx);
  cap.pins = pins_slot(L, ctx);
  s->h.pinned = cap.serial; /* pinned before the allocations below */
  if (s->h.uses++ == 0) s->h.graph = id;
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
  cap.origin = s->s;
  lua_pushcfunction(L, cg_traceback);
  lua_pushvalue(L, fnidx);
  lua_pushvalue(L, sidx);
  CUresult r = cg_drv.cuStreamBeginCapture(s->s, mode);
  int status = LUA_OK;
  if (r == CUDA_SUCCESS) {
    cg_set_capture(ctx, &cap);
    status = lua_pcall(L, 1, 0, pins + 1);
    cg_set_capture(ctx, NULL);
  }
  CUgraph g = NULL;
  const char *api = "cuStreamBeginCapture"; /* the call that failed */
  CUresult end = r;
  if (r == CUDA_SUCCESS) {
    api = "cuStreamEndCapture";
    end = endcapture(L, ctx, s->s, &g, 1);
  }
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
  if (restamp && *alive) stamp(L, ctx, restamp, id);
  cg_release(L, ctx, CG_FREE_GRAPH, g);
  if (status != LUA_OK) lua_error(L); /* the closure's error, on top */
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
    CU(L, ctx, cuStreamCreate, &s->s, CU_STREAM_NON_BLOCKING);
    s->h.open = 1;
    lua_pushvalue(L, -1);
    lua_rawseti(L, -3, depth);
  }
  lua_pop(L, 2);
  return s->s;
}

void cg_capture_body(lua_State *L, cg_ctx *ctx, int sidx, int fnidx,
                     CUgraph body) {
  cg_capture *up = ctx->capture, lvl = *up;
  sidx = lua_absindex(L, sidx);
  fnidx = lua_absindex(L, fnidx);
  lvl.origin = cg_bodystream(L, ctx, up->depth + 1);
  lvl.depth = up->depth + 1;
  cg_stream *s = lua_touserdata(L, sidx);
  int base = lua_gettop(L);
  lua_pushcfunction(L, cg_traceback);
  lua_pushvalue(L, fnidx);
  lua_pushvalue(L, sidx);
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
  if (r == CUDA_SUCCESS) { /* s stands for the body's stream meanwhile */
    CUstream outer = s->s;
    s->s = lvl.origin;
    cg_set_capture(ctx, &lvl);
    status = lua_pcall(L, 1, 0, base + 1);
    cg_set_capture(ctx, up);
    s->s = outer;
  }
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

/* Graph ids start at 1; the capture of graph #n pins with id n. */
static unsigned nextid(cg_ctx *ctx) { return ++ctx->root->graph_ids; }

/* The scalar at idx, or NULL. */
static cg_scalar *asscalar(lua_State *L, cg_ctx *ctx, int idx) {
  if (!lua_getmetatable(L, idx)) return NULL;
  const void *mt = lua_topointer(L, -1);
  lua_pop(L, 1);
  return mt == ctx->mt[CG_SCALAR] ? lua_touserdata(L, idx) : NULL;
}

/* Collects the n pinned scalars into the graph's array (pins at idx). */
static void collect(lua_State *L, cg_graph *gr, int idx, int n) {
  cg_scalar **a = n ? malloc((size_t)n * sizeof *a) : NULL;
  if (n && !a) luaL_error(L, "out of host memory");
  free(gr->scalars);
  gr->scalars = a;
  gr->nscalars = 0;
  if (!n) return;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    cg_scalar *sc = asscalar(L, gr->h.ctx, -1);
    if (sc && gr->nscalars < n) a[gr->nscalars++] = sc;
  }
}

/* Releases the graph (at idx) and its pins; idempotent. */
static void close_graph(lua_State *L, cg_graph *gr, int idx) {
  if (!gr->h.open) return;
  gr->h.open = 0;
  cg_untrack_graph(gr);
  cg_release(L, gr->h.ctx, CG_FREE_EXEC, gr->exec);
  cg_release(L, gr->h.ctx, CG_FREE_GRAPH, gr->g);
  gr->exec = NULL;
  gr->g = NULL;
  free(gr->scalars);
  gr->scalars = NULL;
  gr->nscalars = 0;
  int busy = cg_recs_busy(gr->recs); /* a reader holds them: __gc frees */
  if (!busy) {                       /* them, and the pins stay as they are */
    cg_recs_release(gr->h.ctx, gr->recs);
    gr->recs = NULL;
  }
  if (lua_getiuservalue(L, idx, 1) == LUA_TTABLE) {
    if (busy) cg_unpin_set(L, gr->h.ctx, -1, gr->id, 0);
    else unpin_spare(L, gr->h.ctx, -1, gr->id);
  }
  lua_pop(L, 1);
  lua_pushnil(L);
  lua_setiuservalue(L, idx, 1);
}

/* s:capture(fn [, {mode=, auto_free=, upload=}]) -> Graph */
static int stream_capture(lua_State *L) {
  cg_stream *s = cg_checkself(L, CG_STREAM);
  cg_ctx *ctx = s->h.ctx;
  luaL_checktype(L, 2, LUA_TFUNCTION);
  int mode = 1, auto_free = 0, upload = 0;
  if (!lua_isnoneornil(L, 3)) {
    luaL_checktype(L, 3, LUA_TTABLE);
    if (lua_getfield(L, 3, "mode") != LUA_TNIL) {
      const char *name = lua_tostring(L, -1);
      for (mode = 0; modes[mode] && (!name || strcmp(modes[mode], name));)
        mode++;
      if (!modes[mode])
        luaL_argerror(L, 3, lua_pushfstring(L, "opts.mode must be "
                      "\"thread_local\", \"global\" or \"relaxed\", got %s",
                      name ? name : luaL_typename(L, -1)));
    }
    lua_getfield(L, 3, "auto_free");
    auto_free = lua_toboolean(L, -1);
    lua_getfield(L, 3, "upload");
    upload = lua_toboolean(L, -1);
    lua_pop(L, 3);
  }
  lua_settop(L, 2);
  cg_graph *gr = cg_newobj(L, ctx, sizeof *gr, CG_GRAPH); /* 3 */
  gr->id = nextid(ctx);
  gr->mode = mode_values[mode];
  gr->stream = s->s;
  int scalars;
  cg_recs *recs;
  CUgraph g = capture(L, ctx, s, 1, 2, gr->mode, gr->id, &scalars,
                      &gr->conds, &recs, 0, NULL); /* 4: the pins */
  gr->g = g;
  gr->recs = recs;
  gr->allocs = cg_recs_allocs(recs);
  gr->auto_free = (unsigned char)auto_free;
  gr->h.open = 1; /* from here __gc releases the graph and the pins */
  cg_track_graph(gr); /* until close_graph */
  lua_pushvalue(L, 4);
  lua_setiuservalue(L, 3, 1);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, 3, 2);
  collect(L, gr, 4, scalars);
  const char *api = "cuGraphInstantiate";
  CUresult r = cg_drv.cuGraphInstantiate(&gr->exec, g, auto_free
      ? CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH : 0);
  if (r == CUDA_SUCCESS && upload) {
    api = "cuGraphUpload";
    r = cg_drv.cuGraphUpload(gr->exec, gr->stream);
  }
  if (r != CUDA_SUCCESS) { /* the graph never reaches the user: undo */
    close_graph(L, gr, 3);
    cg_check(L, ctx, api, r);
  }
  lua_settop(L, 3);
  return 1;
}

void cg_graph_rescan(lua_State *L, cg_graph *gr, int gidx) {
  int n = 0;
  lua_getiuservalue(L, gidx, 1);
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    lua_pop(L, 1);
    n += asscalar(L, gr->h.ctx, -1) != NULL;
  }
  collect(L, gr, lua_gettop(L), n);
  lua_pop(L, 1);
}

void cg_graph_parts(lua_State *L, int idx, CUgraph *g, CUgraphExec *x) {
  cg_graph *gr = cg_toobj(L, idx, CG_GRAPH);
  if (gr->h.open) cg_graph_sync(L, gr);
  *g = gr->h.open ? gr->g : NULL;
  *x = gr->h.open ? gr->exec : NULL;
}

static cg_graph *check(lua_State *L) { return cg_checkobj(L, 1, CG_GRAPH); }

/* :free(), :close() and __close: refused while a live graph embeds it */
static int graph_free(lua_State *L) {
  cg_graph *gr = cg_toobj(L, 1, CG_GRAPH);
  if (gr->h.open) cg_canfree(L, &gr->h);
  close_graph(L, gr, 1);
  return 0;
}

/* __gc: an embedding graph pins this one, so only lua_close gets here
   while it lives; its copy of the graph does not need this one's. */
static int graph_gc(lua_State *L) {
  cg_graph *gr = cg_toobj(L, 1, CG_GRAPH);
  close_graph(L, gr, 1);
  cg_recs_free(gr->recs); /* what a reader held at the close */
  gr->recs = NULL;
  return 0;
}

static CUstream launchstream(lua_State *L, cg_graph *gr, int idx,
                             const char *what) {
  cg_ctx *ctx = gr->h.ctx;
  if (ctx->capture)
    luaL_error(L, "graph:%s() inside a graph capture: launch the graph "
               "after the capture ends", what);
  return lua_isnoneornil(L, idx) ? gr->stream : cg_optstream(L, idx, ctx);
}

static void launch(lua_State *L, cg_graph *gr, CUstream st) {
  for (int i = 0; i < gr->nscalars; i++)
    cg_scalar_flush(L, gr->scalars[i], st);
  if (gr->allocs) cg_graph_allocs(L, gr, 0);
  CU(L, gr->h.ctx, cuGraphLaunch, gr->exec, st);
  if (gr->allocs) cg_graph_allocs(L, gr, 1);
  gr->launches++;
}

/* g:launch([stream]) inside a capture: a child graph node, a copy of the
   graph made by the driver, after the stream's work (the graph's own
   capture stream by default). The graph being captured pins this one and
   everything it pins. */
static int embed(lua_State *L, cg_graph *gr) {
  cg_ctx *ctx = gr->h.ctx;
  if (gr->conds)
    luaL_error(L, "cugraph.Graph #%d has conditional nodes, which the driver "
               "cannot embed as a child graph: capture its work inside this "
               "capture instead", (int)gr->id);
  if (gr->id == ctx->capture->id)
    luaL_error(L, "cugraph.Graph #%d cannot contain itself", (int)gr->id);
  lua_settop(L, 2);
  if (lua_isnil(L, 2)) {
    lua_pop(L, 1);
    lua_getiuservalue(L, 1, 2);
  }
  cg_stream *s = cg_checkobj(L, 2, CG_STREAM);
  if (s->h.ctx != ctx) cg_mixed(L, ctx, s->h.ctx, "graph:launch()");
  cg_pinobj(L, ctx, &s->h, 2);
  cg_pinobj(L, ctx, &gr->h, 1);
  if (!cg_capturing_on(L, ctx, s->s))
    luaL_error(L, "graph:launch() inside a graph capture on a stream that is "
               "not part of it; make the stream wait on the capture stream "
               "first");
  /* and all it pins: the copy uses them whatever becomes of the graph (an
     update, a rebind), and its scalars flush before each launch */
  lua_getiuservalue(L, 1, 1);
  lua_pushnil(L);
  while (lua_next(L, 3)) {
    lua_pop(L, 1);
    cg_pin(L, ctx, -1);
  }
  lua_pop(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, ctx->capture->pins); /* 3 */
  CUgraphNodeParams p;
  memset(&p, 0, sizeof p);
  p.type = CU_GRAPH_NODE_TYPE_GRAPH;
  p.graph.graph = gr->g;
  lua_pushlightuserdata(L, cg_capture_node(L, ctx, s->s, &p));
  lua_pushvalue(L, 1); /* for g:nodes(true): the node's graph */
  lua_rawset(L, 3);
  return 0;
}

/* g:launch([stream]) */
static int graph_launch(lua_State *L) {
  cg_graph *gr = cg_checkself(L, CG_GRAPH);
  if (gr->h.ctx->capture) return embed(L, gr);
  launch(L, gr, launchstream(L, gr, 2, "launch"));
  return 0;
}

/* g:replay(n [, stream]): n launches, the loop in C */
static int graph_replay(lua_State *L) {
  cg_graph *gr = cg_checkself(L, CG_GRAPH);
  lua_Integer n = luaL_checkinteger(L, 2);
  luaL_argcheck(L, n >= 0, 2, "count must not be negative");
  CUstream st = launchstream(L, gr, 3, "replay");
  for (lua_Integer i = 0; i < n; i++) launch(L, gr, st);
  return 0;
}

/* g:upload([stream]): moves the graph's work to the device ahead of launch */
static int graph_upload(lua_State *L) {
  cg_graph *gr = check(L);
  CU(L, gr->h.ctx, cuGraphUpload, gr->exec, launchstream(L, gr, 2, "upload"));
  return 0;
}

static const char *const kinds[] = {
  "kernel", "memcpy", "memset", "host", "graph", "empty", "wait_event",
  "event_record", "ext_semas_signal", "ext_semas_wait", "mem_alloc",
  "mem_free", "batch_mem_op", "conditional"
};

/* Pushes the list of the kinds of g's nodes; g belongs to owner. deep: a
   conditional or child graph node is {kind =, type =, bodies = {list,
   ...}}, from what its capture recorded in the pins at pidx (a light
   userdata key per node: a table {type, body graphs...}, or the embedded
   Graph). Returns the count. */
static size_t pushnodes(lua_State *L, cg_obj *owner, CUgraph g, int pidx,
                        int deep) {
  cg_ctx *ctx = owner->ctx;
  size_t n = 0;
  luaL_checkstack(L, 8, NULL);
  cg_isopen(L, owner);
  CU(L, ctx, cuGraphGetNodes, g, NULL, &n);
  size_t cap = n ? n : 1;
  /* every allocation first: a finalizer they run may free the graph */
  CUgraphNode *nodes = lua_newuserdatauv(L, cap * (sizeof *nodes +
                                         sizeof(CUgraphNodeType)), 0);
  CUgraphNodeType *types = (CUgraphNodeType *)(nodes + cap);
  lua_createtable(L, (int)n, 0);
  cg_isopen(L, owner);
  CU(L, ctx, cuGraphGetNodes, g, nodes, &n);
  if (n > cap) n = cap;
  for (size_t i = 0; i < n; i++)
    CU(L, ctx, cuGraphNodeGetType, nodes[i], &types[i]);
  for (size_t i = 0; i < n; i++) {
    int t = (int)types[i];
    const char *kind = (size_t)t < sizeof kinds / sizeof *kinds ? kinds[t]
                                                                : NULL;
    int noted = kind && deep && lua_rawgetp(L, pidx, nodes[i]) != LUA_TNIL;
    if (kind && deep && !noted) lua_pop(L, 1);
    if (!kind) lua_pushfstring(L, "type %d", t);
    else if (!noted) lua_pushstring(L, kind);
    if (noted) { /* what the capture noted, at the top */
      int at = lua_gettop(L);
      lua_createtable(L, 0, 3);
      lua_pushstring(L, kind);
      lua_setfield(L, -2, "kind");
      lua_newtable(L); /* at + 2: the bodies */
      cg_graph *in = cg_testobj(L, at, CG_GRAPH);
      if (in && in->h.open) { /* a child graph: the embedded graph's nodes */
        lua_pushliteral(L, "graph");
        lua_setfield(L, at + 1, "type");
        lua_getiuservalue(L, at, 1);
        pushnodes(L, &in->h, in->g, lua_gettop(L), 1);
        lua_rawseti(L, at + 2, 1);
        lua_pop(L, 1);
      } else if (lua_istable(L, at)) {
        lua_getfield(L, at, "type");
        lua_setfield(L, at + 1, "type");
        for (int j = 1; lua_rawgeti(L, at, j) == LUA_TLIGHTUSERDATA; j++) {
          CUgraph body = lua_touserdata(L, -1);
          lua_pop(L, 1);
          pushnodes(L, owner, body, pidx, 1);
          lua_rawseti(L, at + 2, j);
        }
        lua_pop(L, 1);
      }
      lua_setfield(L, at + 1, "bodies");
      lua_replace(L, at);
    }
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_remove(L, -2);
  return n;
}

/* g:nodes([deep]) -> count, {kind, ...}; deep: with the bodies of
   conditional nodes and the nodes of child graphs. g:nodes("detail") is
   node.c's. */
static int graph_nodes(lua_State *L) {
  cg_graph *gr = check(L);
  if (lua_type(L, 2) == LUA_TSTRING && !strcmp(lua_tostring(L, 2), "detail"))
    return cg_nodes_detail(L, gr);
  int deep = lua_toboolean(L, 2);
  lua_settop(L, 1);
  lua_getiuservalue(L, 1, 1); /* 2: the pins */
  size_t n = pushnodes(L, &gr->h, gr->g, 2, deep);
  lua_pushinteger(L, (lua_Integer)n);
  lua_insert(L, -2);
  return 2;
}

/* g:dot(path [, verbose]): Graphviz description of the graph */
static int graph_dot(lua_State *L) {
  cg_graph *gr = check(L);
  const char *path = luaL_checkstring(L, 2);
  unsigned flags = lua_toboolean(L, 3) ? CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE : 0;
  if (!flags && cg_dot(L, gr)) return 1;
  CU(L, gr->h.ctx, cuGraphDebugDotPrint, gr->g, path, flags);
  lua_settop(L, 1);
  return 1;
}

static const char *update_reason(CUgraphExecUpdateResult r) {
  switch (r) {
  case CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED:
    return "the topology changed (nodes or edges added or removed)";
  case CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED:
    return "a node changed type";
  case CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED:
    return "a kernel node launches a different function";
  case CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED:
    return "a node's parameters changed in a way that cannot be updated";
  case CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED:
    return "a node's change is not supported";
  case CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE:
    return "an unsupported function change";
  case CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED:
    return "a node's attributes changed";
  default:
    return "the graphs differ";
  }
}

/* g:update(fn): captures fn again on the graph's stream and applies the new
   parameters to the instantiated graph in place; the topology must match. */
static int graph_update(lua_State *L) {
  cg_graph *gr = check(L);
  cg_ctx *ctx = gr->h.ctx;
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_settop(L, 2);
  if (gr->conds)
    luaL_error(L, "cugraph.Graph #%d has conditional nodes, which the driver "
               "cannot update: capture a new graph", (int)gr->id);
  if (cg_recs_busy(gr->recs))
    luaL_error(L, "cugraph.Graph #%d: g:update while a method of the graph "
               "reads its nodes (from a finalizer?)", (int)gr->id);
  lua_getiuservalue(L, 1, 2); /* 3: the capture stream */
  lua_getiuservalue(L, 1, 1); /* 4: the pins in use */
  int scalars;
  unsigned conds;
  cg_recs *recs;
  CUgraph g = capture(L, ctx, cg_checkobj(L, 3, CG_STREAM), 3, 2, gr->mode,
                      gr->id, &scalars, &conds, &recs, 4,
                      &gr->h.open); /* 5: the new pins */
  CUgraphExecUpdateResultInfo info;
  memset(&info, 0, sizeof info);
  CUresult r = !gr->h.open ? CUDA_ERROR_INVALID_HANDLE
             : conds ? CUDA_ERROR_NOT_SUPPORTED
             : cg_drv.cuGraphExecUpdate(gr->exec, g, &info);
  if (r == CUDA_SUCCESS && gr->allocs != cg_recs_allocs(recs))
    r = CUDA_ERROR_NOT_SUPPORTED;
  if (r != CUDA_SUCCESS) {
    cg_recs_release(ctx, recs);
    cg_unpin_set(L, ctx, 5, gr->id, 0);
    if (gr->h.open) stamp(L, ctx, 4, gr->id);
    cg_release(L, ctx, CG_FREE_GRAPH, g);
    if (!gr->h.open)
      return luaL_error(L, "cugraph.Graph #%d was freed inside its own "
                        "update", (int)gr->id);
    if (conds)
      return luaL_error(L, "the update of cugraph.Graph #%d made conditional "
                        "nodes, which the driver cannot add to it: capture a "
                        "new graph", (int)gr->id);
    if (r == CUDA_ERROR_NOT_SUPPORTED)
      return luaL_error(L, "the update of cugraph.Graph #%d allocates memory "
                        "it does not free in another way than its capture: "
                        "capture a new graph", (int)gr->id);
    if (r != CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE)
      cg_check(L, ctx, "cuGraphExecUpdate", r);
    cg_pusherror(L, "cuGraphExecUpdate", (int)r,
                 cg_driver_errname(r, (char[CG_ERRNAME]){0}),
                 lua_pushfstring(L, "graph update failed: %s; capture a new "
                                 "graph instead", update_reason(info.result)));
    return lua_error(L);
  }
  stamp(L, ctx, 5, gr->id);
  lua_pushvalue(L, 5);
  lua_setiuservalue(L, 1, 1);
  unpin_spare(L, ctx, 4, gr->id);
  cg_release(L, ctx, CG_FREE_GRAPH, gr->g);
  gr->g = g;
  cg_recs_release(ctx, gr->recs); /* not busy: checked first */
  gr->recs = recs;
  gr->updated = 1; /* the exec's nodes stay those of the first capture */
  collect(L, gr, 5, scalars);
  lua_settop(L, 1);
  return 1;
}

/* g:launches(): how many times the graph was launched */
static int graph_launches(lua_State *L) {
  lua_pushinteger(L, ((cg_graph *)cg_toobj(L, 1, CG_GRAPH))->launches);
  return 1;
}

/* g:handle(): the CUgraphExec as an integer, for foreign code; valid while
   the graph lives */
static int graph_handle(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)(intptr_t)
                  ((cg_graph *)cg_checkself(L, CG_GRAPH))->exec);
  return 1;
}

/* g:id(): the number that messages name the graph by */
static int graph_id(lua_State *L) {
  lua_pushinteger(L, ((cg_graph *)cg_toobj(L, 1, CG_GRAPH))->id);
  return 1;
}

static int graph_tostring(lua_State *L) {
  cg_graph *gr = cg_toobj(L, 1, CG_GRAPH);
  size_t n = 0;
  if (gr->h.open) cg_drv.cuGraphGetNodes(gr->g, NULL, &n); /* 0 if it fails */
  return cg_tostring(L, &gr->h, " #%d (%d node%s, %I launch%s)", (int)gr->id,
                     (int)n, n == 1 ? "" : "s",
                     (LUAI_UACINT)gr->launches, gr->launches == 1 ? "" : "es");
}

void graph_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"launch", graph_launch}, {"replay", graph_replay},
    {"upload", graph_upload}, {"nodes", graph_nodes}, {"dot", graph_dot},
    {"update", graph_update}, {"launches", graph_launches}, {"id", graph_id},
    {"handle", graph_handle},
    {"free", graph_free}, {"close", graph_free},
    {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", graph_gc}, {"__close", graph_free},
    {"__tostring", graph_tostring}, {NULL, NULL}
  };
  cg_newtype(L, CG_GRAPH, methods, meta, NULL);
  luaL_getmetatable(L, cg_kind_names[CG_STREAM]);
  lua_getfield(L, -1, "methods");
  lua_pushvalue(L, -2); /* the metatable, as cg_checkself wants */
  lua_pushcclosure(L, stream_capture, 1);
  lua_setfield(L, -2, "capture");
  lua_pop(L, 2);
}
