/* A graph's nodes as CUPTI's kernel activity records name them, which
   g:profile's activity method (inspect/profile_kernels.c) and the script's
   trace (base/trace.c) read.

   The records name the nodes of the instantiated graph, which the driver
   numbers as CUPTI numbers the nodes of every graph: the graph's id << 32
   | the node's position. An instantiated graph's own id
   (cuptiGetGraphExecId) goes with the positions of the graph's nodes,
   graph by graph (the top, then its bodies) in the order the graphs were
   made: a node's position there is its position in its graph after the
   nodes of the graphs made before. */
#include <stdio.h>
#include <string.h>
#include "graph/graph.h"
#include "base/cupti.h"

enum { MAXG = 64 };

const char *cg_graph_positions(lua_State *L, cg_graph *gr, int gidx,
                               CUgraph copy, size_t *pos, size_t *total,
                               size_t *callpos) {
  const char *why = cg_cupti_load();
  if (why) return why;
  cg_ctx *ctx = gr->h.ctx;
  gidx = lua_absindex(L, gidx);
  cg_graph_resolve(L, gr);
  size_t n = cg_recs_count(gr->recs);
  for (size_t i = 0; i < n; i++)
    if (gr->recs->v[i].kind == NK_GRAPH)
      return "its child graph nodes' copies are numbered beside its bodies "
             "in a way CUPTI's ids do not show";
  /* the graphs: the top's id and size, then each body's (from the pins:
     a conditional node's bodies, cond.c), by CUPTI's graph id */
  uint32_t gid[MAXG];
  size_t gsize[MAXG], ng = 0;
  CUgraph gh[MAXG]; /* the graph captured into (the top: not its copy) */
  lua_getiuservalue(L, gidx, 1);
  int pins = lua_gettop(L);
  for (size_t i = 0; i <= n && ng < MAXG; i++) {
    const cg_rec *e = i ? &gr->recs->v[i - 1] : NULL;
    if (e && e->kind != NK_COND) continue;
    for (int b = 1;; b++) {
      CUgraph body = copy ? copy : gr->g;
      if (e) {
        lua_pushlightuserdata(L, e->node);
        lua_rawget(L, pins);
        int t = lua_rawgeti(L, -1, b);
        body = t == LUA_TLIGHTUSERDATA ? lua_touserdata(L, -1) : NULL;
        lua_pop(L, 2);
      } else if (b > 1) {
        body = NULL;
      }
      if (!body) break;
      size_t k = 0;
      CU(L, ctx, cuGraphGetNodes, body, NULL, &k);
      if (!k) continue;
      CUgraphNode first;
      size_t one = 1;
      CU(L, ctx, cuGraphGetNodes, body, &first, &one);
      uint64_t id = 0;
      if (cg_cupti.cuptiGetGraphNodeId(first, &id) != CUPTI_SUCCESS ||
          ng == MAXG) {
        lua_pop(L, 1);
        return "cuptiGetGraphNodeId failed";
      }
      gid[ng] = (uint32_t)(id >> 32);
      gh[ng] = e ? body : gr->g;
      gsize[ng++] = k;
    }
  }
  lua_pop(L, 1);
  *total = 0;
  for (size_t k = 0; k < ng; k++) *total += gsize[k];
  for (size_t i = 0; i < n; i++) {
    const cg_rec *e = &gr->recs->v[i];
    pos[i] = 0;
    if (!e->node) continue;
    CUgraphNode node = e->node;
    if (copy && !e->depth &&
        (!cg_drv.cuGraphNodeFindInClone ||
         cg_drv.cuGraphNodeFindInClone(&node, e->node, copy) != CUDA_SUCCESS))
      return "cuGraphNodeFindInClone failed";
    uint64_t id;
    if (cg_cupti.cuptiGetGraphNodeId(node, &id) != CUPTI_SUCCESS)
      return "cuptiGetGraphNodeId failed";
    size_t base = 0;
    for (size_t k = 0; k < ng; k++)
      if (gid[k] < (uint32_t)(id >> 32)) base += gsize[k];
    pos[i] = base + (size_t)(id & 0xffffffffu) + 1;
    if (pos[i] > *total) return "CUPTI's node ids do not match the graph's nodes";
  }
  /* a library call's first node: the graph's nodes made before it on */
  for (size_t c = 0; callpos && c < gr->recs->ncalls; c++) {
    const cg_libcall *lc = &gr->recs->calls[c];
    callpos[c] = 0;
    for (size_t k = 0; k < ng; k++)
      if (gh[k] == lc->graph && lc->first < gsize[k]) {
        size_t base = 0;
        for (size_t j = 0; j < ng; j++)
          if (gid[j] < gid[k]) base += gsize[j];
        callpos[c] = base + lc->first + 1;
      }
  }
  return NULL;
}

/* What the trace names a record's runs by. */
static void name_of(const cg_recs *r, size_t i, cg_trace_node *t) {
  const cg_rec *e = &r->v[i];
  t->rec = (unsigned)i + 1;
  snprintf(t->name, sizeof t->name, "%.47s", e->kind == NK_KERNEL
           ? ((const cg_kernel *)e->kernel)->name : cg_nk_names[e->kind]);
  if (e->src)
    snprintf(t->where, sizeof t->where, "%s:%d", cg_recs_text(r, e->src),
             e->line);
}

/* What the trace names a library call's nodes by: the call and its line. */
static void call_name(const cg_recs *r, size_t c, cg_trace_node *t) {
  const cg_libcall *lc = &r->calls[c];
  snprintf(t->name, sizeof t->name, "%.47s", cg_recs_text(r, lc->name));
  if (lc->src)
    snprintf(t->where, sizeof t->where, "%s:%d", cg_recs_text(r, lc->src),
             lc->line);
}

void cg_graph_trace(lua_State *L, cg_graph *gr, int gidx, CUgraphExec exec,
                    CUgraph copy) {
  cg_ctx *ctx = gr->h.ctx;
  if (!ctx->root->trace) return;
  gidx = lua_absindex(L, gidx);
  int top = lua_gettop(L);
  cg_hold(L); /* its allocations run no finalizer that could free gr: g:launch
                 holds nothing, and only its first traced launch comes here */
  if (!copy) gr->traced = 1; /* whatever follows: one try an exec */
  size_t n = cg_recs_count(gr->recs), total = 0;
  size_t nc = gr->recs ? gr->recs->ncalls : 0;
  size_t *pos = lua_newuserdatauv(L, (n + nc + 1) * sizeof *pos, 0);
  const char *why = cg_graph_positions(L, gr, gidx, copy, pos, &total,
                                       pos + n);
  cg_trace_node *v = NULL;
  if (!why) {
    v = lua_newuserdatauv(L, (total ? total : 1) * sizeof *v, 0);
    memset(v, 0, (total ? total : 1) * sizeof *v);
    for (size_t i = 0; i < n; i++)
      if (pos[i]) name_of(gr->recs, i, &v[pos[i] - 1]);
    for (size_t c = nc; c-- > 0;) /* a call's nodes: from its first on, */
      for (size_t p = pos[n + c]; p && p <= total && !v[p - 1].rec && /* up */
           !v[p - 1].name[0]; p++)    /* to the next named (the last call's */
        call_name(gr->recs, c, &v[p - 1]);  /* first) */
  }
  cg_trace_graph(ctx, exec, gr->id, v, why ? 0 : total, why);
  lua_settop(L, top); /* the guard closes: the collector runs again */
}
