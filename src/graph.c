/* cugraph.Graph: a Lua closure captured from a stream into a CUDA graph.
   Capture is guarded (the closure runs under pcall; on any error the capture
   is ended, the partial graph destroyed and the error re-raised), and a graph
   pins every object the capture used (user value: a set of them), so the
   collector never frees what it reads and an explicit free is refused. */
#include <stdlib.h>
#include <string.h>
#include "core.h"

struct cg_capture {
  CUstream origin;      /* the stream the capture began on */
  unsigned id;          /* the graph's id, for messages */
  unsigned serial;      /* this capture's number: cg_obj.pinned */
  int pins;             /* registry ref: set of pinned objects */
};

typedef struct cg_graph {
  cg_obj h;
  CUgraph g;
  CUgraphExec exec;
  CUstream stream;      /* the capture stream: launches default to it */
  CUstreamCaptureMode mode;
  unsigned id;
  lua_Integer launches;
  size_t nodes;
  int nscalars;
  cg_scalar **scalars;  /* pinned scalars, flushed before each launch */
} cg_graph;

static const char *const modes[] = { "global", "thread_local", "relaxed", NULL };
static const CUstreamCaptureMode mode_values[] = {
  CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
  CU_STREAM_CAPTURE_MODE_RELAXED
};

int cg_capturing_on(lua_State *L, cg_ctx *ctx, CUstream s) {
  if (ctx->capture && s == ctx->capture->origin) return 1;
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
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
void cg_pinobj(lua_State *L, cg_ctx *ctx, cg_obj *o, int idx) {
  if (!ctx->capture || o->pinned == ctx->capture->serial) return;
  o->pinned = ctx->capture->serial;
  if (o->uses++ == 0) o->graph = ctx->capture->id;
  idx = lua_absindex(L, idx);
  lua_rawgeti(L, LUA_REGISTRYINDEX, ctx->capture->pins);
  lua_pushvalue(L, idx);
  lua_pushboolean(L, 1);
  lua_rawset(L, -3);
  lua_pop(L, 1);
  cg_isopen(L, o);
  if (o->kind == CG_KERNEL) { /* and so its module */
    lua_getiuservalue(L, idx, 1);
    cg_pin(L, ctx, -1);
    lua_pop(L, 1);
  }
}

/* Releases every pin of graph id in the set at idx. An object keeps the id
   of a graph that holds it, or 0 when that is not known. Sets are only
   reached through the debug library otherwise; keys that are not objects
   of ours are passed over. */
static void unpin(lua_State *L, cg_ctx *ctx, int idx, unsigned id) {
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    cg_obj *o = asobj(L, ctx, -2);
    if (!o) {
      lua_pop(L, 1);
      continue;
    }
    if (o->uses) o->uses--;
    if (!o->uses || o->graph == id) o->graph = 0;
    if (!o->uses) cg_unpinned(L, o);
    lua_pop(L, 1);
  }
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
   may) is ended again, so the stream is always usable afterwards. */
static CUresult endcapture(lua_State *L, cg_ctx *ctx, CUstream s,
                           CUgraph *g) {
  CUresult r = cg_drv.cuStreamEndCapture(s, g);
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  if (r != CUDA_SUCCESS &&
      cg_drv.cuStreamIsCapturing(s, &st) == CUDA_SUCCESS &&
      st != CU_STREAM_CAPTURE_STATUS_NONE) {
    CUgraph partial = NULL;
    cg_drv.cuStreamEndCapture(s, &partial);
    cg_release(L, ctx, CG_FREE_GRAPH, partial);
  }
  return r;
}

/* Message handler: a string error gains the traceback; others stay as
   they are. */
static int traceback(lua_State *L) {
  if (lua_type(L, 1) == LUA_TSTRING)
    luaL_traceback(L, L, lua_tostring(L, 1), 1);
  else
    lua_settop(L, 1);
  return 1;
}

/* Runs fn (at fnidx) under capture on the stream at sidx, passing it.
   restamp: the pins of the graph being updated (0: none), whose objects get
   their graph id back when this capture fails, if *alive (the graph is not
   freed meanwhile). On success returns the graph (its node count in
   *nodes) and leaves the set of pins on the stack; on any failure everything
   is undone
   (capture ended, partial graph destroyed, pins released) and the error is
   raised: the closure's own, or the driver's. */
static CUgraph capture(lua_State *L, cg_ctx *ctx, int sidx, int fnidx,
                       CUstreamCaptureMode mode, unsigned id, size_t *nodes,
                       int restamp, const unsigned char *alive) {
  cg_stream *s = cg_checkobj(L, sidx, CG_STREAM);
  if (ctx->capture)
    luaL_error(L, "nested capture: a graph capture is already in progress");
  struct cg_capture cap = { NULL, id, ++ctx->captures, 0 };
  s->h.pinned = cap.serial; /* pinned before the allocations below */
  if (s->h.uses++ == 0) s->h.graph = id;
  lua_createtable(L, 0, 8);
  int pins = lua_gettop(L);
  lua_pushvalue(L, pins);
  cap.pins = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushvalue(L, sidx);
  lua_pushboolean(L, 1);
  lua_rawset(L, pins);
  cap.origin = s->s;
  lua_pushcfunction(L, traceback);
  lua_pushvalue(L, fnidx);
  lua_pushvalue(L, sidx);
  CUresult r = cg_drv.cuStreamBeginCapture(s->s, mode);
  int status = LUA_OK;
  if (r == CUDA_SUCCESS) {
    ctx->capture = &cap;
    status = lua_pcall(L, 1, 0, pins + 1);
    ctx->capture = NULL;
  }
  CUgraph g = NULL;
  const char *api = "cuStreamBeginCapture"; /* the call that failed */
  CUresult end = r;
  if (r == CUDA_SUCCESS) {
    api = "cuStreamEndCapture";
    end = endcapture(L, ctx, s->s, &g);
  }
  luaL_unref(L, LUA_REGISTRYINDEX, cap.pins);
  cg_flush_deferred(L, ctx);
  size_t n = 0;
  if (status == LUA_OK && end == CUDA_SUCCESS) {
    api = "cuGraphGetNodes";
    end = cg_drv.cuGraphGetNodes(g, NULL, &n);
  }
  if (status == LUA_OK && end == CUDA_SUCCESS && n > 0) {
    *nodes = n;
    lua_settop(L, pins);
    return g;
  }
  unpin(L, ctx, pins, id);
  if (restamp && *alive) stamp(L, ctx, restamp, id);
  cg_release(L, ctx, CG_FREE_GRAPH, g);
  if (status != LUA_OK) lua_error(L); /* the closure's error, on top */
  cg_check(L, ctx, api, end);
  luaL_error(L, "the capture recorded no work: launch kernels, copies or "
             "fills on the capture stream inside the closure");
  return NULL;
}

/* Graph ids start at 1; the capture of graph #n pins with id n. */
static unsigned nextid(cg_ctx *ctx) { return ++ctx->graph_ids; }

/* Collects the pinned scalars into the graph's array (pins at idx). */
static void collect(lua_State *L, cg_graph *gr, int idx) {
  int n = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    n += cg_testobj(L, -1, CG_SCALAR) != NULL;
  }
  cg_scalar **a = n ? malloc((size_t)n * sizeof *a) : NULL;
  if (n && !a) luaL_error(L, "out of host memory");
  free(gr->scalars);
  gr->scalars = a;
  gr->nscalars = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    cg_scalar *sc = cg_testobj(L, -1, CG_SCALAR);
    if (sc && gr->nscalars < n) a[gr->nscalars++] = sc;
  }
}

/* Releases the graph (at idx) and its pins; idempotent. */
static void close_graph(lua_State *L, cg_graph *gr, int idx) {
  if (!gr->h.open) return;
  gr->h.open = 0;
  cg_release(L, gr->h.ctx, CG_FREE_EXEC, gr->exec);
  cg_release(L, gr->h.ctx, CG_FREE_GRAPH, gr->g);
  gr->exec = NULL;
  gr->g = NULL;
  free(gr->scalars);
  gr->scalars = NULL;
  gr->nscalars = 0;
  if (lua_getiuservalue(L, idx, 1) == LUA_TTABLE)
    unpin(L, gr->h.ctx, -1, gr->id);
  lua_pop(L, 1);
  lua_pushnil(L);
  lua_setiuservalue(L, idx, 1);
}

/* s:capture(fn [, {mode=, auto_free=, upload=}]) -> Graph */
static int stream_capture(lua_State *L) {
  cg_stream *s = cg_checkobj(L, 1, CG_STREAM);
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
  CUgraph g = capture(L, ctx, 1, 2, gr->mode, gr->id, &gr->nodes, 0,
                      NULL); /* 4: the pins */
  gr->g = g;
  gr->h.open = 1; /* from here __gc releases the graph and the pins */
  lua_pushvalue(L, 4);
  lua_setiuservalue(L, 3, 1);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, 3, 2);
  collect(L, gr, 4);
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

static cg_graph *check(lua_State *L) { return cg_checkobj(L, 1, CG_GRAPH); }

static int graph_free(lua_State *L) {
  close_graph(L, cg_toobj(L, 1, CG_GRAPH), 1);
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
  CU(L, gr->h.ctx, cuGraphLaunch, gr->exec, st);
  gr->launches++;
}

/* g:launch([stream]) */
static int graph_launch(lua_State *L) {
  cg_graph *gr = cg_checkself(L, CG_GRAPH);
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

/* g:nodes() -> count, {kind, ...} */
static int graph_nodes(lua_State *L) {
  static const char *const kinds[] = {
    "kernel", "memcpy", "memset", "host", "graph", "empty", "wait_event",
    "event_record", "ext_semas_signal", "ext_semas_wait", "mem_alloc",
    "mem_free", "batch_mem_op", "conditional"
  };
  cg_graph *gr = check(L);
  size_t n = gr->nodes, cap = n ? n : 1;
  /* every allocation first: a finalizer they run may free the graph */
  CUgraphNode *nodes = lua_newuserdatauv(L, cap * (sizeof *nodes +
                                         sizeof(CUgraphNodeType)), 0);
  CUgraphNodeType *types = (CUgraphNodeType *)(nodes + cap);
  lua_createtable(L, (int)n, 0);
  cg_isopen(L, &gr->h);
  CU(L, gr->h.ctx, cuGraphGetNodes, gr->g, nodes, &n);
  if (n > cap) n = cap;
  for (size_t i = 0; i < n; i++)
    CU(L, gr->h.ctx, cuGraphNodeGetType, nodes[i], &types[i]);
  for (size_t i = 0; i < n; i++) {
    if ((size_t)types[i] < sizeof kinds / sizeof *kinds)
      lua_pushstring(L, kinds[types[i]]);
    else
      lua_pushfstring(L, "type %d", (int)types[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_pushinteger(L, (lua_Integer)n);
  lua_insert(L, -2);
  return 2;
}

/* g:dot(path [, verbose]): Graphviz description of the graph */
static int graph_dot(lua_State *L) {
  cg_graph *gr = check(L);
  const char *path = luaL_checkstring(L, 2);
  unsigned flags = lua_toboolean(L, 3) ? CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE : 0;
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
  lua_getiuservalue(L, 1, 2); /* 3: the capture stream */
  lua_getiuservalue(L, 1, 1); /* 4: the pins in use */
  size_t nodes;
  CUgraph g = capture(L, ctx, 3, 2, gr->mode, gr->id, &nodes, 4,
                      &gr->h.open); /* 5: the new pins */
  CUgraphExecUpdateResultInfo info;
  memset(&info, 0, sizeof info);
  CUresult r = gr->h.open ? cg_drv.cuGraphExecUpdate(gr->exec, g, &info)
                          : CUDA_ERROR_INVALID_HANDLE;
  if (r != CUDA_SUCCESS) {
    unpin(L, ctx, 5, gr->id);
    if (gr->h.open) stamp(L, ctx, 4, gr->id);
    cg_release(L, ctx, CG_FREE_GRAPH, g);
    if (!gr->h.open)
      return luaL_error(L, "cugraph.Graph #%d was freed inside its own "
                        "update", (int)gr->id);
    if (r != CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE)
      cg_check(L, ctx, "cuGraphExecUpdate", r);
    cg_pusherror(L, "cuGraphExecUpdate", (int)r,
                 cg_driver_errname(r, (char[CG_ERRNAME]){0}),
                 lua_pushfstring(L, "graph update failed: %s; capture a new "
                                 "graph instead", update_reason(info.result)));
    return lua_error(L);
  }
  unpin(L, ctx, 4, gr->id);
  stamp(L, ctx, 5, gr->id);
  lua_pushvalue(L, 5);
  lua_setiuservalue(L, 1, 1);
  cg_release(L, ctx, CG_FREE_GRAPH, gr->g);
  gr->g = g;
  gr->nodes = nodes;
  collect(L, gr, 5);
  lua_settop(L, 1);
  return 1;
}

/* g:launches(): how many times the graph was launched */
static int graph_launches(lua_State *L) {
  lua_pushinteger(L, ((cg_graph *)cg_toobj(L, 1, CG_GRAPH))->launches);
  return 1;
}

/* g:id(): the number that messages name the graph by */
static int graph_id(lua_State *L) {
  lua_pushinteger(L, ((cg_graph *)cg_toobj(L, 1, CG_GRAPH))->id);
  return 1;
}

static int graph_tostring(lua_State *L) {
  cg_graph *gr = cg_toobj(L, 1, CG_GRAPH);
  return cg_tostring(L, &gr->h, " #%d (%d node%s, %I launch%s)", (int)gr->id,
                     (int)gr->nodes, gr->nodes == 1 ? "" : "s",
                     (LUAI_UACINT)gr->launches, gr->launches == 1 ? "" : "es");
}

void graph_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"launch", graph_launch}, {"replay", graph_replay},
    {"upload", graph_upload}, {"nodes", graph_nodes}, {"dot", graph_dot},
    {"update", graph_update}, {"launches", graph_launches}, {"id", graph_id},
    {"free", graph_free}, {"close", graph_free},
    {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", graph_free}, {"__close", graph_free},
    {"__tostring", graph_tostring}, {NULL, NULL}
  };
  cg_newtype(L, CG_GRAPH, methods, meta, NULL);
  luaL_getmetatable(L, cg_kind_names[CG_STREAM]);
  lua_getfield(L, -1, "methods");
  lua_pushcfunction(L, stream_capture);
  lua_setfield(L, -2, "capture");
  lua_pop(L, 2);
}
