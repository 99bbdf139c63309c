/* g:profile([n | {n =, trace =, stream =}]): where a replay's time goes,
   node by node, with each node's kind, kernel, label and Lua line, and the
   sums per line.

   A copy of the graph (cuGraphClone) gets event record nodes: one after
   each node, and one between each node and its dependencies, unless the
   node is the only dependent of its one dependency, whose event after
   serves as both; the nodes of child graph nodes get theirs inside the
   copy's child graphs, recursively. Each node's time is then from when it could start to when it
   ended, the median over n replays of the copy (after one more
   that is not counted). The graph itself and the copy also replay n times
   back to back, between two events on the stream, for the cost of a
   replay with and without the event nodes. The graph's work runs 3n + 2
   times in all. A graph with conditional nodes, which the driver does not
   copy, is timed from CUPTI's kernel records instead when asked to
   (profile_kernels.c), or else gives the time of its replays only; one
   whose nodes allocate memory is refused. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include "inspect/inspect.h"

#define SCRATCH "cugraph.profile"

#define NONE ((size_t)-1)

/* A node the profile times: a node of the graph, or of a child graph
   node's graph, whose nodes are timed too (recursively). */
typedef struct unit {
  CUgraphNode orig;     /* in its graph's driver graph (its records') */
  CUgraphNode copy;     /* in the copy */
  CUgraphNodeType type;
  int graph;            /* its graph object: graphs[graph] (1: the graph) */
  size_t parent;        /* the unit of its child graph node, or NONE */
  size_t first;         /* its first event: ev[first] */
  int kids;             /* its child graph's nodes are units */
} unit;

/* What a profile makes on the driver, released by its __close whatever
   happens: the copy and its instantiation, and the events. */
typedef struct scratch {
  cg_ctx *ctx;
  CUgraph copy;
  CUgraphExec exec;
  CUevent *ev;   /* unit i: ev[2i] before it (or unused), ev[2i + 1] after
                    it; then the stream's two: ev[nev - 2], ev[nev - 1] */
  size_t nev;
  unit *u;
  size_t nu, cu;
} scratch;

static void release(lua_State *L, cg_ctx *ctx, cg_hkind hk, void *p) {
  cg_handle h;
  h.p = p;
  cg_release(L, ctx, hk, h);
}

static int scratch_close(lua_State *L) {
  scratch *s = luaL_checkudata(L, 1, SCRATCH);
  cg_ctx *ctx = s->ctx;
  if (ctx) { /* through the owner of driver handles: errors recorded */
    release(L, ctx, CG_H_EXEC, s->exec);
    release(L, ctx, CG_H_GRAPH, s->copy);
    for (size_t i = 0; i < s->nev; i++) release(L, ctx, CG_H_EVENT, s->ev[i]);
  }
  free(s->ev);
  free(s->u);
  memset(s, 0, sizeof *s);
  return 0;
}

static void *alloc(lua_State *L, size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p) luaL_error(L, "g:profile: out of host memory");
  return p;
}


/* ms per replay of k replays back to back on st: the graph's own
   (g:replay, which flushes its scalars), or the exec x */
static double back_to_back(lua_State *L, scratch *s, cg_graph *gr,
                           CUgraphExec x, CUstream st, lua_Integer k,
                           double *ins) {
  cg_ctx *ctx = gr->h.ctx;
  CUevent b = s->ev[s->nev - 2], e = s->ev[s->nev - 1];
  CU(L, ctx, cuEventRecord, b, st);
  if (x) {
    for (lua_Integer i = 0; i < k; i++) CU(L, ctx, cuGraphLaunch, x, st);
  } else {
    lua_getfield(L, 1, "replay");
    lua_pushvalue(L, 1);
    lua_pushinteger(L, k);
    lua_pushvalue(L, 3); /* the stream object */
    lua_call(L, 3, 0);
  }
  CU(L, ctx, cuEventRecord, e, st);
  cg_wait_stream(L, ctx, st, ctx->root->timeout);
  float ms = 0;
  CU(L, ctx, cuEventElapsedTime, &ms, b, e);
  if (ins && cg_drv.cuSimEventInstructions) { /* the simulator's count */
    unsigned long long c0 = 0, c1 = 0;
    CU(L, ctx, cuSimEventInstructions, b, &c0);
    CU(L, ctx, cuSimEventInstructions, e, &c1);
    *ins = (double)(c1 - c0) / (double)k;
  }
  return (double)ms / (double)k;
}

/* On the simulator, the result's instructions: a replay's, whatever the
   method (its nodes' own come by event nodes only). */
static int replay_instructions(lua_State *L, double ins) {
  if (ins >= 0) {
    lua_pushinteger(L, (lua_Integer)(ins + 0.5));
    lua_setfield(L, -2, "instructions");
  }
  return 1;
}

static unit *add_unit(lua_State *L, scratch *s) {
  if (s->nu == s->cu) {
    size_t cap = s->cu ? 2 * s->cu : 16;
    unit *u = realloc(s->u, cap * sizeof *u);
    if (!u) luaL_error(L, "g:profile: out of host memory");
    s->u = u;
    s->cu = cap;
  }
  unit *u = &s->u[s->nu++];
  memset(u, 0, sizeof *u);
  u->parent = NONE;
  return u;
}

/* The graph object that child graph node orig of graphs[gi] launched (its
   pins name it), pushed and returned; NULL (nil pushed) when none. */
static cg_graph *child_of(lua_State *L, int graphs, int gi, CUgraphNode orig) {
  lua_rawgeti(L, graphs, gi);
  lua_getiuservalue(L, -1, 1);
  lua_rawgetp(L, -1, orig);
  lua_replace(L, -3);
  lua_pop(L, 1);
  cg_graph *g = (cg_graph *)cg_testobj(L, -1, CG_GRAPH);
  if (!g || !g->h.open) {
    lua_pop(L, 1);
    lua_pushnil(L);
  }
  return g;
}

/* Units for the nodes of the child graph node of unit p: the nodes of the
   graph it launched and of the copy's child graph, matched by position
   (the driver copies a graph's nodes in order), their kinds compared. A
   child whose nodes do not match stays one node. */
static void add_kids(lua_State *L, scratch *s, int graphs, size_t p) {
  cg_ctx *ctx = s->ctx;
  if (!cg_drv.cuGraphChildGraphNodeGetGraph) return;
  cg_graph *ch = child_of(L, graphs, s->u[p].graph, s->u[p].orig);
  if (!ch) {
    lua_pop(L, 1);
    return;
  }
  int gi = (int)lua_rawlen(L, graphs) + 1;
  lua_rawseti(L, graphs, gi);
  CUgraph body = NULL;
  CU(L, ctx, cuGraphChildGraphNodeGetGraph, s->u[p].copy, &body);
  size_t m = 0, m2 = 0;
  CU(L, ctx, cuGraphGetNodes, ch->g, NULL, &m);
  CU(L, ctx, cuGraphGetNodes, body, NULL, &m2);
  if (m == 0 || m != m2) return;
  CUgraphNode *v = cg_profile_temp(L, 2 * m, sizeof *v), *c = v + m;
  CU(L, ctx, cuGraphGetNodes, ch->g, v, &m);
  CU(L, ctx, cuGraphGetNodes, body, c, &m2);
  for (size_t i = 0; i < m; i++) {
    CUgraphNodeType a, b;
    CU(L, ctx, cuGraphNodeGetType, v[i], &a);
    CU(L, ctx, cuGraphNodeGetType, c[i], &b);
    if (a != b) {
      lua_pop(L, 1);
      return;
    }
  }
  s->u[p].kids = 1;
  for (size_t i = 0; i < m; i++) {
    unit *u = add_unit(L, s);
    u->orig = v[i];
    u->copy = c[i];
    u->graph = gi;
    u->parent = p;
    CU(L, ctx, cuGraphNodeGetType, v[i], &u->type);
  }
  lua_pop(L, 1);
}

/* A unit for each node of the graph, in the driver's order. */
static void top_units(lua_State *L, scratch *s, cg_graph *gr) {
  size_t n = 0;
  CU(L, s->ctx, cuGraphGetNodes, gr->g, NULL, &n);
  CUgraphNode *v = cg_profile_temp(L, n, sizeof *v);
  if (n) CU(L, s->ctx, cuGraphGetNodes, gr->g, v, &n);
  for (size_t i = 0; i < n; i++) {
    unit *u = add_unit(L, s);
    u->orig = v[i];
    u->graph = 1;
    CU(L, s->ctx, cuGraphNodeGetType, v[i], &u->type);
  }
  lua_pop(L, 1);
}

/* The copy, and a unit for each of its nodes and, recursively, of those
   of its child graphs: the graph's nodes first, in the driver's order. */
static void copy_units(lua_State *L, scratch *s, cg_graph *gr, int graphs) {
  cg_ctx *ctx = gr->h.ctx;
  if (!cg_drv.cuGraphClone || !cg_drv.cuGraphNodeFindInClone ||
      !cg_drv.cuGraphAddNode || !cg_drv.cuGraphGetEdges ||
      !cg_drv.cuGraphAddDependencies)
    luaL_error(L, "g:profile: the driver cannot copy graphs and add event "
               "nodes (CUDA 12.3 or later)");
  CU(L, ctx, cuGraphClone, &s->copy, gr->g);
  top_units(L, s, gr);
  for (size_t i = 0; i < s->nu; i++)
    CU(L, ctx, cuGraphNodeFindInClone, &s->u[i].copy, s->u[i].orig, s->copy);
  for (size_t i = 0; i < s->nu; i++) /* s->nu grows */
    if (s->u[i].type == CU_GRAPH_NODE_TYPE_GRAPH) add_kids(L, s, graphs, i);
}

/* Event nodes in graph g, whose nodes are the copies of units m[0 .. k).
   Unit i gets E_e (ev[2i + 1]), which depends on it, and a first event
   that it depends on: the E_e of its one dependency when it is that
   node's only dependent (a chain costs one event node a link), or else
   its own E_s (ev[2i]), which depends on its dependencies. Either records
   after every node i waits for and before i starts. */
static void instrument(lua_State *L, scratch *s, CUgraph g, const size_t *m,
                       size_t k) {
  cg_ctx *ctx = s->ctx;
  size_t ne = 0;
  CU(L, ctx, cuGraphGetEdges, g, NULL, NULL, NULL, &ne);
  CUgraphNode *from = cg_profile_temp(L, 2 * ne + k, sizeof *from);
  CUgraphEdgeData *ed = cg_profile_temp(L, ne + 1, sizeof *ed); /* asked
    for, or the driver refuses a programmatic edge; the copy's events order
    its nodes instead */
  CUgraphNode *to = from + ne, *deps = to + ne;
  size_t *at = cg_profile_temp(L, 2 * ne + 3 * k, sizeof *at);
  size_t *efrom = at, *eto = at + ne, *order = at + 2 * ne, *left = order + k;
  size_t *succ = left + k;
  if (ne) CU(L, ctx, cuGraphGetEdges, g, from, to, ed, &ne);
  for (size_t e = 0; e < ne; e++) /* the edges as positions in m */
    for (size_t i = 0; i < k; i++) {
      if (s->u[m[i]].copy == from[e]) efrom[e] = i;
      if (s->u[m[i]].copy == to[e]) eto[e] = i;
    }
  for (size_t e = 0; e < ne; e++) left[eto[e]]++, succ[efrom[e]]++;
  for (size_t q = 0; q < k; q++) { /* a topological order */
    size_t i = 0;
    while (i < k && left[i] != 0) i++;
    if (i == k) luaL_error(L, "g:profile: the graph's edges make a cycle");
    left[i] = NONE;
    order[q] = i;
    for (size_t e = 0; e < ne; e++)
      if (efrom[e] == i) left[eto[e]]--;
  }
  CUgraphNode *es = cg_profile_temp(L, k, sizeof *es);
  CUresult r = CUDA_SUCCESS;
  const char *api = "cuGraphAddNode";
  for (size_t q = 0; r == CUDA_SUCCESS && q < k; q++) {
    size_t i = order[q], nd = 0, d = 0;
    unit *u = &s->u[m[i]];
    for (size_t e = 0; e < ne; e++)
      if (eto[e] == i) deps[nd++] = s->u[m[d = efrom[e]]].copy;
    CUgraphNodeParams p;
    CUgraphNode first;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_EVENT_RECORD;
    if (nd == 1 && succ[d] == 1) { /* a link of a chain: d's E_e */
      first = es[d];
      u->first = 2 * m[d] + 1;
    } else {
      p.eventRecord.event = s->ev[2 * m[i]];
      r = cg_drv.cuGraphAddNode(&first, g, deps, NULL, nd, &p);
      u->first = 2 * m[i];
    }
    if (r == CUDA_SUCCESS) {
      api = "cuGraphAddDependencies";
      r = cg_drv.cuGraphAddDependencies(g, &first, &u->copy, NULL, 1);
    }
    if (r == CUDA_SUCCESS) {
      api = "cuGraphAddNode";
      p.eventRecord.event = s->ev[2 * m[i] + 1];
      r = cg_drv.cuGraphAddNode(&es[i], g, &u->copy, NULL, 1, &p);
    }
  }
  lua_pop(L, 3);
  cg_check(L, ctx, api, r);
}

/* Every graph of the copy with its event nodes, and the copy
   instantiated, with the nodes node:enable(false) turned off in the
   graph's exec (which its driver graph does not know) off in it too. */
static void instrument_all(lua_State *L, scratch *s, cg_graph *gr) {
  cg_ctx *ctx = s->ctx;
  size_t *m = cg_profile_temp(L, s->nu, sizeof *m);
  for (size_t p = NONE;; p++) { /* the top (NONE), then each parent */
    if (p != NONE && p >= s->nu) break;
    if (p != NONE && !s->u[p].kids) continue;
    size_t k = 0;
    for (size_t i = 0; i < s->nu; i++)
      if (s->u[i].parent == p) m[k++] = i;
    CUgraph g = s->copy;
    if (p != NONE) CU(L, ctx, cuGraphChildGraphNodeGetGraph, s->u[p].copy, &g);
    if (k) instrument(L, s, g, m, k);
  }
  lua_pop(L, 1);
  CU(L, ctx, cuGraphInstantiate, &s->exec, s->copy, 0);
  cg_graph_resolve(L, gr);
  const cg_recs *rs = gr->recs;
  for (size_t j = 0; rs && j < rs->n; j++) {
    const cg_rec *e = &rs->v[j];
    if (e->enabled || e->depth || !e->node) continue;
    for (size_t i = 0; i < s->nu; i++)
      if (s->u[i].parent == NONE && s->u[i].orig == e->node)
        CU(L, ctx, cuGraphNodeSetEnabled, s->exec, s->u[i].copy, 0);
  }
}

/* The record of node v at the top of gr, or NULL */
static const cg_rec *record_of(const cg_recs *r, CUgraphNode v, size_t *at) {
  for (size_t j = 0; r && j < r->n; j++)
    if (r->v[j].node == v && !r->v[j].depth) {
      *at = j;
      return &r->v[j];
    }
  *at = (size_t)-1;
  return NULL;
}

/* One node's table: kind, name, label, source, line, and its times; gi
   its graph in graphs */
static void push_node(lua_State *L, int graphs, int gi, const cg_rec *e,
                      CUgraphNode v, CUgraphNodeType t, size_t k,
                      const double *us, const double *ins) {
  lua_rawgeti(L, graphs, gi);
  const cg_recs *r = ((const cg_graph *)lua_touserdata(L, -1))->recs;
  lua_pop(L, 1);
  lua_createtable(L, 0, 8);
  lua_pushinteger(L, (lua_Integer)k + 1);
  lua_setfield(L, -2, "index");
  lua_pushstring(L, cg_node_type_name(t));
  lua_setfield(L, -2, "kind");
  if (e && e->kind == NK_KERNEL) {
    lua_pushstring(L, ((const cg_kernel *)e->kernel)->name);
    lua_setfield(L, -2, "name");
  }
  if (t == CU_GRAPH_NODE_TYPE_GRAPH) { /* the pins name its graph */
    const cg_graph *child = child_of(L, graphs, gi, v);
    if (child) {
      lua_pushinteger(L, (lua_Integer)child->id);
      lua_setfield(L, -3, "graph");
    }
    lua_pop(L, 1);
  }
  if (e && e->label) {
    lua_pushstring(L, cg_recs_text(r, e->label));
    lua_setfield(L, -2, "label");
  }
  if (e && e->src) {
    lua_pushstring(L, cg_recs_text(r, e->src));
    lua_setfield(L, -2, "source");
    lua_pushinteger(L, e->line);
    lua_setfield(L, -2, "line");
  }
  if (us) {
    cg_setnum(L, "us", us[0]);
    cg_setnum(L, "min_us", us[1]);
    cg_setnum(L, "max_us", us[2]);
    cg_setnum(L, "start_us", us[3]);
  }
  if (ins) {
    lua_pushinteger(L, (lua_Integer)*ins);
    lua_setfield(L, -2, "instructions");
  }
  if (e && !e->enabled && !e->depth) { /* node:enable(false): not run */
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "enabled");
  }
}

/* Appends to order the units whose parent is p, by their records'
   positions (unrecorded ones last, in the driver's order), each followed
   by its own nodes. */
static void place(const scratch *s, const size_t *at, unsigned char *taken,
                  size_t *order, size_t *no, size_t p) {
  for (;;) {
    size_t best = NONE;
    for (size_t i = 0; i < s->nu; i++)
      if (s->u[i].parent == p && !taken[i] &&
          (best == NONE || at[i] < at[best]))
        best = i;
    if (best == NONE) return;
    taken[best] = 1;
    order[(*no)++] = best;
    if (s->u[best].kids) place(s, at, taken, order, no, best);
  }
}

static int graph_profile(lua_State *L) {
  static const char *const keys[] = { "n", "trace", "stream", "cupti",
                                      "method", NULL };
  static const char *const methods[] = { "events", "stamps", "activity",
                                         NULL };
  cg_graph *gr = cg_checkobj(L, 1, CG_GRAPH);
  luaL_checkstack(L, 40, "g:profile");
  lua_Integer reps = 10;
  const char *trace = NULL;
  char path[4096]; /* opts.trace, copied: the profile may run Lua code */
  int method = -1; /* events, stamps, activity; -1: as the graph allows */
  lua_settop(L, 2);
  lua_pushnil(L); /* 3: the stream */
  if (lua_istable(L, 2)) {
    cg_check_options(L, 2, "g:profile", keys);
    lua_getfield(L, 2, "n");
    reps = luaL_opt(L, luaL_checkinteger, -1, reps);
    if (lua_getfield(L, 2, "trace") != LUA_TNIL) {
      size_t len;
      if (lua_type(L, -1) != LUA_TSTRING)
        luaL_argerror(L, 2, "opts.trace must be a path (a string)");
      trace = lua_tolstring(L, -1, &len);
      luaL_argcheck(L, strlen(trace) == len, 2,
                    "opts.trace contains a NUL byte");
      luaL_argcheck(L, len < sizeof path, 2, "opts.trace is too long");
      trace = memcpy(path, trace, len + 1);
    }
    lua_getfield(L, 2, "cupti");
    if (lua_toboolean(L, -1)) method = 2;
    lua_pop(L, 1);
    if (lua_getfield(L, 2, "method") != LUA_TNIL)
      method = cg_checkoption(L, -1, NULL, methods);
    lua_pop(L, 1);
    lua_getfield(L, 2, "stream");
    lua_replace(L, 3);
    lua_pop(L, 2);
  } else if (!lua_isnoneornil(L, 2)) {
    reps = luaL_checkinteger(L, 2);
  }
  luaL_argcheck(L, reps >= 1 && reps <= 100000, 2,
                "the number of replays must be 1 to 100000");
  cg_check_open(L, &gr->h);
  cg_ctx *ctx = gr->h.ctx;
  cg_check_outside(L, ctx, "g:profile()", "profile after the capture ends");
  if (lua_isnil(L, 3)) {
    lua_getiuservalue(L, 1, 2); /* the capture stream */
    lua_replace(L, 3);
  }
  cg_stream *so = cg_checkobj(L, 3, CG_STREAM);
  if (so->h.ctx != ctx) cg_error_devices(L, ctx, so->h.ctx, "g:profile");
  CUstream st = so->h.drv.stream;
  const cg_recs *r = gr->recs;
  for (size_t i = 0; r && i < r->n; i++)
    if (r->v[i].kind == NK_ALLOC || r->v[i].kind == NK_FREE)
      luaL_error(L, "g:profile: cugraph.Graph #%d allocates or frees memory "
                 "in its nodes, which the driver cannot copy (cuGraphClone) "
                 "to profile; allocate its buffers before the capture",
                 (int)gr->id);
  cg_graph_sync(L, gr);
  int copyable = !gr->conds;
  if (method == 0 && !copyable)
    luaL_error(L, "g:profile: cugraph.Graph #%d has conditional nodes, which "
               "the driver does not copy (cuGraphClone) to add event nodes: "
               "profile it by stamps (the default) or CUPTI's activity",
               (int)gr->id);
  if (method < 0) method = copyable ? 0 : 1;
  if (method != 0) copyable = 0; /* no copy with event nodes */
  cg_hold(L); /* 4: no finalizer frees the graph, its stream or its
                 buffers while the profile replays them */
  scratch *s = lua_newuserdatauv(L, sizeof *s, 0); /* 5 */
  memset(s, 0, sizeof *s);
  luaL_setmetatable(L, SCRATCH);
  lua_toclose(L, 5);
  s->ctx = ctx;
  lua_createtable(L, 4, 0); /* 6: the graph objects of the units */
  int graphs = 6;
  lua_pushvalue(L, 1);
  lua_rawseti(L, graphs, 1);
  size_t n = 0; /* the graph's own nodes: units 0 .. n - 1 */
  CU(L, ctx, cuGraphGetNodes, gr->g, NULL, &n);
  if (copyable && n) copy_units(L, s, gr, graphs);
  else top_units(L, s, gr); /* without a copy: for their kinds */
  size_t nu = s->nu;
  int timed = copyable && n;
  s->ev = alloc(L, (timed ? 2 * nu : 0) + 2, sizeof *s->ev);
  for (size_t i = 0; i < (timed ? 2 * nu : 0) + 2; i++, s->nev++)
    CU(L, ctx, cuEventCreate, &s->ev[i], CU_EVENT_DEFAULT);
  size_t cells = (size_t)reps * nu;
  double *dur = cg_profile_temp(L, 2 * cells, sizeof *dur); /* 7, ms */
  double *start = dur + cells;
  double *work = cg_profile_temp(L, (size_t)reps, sizeof *work);  /* 8 */
  int sim = cg_drv.cuSimEventInstructions != NULL; /* counts too */
  double *ins = cg_profile_temp(L, sim ? cells + (size_t)reps : 0, /* 9 */
                                sizeof *ins);
  double *insw = ins + cells;
  size_t *order = cg_profile_temp(L, 2 * nu, sizeof *order);     /* 10 */
  size_t *at = order + nu;

  /* the graph itself, back to back: one replay to warm up, then reps */
  double plain_ins = -1;
  back_to_back(L, s, gr, NULL, st, 1, NULL);
  double plain = back_to_back(L, s, gr, NULL, st, reps, &plain_ins);
  double with = 0;
  int why = 0; /* why a graph has no node times by stamps or activity */
  if (method == 1) {
    if (cg_profile_stamps(L, gr, st, reps, plain, trace))
      return replay_instructions(L, plain_ins);
    why = lua_gettop(L);
  } else if (method == 2) {
    if (cg_profile_activity(L, gr, 3, st, reps, plain, trace))
      return replay_instructions(L, plain_ins);
    why = lua_gettop(L);
  }
  if (timed) {
    instrument_all(L, s, gr);
    CU(L, ctx, cuGraphUpload, s->exec, st);
    back_to_back(L, s, gr, s->exec, st, 1, NULL);
    with = back_to_back(L, s, gr, s->exec, st, reps, NULL);
    CUevent b = s->ev[s->nev - 2];
    for (lua_Integer k = 0; k < reps; k++) { /* replay by replay */
      CU(L, ctx, cuEventRecord, b, st);
      CU(L, ctx, cuGraphLaunch, s->exec, st);
      cg_wait_stream(L, ctx, st, ctx->root->timeout);
      for (size_t i = 0; i < nu; i++) {
        CUevent e0 = s->ev[s->u[i].first], e1 = s->ev[2 * i + 1];
        float d = 0, t = 0;
        CU(L, ctx, cuEventElapsedTime, &d, e0, e1);
        CU(L, ctx, cuEventElapsedTime, &t, b, e0);
        dur[k * nu + i] = d;
        start[k * nu + i] = t;
        unsigned long long c0 = 0, c1 = 0;
        if (sim) {
          CU(L, ctx, cuSimEventInstructions, e0, &c0);
          CU(L, ctx, cuSimEventInstructions, e1, &c1);
          ins[k * nu + i] = (double)(c1 - c0);
        }
      }
    }
  }

  /* each unit's record in its graph; the order: the graph's nodes in
     capture order (unrecorded ones last), each child graph node followed
     by its own nodes in theirs */
  for (size_t i = 0; i < nu; i++) {
    lua_rawgeti(L, graphs, s->u[i].graph);
    cg_graph *ug = lua_touserdata(L, -1);
    cg_graph_resolve(L, ug);
    const cg_recs *rs = ug->recs;
    lua_pop(L, 1);
    record_of(rs, s->u[i].orig, &at[i]);
  }
  size_t no = 0;
  place(s, at, cg_profile_temp(L, nu, 1), order, &no, NONE);
  lua_pop(L, 1);
  double t0 = 0; /* the earliest median start */
  for (size_t i = 0; timed && i < nu; i++) {
    double m = cg_median(start + i, (size_t)reps, nu, work);
    if (i == 0 || m < t0) t0 = m;
  }
  lua_createtable(L, (int)nu, 0); /* 11: the nodes */
  int nodes = lua_gettop(L);
  size_t *pos = cg_profile_temp(L, nu, sizeof *pos); /* unit -> node index */
  for (size_t k = 0; k < nu; k++) {
    size_t i = order[k];
    const unit *u = &s->u[i];
    pos[i] = k;
    double us[4];
    if (timed) {
      const double *d = dur + i;
      us[0] = 1e3 * cg_median(d, (size_t)reps, nu, work);
      us[1] = us[2] = d[0];
      for (size_t q = 1; q < (size_t)reps; q++) {
        if (d[q * nu] < us[1]) us[1] = d[q * nu];
        if (d[q * nu] > us[2]) us[2] = d[q * nu];
      }
      us[1] *= 1e3, us[2] *= 1e3;
      us[3] = 1e3 * (cg_median(start + i, (size_t)reps, nu, work) - t0);
    }
    double count = 0;
    if (timed && sim) count = cg_median(ins + i, (size_t)reps, nu, insw);
    lua_rawgeti(L, graphs, u->graph);
    const cg_recs *rs = ((const cg_graph *)lua_touserdata(L, -1))->recs;
    lua_pop(L, 1);
    push_node(L, graphs, u->graph, at[i] == NONE ? NULL : &rs->v[at[i]],
              u->orig, u->type, k, timed ? us : NULL,
              timed && sim ? &count : NULL);
    if (u->parent == NONE) { /* its position in the driver's list, for
                                g:dot's shading */
      lua_pushinteger(L, (lua_Integer)i + 1);
      lua_setfield(L, -2, "node");
    } else {
      lua_pushinteger(L, (lua_Integer)pos[u->parent] + 1);
      lua_setfield(L, -2, "parent");
      size_t depth = 0;
      for (size_t q = u->parent; q != NONE; q = s->u[q].parent) depth++;
      lua_pushinteger(L, (lua_Integer)depth);
      lua_setfield(L, -2, "depth");
    }
    if (u->kids) {
      lua_Integer kids = 0;
      for (size_t q = 0; q < nu; q++) kids += s->u[q].parent == i;
      lua_pushinteger(L, kids);
      lua_setfield(L, -2, "children");
    }
    lua_rawseti(L, nodes, (lua_Integer)k + 1);
  }
  if (trace && timed) { /* the last replay, the nodes in their order */
    double *ts = cg_profile_temp(L, 2 * nu, sizeof *ts);
    size_t last = cells - nu;
    for (size_t k = 0; k < nu; k++) {
      ts[k] = start[last + order[k]];
      ts[nu + k] = dur[last + order[k]];
    }
    cg_profile_trace(L, nodes, nu, NULL, ts, ts + nu, trace, gr->id);
    lua_pop(L, 1);
  }

  cg_profile_result(L, reps, plain, with, timed, NULL, nodes, trace);
  if (why) {
    lua_pushfstring(L, "its nodes cannot be timed by %s (%s): they come "
                    "without times, and us is the whole replay's",
                    method == 1 ? "stamps" : "CUPTI's kernel records",
                    lua_tostring(L, why));
    lua_setfield(L, -2, "note");
  }
  return replay_instructions(L, plain_ins);
}

void profile_open(lua_State *L) {
  profile_kernels_open(L);
  profile_stamps_open(L);
  profile_report_open(L);
  cg_profile_scratch(L, SCRATCH, scratch_close);
  luaL_getmetatable(L, cg_kind_names[CG_GRAPH]);
  lua_getfield(L, -1, "methods");
  lua_pushcfunction(L, graph_profile);
  lua_setfield(L, -2, "profile");
  lua_pop(L, 2);
}
