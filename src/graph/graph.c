/* cugraph.Graph: a Lua closure captured from a stream into a CUDA graph
   (stream_capture.c), instantiated, launched and replayed. A graph pins
   every object the capture used (user value: a set of them), so the
   collector never frees what it reads and an explicit free is refused.
   g:launch() inside a capture embeds the graph as a child graph node. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "graph/graph.h"

static const char *const modes[] = { "global", "thread_local", "relaxed", NULL };
static const CUstreamCaptureMode mode_values[] = {
  CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
  CU_STREAM_CAPTURE_MODE_RELAXED
};

/* Graph ids start at 1; the capture of graph #n pins with id n. */
static unsigned nextid(cg_ctx *ctx) { return ++ctx->root->graph_ids; }

/* The scalar at idx, or NULL. */
static cg_scalar *asscalar(lua_State *L, int idx) {
  return cg_testobj(L, idx, CG_SCALAR);
}

/* Collects the n pinned scalars into the graph's array (pins at idx), and
   counts the pinned buffers of map scopes. */
static void collect(lua_State *L, cg_graph *gr, int idx, int n) {
  cg_scalar **a = n ? malloc((size_t)n * sizeof *a) : NULL;
  if (n && !a) luaL_error(L, "out of host memory");
  free(gr->scalars);
  gr->scalars = a;
  gr->nscalars = 0;
  /* outside every map scope no pin can be a scoped buffer but those
     counted before (a rebind keeps the count: a check too many at most) */
  if (!n && !gr->h.ctx->root->mapped) return;
  gr->scoped = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    cg_scalar *sc = asscalar(L, -1);
    cg_obj *o = cg_toany(L, gr->h.ctx, -1);
    if (sc && gr->nscalars < n) a[gr->nscalars++] = sc;
    gr->scoped += o && o->scoped;
  }
}

/* Raises when a buffer of a map scope that the graph (at idx) captured
   outlived its scope: its memory is no longer mapped. */
static void check_scoped(lua_State *L, cg_graph *gr, int idx) {
  lua_getiuservalue(L, idx, 1);
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    lua_pop(L, 1);
    cg_obj *o = cg_toany(L, gr->h.ctx, -1);
    if (o && o->scoped && !o->open)
      luaL_error(L, "cugraph.Graph #%d captured a buffer of a GLResource's "
                 "map scope, which has ended: its memory is no longer "
                 "mapped; capture and free the graph inside the scope",
                 (int)gr->id);
  }
  lua_pop(L, 1);
}

/* The keep of the memory the pins at pidx hold (cg_keep_*, base.h): the
   graph hands it over when it goes, behind its last launch (keep_leave:
   no user object, so its launches cost the device nothing more), but for
   a graph with conditional nodes, which lends its own exec to the C
   graphs made from it (cugraph_tograph) for an engine to launch unseen:
   the driver holds its keep through a user object retained by g, as a C
   graph's. The failure, its api in *api (NULL: out of host memory).
   Calls no Lua. */
static CUresult keep_pins(lua_State *L, cg_graph *gr, int pidx, CUgraph g,
                          cg_keep **keep, const char **api) {
  *keep = NULL;
  cg_keep *k = cg_keep_new(gr->h.ctx);
  int ok = k != NULL;
  CUresult r = CUDA_SUCCESS;
  lua_pushnil(L);
  while (ok && lua_next(L, pidx)) {
    lua_pop(L, 1);
    cg_obj *o = cg_toany(L, gr->h.ctx, -1);
    if (o && (r = cg_keep_add(k, o, api)) != CUDA_SUCCESS) ok = 0;
  }
  if (!ok) {
    if (k) lua_pop(L, 1); /* the key the loop stopped at */
    cg_keep_free(k);
    if (r == CUDA_SUCCESS) *api = NULL;
    return r == CUDA_SUCCESS ? CUDA_ERROR_OUT_OF_MEMORY : r;
  }
  if (gr->conds && (r = cg_keep_attach(k, g, api)) != CUDA_SUCCESS) {
    if (r == CUDA_ERROR_NOT_SUPPORTED) { /* no user objects: still ours */
      cg_keep_free(k);
      *api = "cuUserObjectCreate";
    }
    return r;
  }
  *keep = k;
  return CUDA_SUCCESS;
}

/* Lets go of keep k of graph gr, once its last launch is over: the
   driver's release of it, or a host function behind the last launch. */
static void keep_leave(lua_State *L, cg_graph *gr, cg_keep *k) {
  if (gr->conds) cg_keep_leave(k, 0); /* an engine's launches too */
  else if (!gr->last_launch) cg_keep_free(k); /* none: nothing in flight */
  else cg_keep_after(L, gr->h.ctx, k, gr->last_stream);
}

/* A stream of ctx is about to be destroyed (ctx->stream_gone): no graph
   waits on it later; a graph last launched on it lets its keep go at once
   when it goes (its frees then wait for the device). */
static void stream_gone(cg_ctx *ctx, CUstream s) {
  cg_graphstate *gs = ctx->root->graphstate;
  for (cg_graph *gr = gs ? gs->graphs : NULL; gr; gr = gr->next)
    if (gr->last_stream == s) gr->last_stream = NULL;
}

/* Releases the graph (at idx) and its pins; idempotent. */
static void close_graph(lua_State *L, cg_graph *gr, int idx) {
  if (!gr->h.open) return;
  if (gr->keep) keep_leave(L, gr, gr->keep);
  gr->keep = NULL;
  gr->h.open = 0;
  cg_untrack_graph(gr);
  /* the driver's destroy of an exec with conditional nodes waits for its
     launches: one that may be in flight goes after the last, its graph
     with it (one that C graphs share, through the reaper: cg_share.waits) */
  if (gr->conds && gr->last_launch && !gr->h.share)
    cg_keep_exec_after(L, gr->h.ctx, &gr->h, &gr->g, gr->last_stream);
  cg_release_obj(L, &gr->h);
  cg_release(L, gr->h.ctx, CG_H_GRAPH, (cg_handle){ .graph = gr->g });
  gr->g = NULL;
  free(gr->scalars);
  gr->scalars = NULL;
  gr->nscalars = 0;
  free(gr->valnodes);
  gr->valnodes = NULL;
  gr->nvalnodes = 0;
  cg_recs_release(gr->h.ctx, gr->recs);
  gr->recs = NULL;
  if (lua_getiuservalue(L, idx, 1) == LUA_TTABLE)
    cg_unpin_spare(L, gr->h.ctx, -1, gr->id);
  lua_pop(L, 1);
  lua_pushnil(L);
  lua_setiuservalue(L, idx, 1);
  lua_pushnil(L); /* the closure, and what it refers to */
  lua_setiuservalue(L, idx, 3);
}

/* s:capture(fn [, {mode=, auto_free=, upload=}]) -> Graph */
static int stream_capture(lua_State *L) {
  cg_stream *s = cg_checkself(L, CG_STREAM);
  cg_ctx *ctx = s->h.ctx;
  luaL_checktype(L, 2, LUA_TFUNCTION);
  int mode = 1, auto_free = 0, upload = 0;
  if (!lua_isnoneornil(L, 3)) {
    static const char *const keys[] = { "mode", "auto_free", "upload", NULL };
    luaL_checktype(L, 3, LUA_TTABLE);
    cg_check_options(L, 3, "s:capture", keys);
    if (lua_getfield(L, 3, "mode") != LUA_TNIL) {
      const char *name = lua_type(L, -1) == LUA_TSTRING
                         ? cg_checkname(L, -1, "s:capture: opts.mode") : NULL;
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
  cg_hold(L); /* 3: no finalizer until the graph is made */
  cg_graph *gr = cg_newobjuv(L, ctx, sizeof *gr, CG_GRAPH, 3); /* 4 */
  gr->id = nextid(ctx);
  gr->mode = mode_values[mode];
  gr->stream = s->h.drv.stream;
  int scalars;
  cg_recs *recs;
  CUgraph g = cg_capture_graph(L, ctx, s, 1, 2, gr->mode, gr->id, &scalars,
                               &gr->conds, &recs, 0, NULL, NULL); /* 5: the pins */
  gr->g = g;
  gr->recs = recs;
  gr->allocs = cg_recs_allocs(recs);
  gr->auto_free = (unsigned char)auto_free;
  gr->h.open = 1; /* from here __gc releases the graph and the pins */
  cg_track_graph(gr); /* until close_graph */
  lua_pushvalue(L, 5);
  lua_setiuservalue(L, 4, 1);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, 4, 2);
  lua_pushvalue(L, 2);
  lua_setiuservalue(L, 4, 3);
  collect(L, gr, 5, scalars);
  gr->valnodes = cg_valnodes_of(L, recs, &gr->nvalnodes);
  if (cg_graph_over_cap(L, gr)) { /* before the driver */
    close_graph(L, gr, 4);
    lua_error(L);
  }
  const char *api;
  CUresult r = keep_pins(L, gr, 5, g, &gr->keep, &api);
  if (r == CUDA_SUCCESS) {
    api = "cuGraphInstantiate";
    r = cg_drv.cuGraphInstantiate(&gr->h.drv.exec, g, auto_free
        ? CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH : 0);
  }
  if (r == CUDA_SUCCESS && upload) {
    api = "cuGraphUpload";
    r = cg_drv.cuGraphUpload(gr->h.drv.exec, gr->stream);
  }
  if (r != CUDA_SUCCESS) { /* the graph never reaches the user: undo */
    close_graph(L, gr, 4);
    if (!api) luaL_error(L, "out of host memory");
    cg_check(L, ctx, api, r);
  }
  lua_settop(L, 4);
  return 1;
}

void cg_graph_rescan(lua_State *L, cg_graph *gr, int gidx) {
  int n = 0;
  lua_getiuservalue(L, gidx, 1);
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    lua_pop(L, 1);
    n += asscalar(L, -1) != NULL;
  }
  collect(L, gr, lua_gettop(L), n);
  lua_pop(L, 1);
}

void cg_graph_parts(lua_State *L, int idx, CUgraph *g, CUgraphExec *x) {
  cg_graph *gr = cg_toobj(L, idx, CG_GRAPH);
  if (gr->h.open) cg_graph_sync(L, gr);
  *g = gr->h.open ? gr->g : NULL;
  *x = gr->h.open ? gr->h.drv.exec : NULL;
}

static cg_graph *check(lua_State *L) { return cg_checkobj(L, 1, CG_GRAPH); }

/* :free(), :close() and __close: refused while a live graph embeds it */
static int graph_free(lua_State *L) {
  cg_graph *gr = cg_toobj(L, 1, CG_GRAPH);
  if (gr->h.open) cg_check_unused(L, &gr->h);
  close_graph(L, gr, 1);
  return 0;
}

/* __gc: an embedding graph pins this one, so only lua_close gets here
   while it lives; its copy of the graph does not need this one's. */
static int graph_gc(lua_State *L) {
  cg_graph *gr = cg_toobj(L, 1, CG_GRAPH);
  cg_collected(); /* its address may now be reused */
  close_graph(L, gr, 1);
  cg_recs_free(gr->recs); /* what a reader held at the close */
  gr->recs = NULL;
  /* and those of the pins it looked up: unreachable with it, the next
     cycle may free them with no finalizer of their own */
  cg_collected();
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

/* Before (after = 0) and after a launch of a graph with allocation
   nodes: the memory they allocate is live from the launch on; a launch
   while the last one's is still allocated is refused (unless the graph
   frees it itself on launch). */
static void allocs(lua_State *L, cg_graph *gr, int after, CUstream st) {
  const cg_recs *r = gr->recs;
  for (size_t i = 0; i < r->n; i++) {
    const cg_rec *e = &r->v[i];
    if (e->kind != NK_ALLOC || e->freed) continue;
    cg_obj *b = e->obj[0];
    if (after && b->graphmem) { /* allocated by this launch: */
      b->graphmem = CG_GRAPHMEM_LIVE;
      b->owned = 1; /* freed by its free, or by its collection, after it */
      cg_graphmem_allocated(L, (cg_buffer *)b, st);
    } else if (!after && !gr->auto_free && b->graphmem == CG_GRAPHMEM_LIVE) {
      luaL_error(L, "cugraph.Graph #%d allocates a cugraph.Buffer that its "
                 "last launch left allocated: free it (b:free([stream])) "
                 "before launching again, or capture with auto_free = true",
                 (int)gr->id);
    }
  }
}

void cg_graph_launch(lua_State *L, cg_graph *gr, int gidx, CUstream st) {
  int t = -1;
  gr->h.ctx->root->stream_clock++; /* the stream's last work: a graph */
  cg_keep_drain(L, gr->h.ctx); /* what launches that ended let go of */
  if (gr->h.ctx->root->trace) {
    char name[24];
    if (!gr->traced) cg_graph_trace(L, gr, gidx, gr->h.drv.exec, NULL);
    snprintf(name, sizeof name, "graph #%u", gr->id);
    t = cg_trace_begin(L, gr->h.ctx, st, "graph", name);
  }
  for (int i = 0; i < gr->nscalars; i++)
    cg_scalar_flush(L, gr->scalars[i], st);
  for (int i = 0; i < gr->nvalnodes; i++) {
    cg_valnode *v = &gr->valnodes[i];
    uint64_t bits = ((const cg_scalar *)v->value)->bits;
    const char *api;
    if (bits == v->last && v->known && !gr->h.share) continue; /* a C
      graph that lends this exec may have set it */
    CUresult r = cg_valnode_set(gr->h.drv.exec, v, bits, &api);
    cg_check(L, gr->h.ctx, api, r);
    v->last = bits;
  }
  if (gr->allocs) allocs(L, gr, 0, st);
  cg_work_bound(gr->h.ctx);
  CUresult r = cg_drv.cuGraphLaunch(gr->h.drv.exec, st);
  /* work the software driver stopped was launched, as the wait that times
     out on a GPU finds it: the error then names what ran */
  int stopped = cg_work_stopped(r);
  if (r != CUDA_SUCCESS && !stopped) cg_fail(L, gr->h.ctx, "cuGraphLaunch", r);
  if (gr->allocs) allocs(L, gr, 1, st);
  cg_trace_end(L, gr->h.ctx, t);
  gr->launches++;
  gr->last_stream = st;
  gr->last_launch = ++gr->h.ctx->root->graphstate->launches;
  if (stopped) cg_error_stopped(L, gr->h.ctx, "cuGraphLaunch", stopped, st);
}

/* For a wait that timed out: pushes which graph was launched last on s
   (NULL: on any stream), where it was captured, and the loops in it that
   may not end. */
static void busy(lua_State *L, cg_ctx *ctx, CUstream s) {
  static const char *const loops[] = { "if", "while loop", "switch" };
  cg_graph *last = NULL;
  for (cg_graph *gr = ctx->root->graphstate->graphs; gr; gr = gr->next)
    if (gr->h.ctx == ctx && gr->last_launch && (!s || gr->last_stream == s) &&
        (!last || gr->last_launch > last->last_launch))
      last = gr;
  if (!last) {
    lua_pushliteral(L, "");
    return;
  }
  /* written in C first: the last graph may be one no one holds, whose
     finalizer a Lua allocation could run, freeing its records */
  char msg[1024];
  size_t n = 0;
  const cg_recs *r = last->recs;
#define ADD(...) (n += (size_t)snprintf(msg + n, n < sizeof msg ? \
                                        sizeof msg - n : 0, __VA_ARGS__))
  ADD(": cugraph.Graph #%d was launched last on %s", (int)last->id,
      s ? "this stream" : "the device");
  if (r && r->n && r->v[0].src)
    ADD(" (captured at %s:%d)", cg_recs_text(r, r->v[0].src), r->v[0].line);
  for (size_t i = 0; r && i < r->n; i++) {
    const cg_rec *e = &r->v[i];
    if (e->kind != NK_COND || e->value != CU_GRAPH_COND_TYPE_WHILE) continue;
    ADD("; its %s node %d", loops[e->value], (int)i + 1);
    if (e->src) ADD(" (%s:%d)", cg_recs_text(r, e->src), e->line);
    ADD(" may not end: its body never clears the condition");
  }
#undef ADD
  lua_pushlstring(L, msg, n < sizeof msg ? n : sizeof msg - 1);
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
  if (s->h.ctx != ctx) cg_error_devices(L, ctx, s->h.ctx, "graph:launch()");
  if (cg_recording(ctx)) { /* made again when the graph is built */
    cg_record_call(L, ctx, s->h.drv.stream, 2);
    return 0;
  }
  cg_pinobj(L, ctx, &s->h, 2);
  cg_pinobj(L, ctx, &gr->h, 1);
  cg_check_captured(L, ctx, s->h.drv.stream, "graph:launch()");
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
  lua_pushlightuserdata(L, cg_capture_node(L, ctx, s->h.drv.stream, &p));
  lua_pushvalue(L, 1); /* for g:nodes(true): the node's graph */
  lua_rawset(L, 3);
  return 0;
}

/* g:launch([stream]) */
static int graph_launch(lua_State *L) {
  cg_graph *gr = cg_checkself(L, CG_GRAPH);
  if (gr->scoped) check_scoped(L, gr, 1);
  if (gr->h.ctx->capture) return embed(L, gr);
  cg_graph_launch(L, gr, 1, launchstream(L, gr, 2, "launch"));
  return 0;
}

/* g:replay(n [, stream]): n launches, the loop in C */
static int graph_replay(lua_State *L) {
  cg_graph *gr = cg_checkself(L, CG_GRAPH);
  lua_Integer n = luaL_checkinteger(L, 2);
  luaL_argcheck(L, n >= 0, 2, "count must not be negative");
  CUstream st = launchstream(L, gr, 3, "replay");
  if (gr->scoped) check_scoped(L, gr, 1);
  for (lua_Integer i = 0; i < n; i++) cg_graph_launch(L, gr, 1, st);
  return 0;
}

/* g:upload([stream]): moves the graph's work to the device ahead of launch */
static int graph_upload(lua_State *L) {
  cg_graph *gr = check(L);
  CU(L, gr->h.ctx, cuGraphUpload, gr->h.drv.exec,
     launchstream(L, gr, 2, "upload"));
  return 0;
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
  cg_check_own(L, gr, "g:update");
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_settop(L, 2);
  if (gr->conds)
    luaL_error(L, "cugraph.Graph #%d has conditional nodes, which the driver "
               "cannot update: capture a new graph", (int)gr->id);
  if (gr->nvalnodes)
    luaL_error(L, "cugraph.Graph #%d has %s nodes whose value is a "
               "cugraph.Scalar's, which an update cannot keep: capture a new "
               "graph", (int)gr->id, cg_valued_kinds(gr->recs));
  cg_hold(L);                 /* 3: no finalizer until it is done */
  lua_getiuservalue(L, 1, 2); /* 4: the capture stream */
  lua_getiuservalue(L, 1, 1); /* 5: the pins in use */
  int scalars;
  unsigned conds;
  cg_recs *recs;
  CUgraph g = cg_capture_graph(L, ctx, cg_checkobj(L, 4, CG_STREAM), 4, 2,
                               gr->mode, gr->id, &scalars, &conds, &recs, 5,
                               &gr->h.open, NULL); /* 6: the new pins */
  if (gr->h.open && cg_graph_over_cap(L, gr)) { /* as a capture's, before */
    cg_recs_release(ctx, recs);                /* the driver */
    cg_unpin_set(L, ctx, 6, gr->id, 0);
    cg_stamp_set(L, ctx, 5, gr->id);
    cg_release(L, ctx, CG_H_GRAPH, (cg_handle){ .graph = g });
    return lua_error(L);
  }
  CUgraphExecUpdateResultInfo info;
  memset(&info, 0, sizeof info);
  int memops, valnodes = cg_count_valnodes(recs, &memops), edges = 0;
  cg_keep *keep = NULL; /* the new graph's */
  const char *kapi = "", *api = NULL; /* api: the edges' check failed */
  CUresult kr = CUDA_SUCCESS;
  CUresult r = !gr->h.open ? CUDA_ERROR_INVALID_HANDLE
             : conds || valnodes ? CUDA_ERROR_NOT_SUPPORTED
             : cg_edges_changed(L, gr->g, gr->recs, g, recs, &edges, &api);
  if (r == CUDA_SUCCESS && !edges)
    r = kr = keep_pins(L, gr, 6, g, &keep, &kapi);
  if (r == CUDA_SUCCESS && !edges)
    r = cg_drv.cuGraphExecUpdate(gr->h.drv.exec, g, &info);
  if (r == CUDA_SUCCESS && gr->allocs != cg_recs_allocs(recs))
    r = CUDA_ERROR_NOT_SUPPORTED;
  if (r != CUDA_SUCCESS || edges) {
    cg_keep_free(keep); /* no launch took it */
    cg_recs_release(ctx, recs);
    cg_unpin_set(L, ctx, 6, gr->id, 0);
    if (gr->h.open) cg_stamp_set(L, ctx, 5, gr->id);
    cg_release(L, ctx, CG_H_GRAPH, (cg_handle){ .graph = g });
    if (!gr->h.open)
      return luaL_error(L, "cugraph.Graph #%d was freed inside its own "
                        "update", (int)gr->id);
    if (kr != CUDA_SUCCESS && !kapi) return luaL_error(L, "out of host memory");
    if (kr != CUDA_SUCCESS) cg_check(L, ctx, kapi, kr);
    if (conds)
      return luaL_error(L, "the update of cugraph.Graph #%d made conditional "
                        "nodes, which the driver cannot add to it: capture a "
                        "new graph", (int)gr->id);
    if (valnodes)
      return luaL_error(L, "the update of cugraph.Graph #%d made %s nodes "
                        "whose value is a cugraph.Scalar's, which an update "
                        "cannot keep: capture a new graph", (int)gr->id,
                        memops < valnodes ? "external semaphore"
                                          : "stream memory operation");
    if (api) cg_check(L, ctx, api, r);
    if (edges)
      return luaL_error(L, "the update of cugraph.Graph #%d changes its "
                        "programmatic edges, which an update cannot change "
                        "safely: capture a new graph", (int)gr->id);
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
  cg_stamp_set(L, ctx, 6, gr->id);
  lua_pushvalue(L, 6);
  lua_setiuservalue(L, 1, 1);
  lua_pushvalue(L, 2);
  lua_setiuservalue(L, 1, 3);
  if (gr->keep) /* the launches of before used it */
    keep_leave(L, gr, gr->keep);
  gr->keep = keep;
  cg_unpin_spare(L, ctx, 5, gr->id);
  cg_release(L, ctx, CG_H_GRAPH, (cg_handle){ .graph = gr->g });
  gr->g = g;
  cg_recs_release(ctx, gr->recs);
  gr->recs = recs;
  gr->updated = 1; /* the exec's nodes stay those of the first capture */
  gr->traced = 0; /* their lines may not */
  collect(L, gr, 6, scalars);
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
                  ((cg_graph *)cg_checkself(L, CG_GRAPH))->h.drv.exec);
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
    {"upload", graph_upload},
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
  cg_graphstate_of(L, cg_sentinel(L));
  cg_sentinel(L)->busy = busy;
  cg_sentinel(L)->stream_gone = stream_gone;
  luaL_getmetatable(L, cg_kind_names[CG_STREAM]);
  lua_getfield(L, -1, "methods");
  lua_pushvalue(L, -2); /* the metatable, as cg_checkself wants */
  lua_pushcclosure(L, stream_capture, 1);
  lua_setfield(L, -2, "capture");
  lua_pop(L, 2);
}
