/* g:profile of a graph with conditional nodes (profile.c): the driver
   copies no such graph, so no event nodes can sit between its nodes, and a
   body's nodes run as often as its loop turns. Their times come from
   CUPTI's kernel activity records instead, which name the graph node of
   each kernel run, in the bodies too. CUPTI gives one record a node a
   launch (seen with the driver of an H200, 580): a body's node that runs
   many turns has the last turn's. Each kernel node's time is its run's,
   and a conditional node's from the end of the work before it (or the
   replay's start: a replay's time less what ran after) to the end of its bodies'
   last runs: the whole loop or branch; the median over the replays. Copies and fills are timed where the driver runs them as
   kernels (their records name their nodes), else not.

   The records name the nodes of the instantiated graph by position
   (graph/positions.c). */
#include <stdlib.h>
#include <string.h>
#include "inspect/inspect.h"
#include "base/cupti.h"

#define GUARD "cugraph.profile.activity"

/* What the recording holds, let go by its __close whatever happens. */
typedef struct guard {
  cg_ctx *ctx;
  cg_cupti_reader rd;
  CUevent ev[2];
} guard;

static void guard_end(lua_State *L, guard *g) {
  cg_cupti_stop(&g->rd);
  for (int i = 0; i < 2; i++)
    if (g->ev[i])
      cg_release(L, g->ctx, CG_H_EVENT, (cg_handle){ .event = g->ev[i] });
  memset(g->ev, 0, sizeof g->ev);
}

static int guard_close(lua_State *L) {
  guard_end(L, luaL_checkudata(L, 1, GUARD));
  return 0;
}

/* k replays of the graph at 1 on the stream object at sidx (g:replay:
   its scalars and semaphore values are set as for any launch). */
static void replay(lua_State *L, int sidx, lua_Integer k) {
  lua_getfield(L, 1, "replay");
  lua_pushvalue(L, 1);
  lua_pushinteger(L, k);
  lua_pushvalue(L, sidx);
  lua_call(L, 3, 0);
}

int cg_profile_activity(lua_State *L, cg_graph *gr, int sidx, CUstream st,
                        lua_Integer reps, double plain, const char *trace) {
  const char *why = cg_cupti_load();
  if (why) {
    lua_pushstring(L, why);
    return 0;
  }
  cg_ctx *ctx = gr->h.ctx;
  size_t n = cg_recs_count(gr->recs), total = 0;
  /* each record's position in the instantiated graph, + 1 (a fill or a
     copy the driver runs as a kernel has kernel records too) */
  size_t *pos = cg_profile_temp(L, n, sizeof *pos);
  if ((why = cg_graph_positions(L, gr, 1, NULL, pos, &total, NULL))) {
    lua_pushstring(L, why);
    return 0;
  }
  /* the record of each position */
  size_t *at = cg_profile_temp(L, total + 1, sizeof *at);
  for (size_t i = 0; i < n; i++)
    if (pos[i]) at[pos[i]] = i + 1;
  size_t cells = (size_t)reps * n;
  double *us = cg_profile_temp(L, 3 * cells, sizeof *us), *runs = us + cells;
  double *t1 = runs + cells; /* each node's last end, ns */
  size_t cap = 64, nlast = 0; /* the last replay's runs, for the trace */
  double *tstart = NULL, *tdur = NULL;
  size_t *tnode = NULL;
  guard *g = lua_newuserdatauv(L, sizeof *g, 0);
  memset(g, 0, sizeof *g);
  luaL_setmetatable(L, GUARD);
  int gidx = lua_gettop(L);
  lua_toclose(L, gidx);
  g->ctx = ctx;
  for (int i = 0; i < 2; i++)
    CU(L, ctx, cuEventCreate, &g->ev[i], CU_EVENT_DEFAULT);
  if ((why = cg_cupti_start(&g->rd))) {
    lua_pushstring(L, why);
    return 0;
  }
  const cg_kernel_run *v;
  size_t nv;
  replay(L, sidx, 1); /* not counted: without cuptiGetGraphExecId, it says
                         which graph id is the exec's (its first run's) */
  cg_wait_stream(L, ctx, st, ctx->root->timeout);
  if ((why = cg_cupti_take(&g->rd, &v, &nv, NULL)))
    return luaL_error(L, "g:profile: %s", why);
  uint32_t xid = 0;
  uint64_t exec = 0;
  if (cg_cupti.cuptiGetGraphExecId &&
      cg_cupti.cuptiGetGraphExecId(gr->h.drv.exec, &xid) == CUPTI_SUCCESS)
    exec = xid;
  for (size_t j = 0; j < nv && !exec; j++) exec = v[j].node >> 32;
  double *lastend = cg_profile_temp(L, (size_t)reps, sizeof *lastend); /* ns */
  for (lua_Integer k = 0; k < reps; k++) {
    replay(L, sidx, 1);
    cg_wait_stream(L, ctx, st, ctx->root->timeout);
    if ((why = cg_cupti_take(&g->rd, &v, &nv, NULL)))
      return luaL_error(L, "g:profile: %s", why);

    int last = k == reps - 1;
    if (last) {
      tstart = cg_profile_temp(L, cap = nv, 2 * sizeof *tstart);
      tdur = tstart + cap;
      tnode = cg_profile_temp(L, cap, sizeof *tnode);
    }
    for (size_t j = 0; j < nv; j++) {
      size_t p = (size_t)(v[j].node & 0xffffffffu) + 1;
      if (v[j].node >> 32 != exec || p > total) continue; /* another's */
      if (!at[p]) {
        lua_pushliteral(L, "CUPTI's node ids do not match the graph's "
                        "nodes");
        return 0;
      }
      size_t i = at[p] - 1;
      double d = (double)(v[j].end - v[j].start) / 1e3;
      size_t c = (size_t)k * n + i;
      us[c] += d;
      runs[c]++;
      if ((double)v[j].end > t1[c]) t1[c] = (double)v[j].end;
      if ((double)v[j].end > lastend[k]) lastend[k] = (double)v[j].end;
      if (last && nlast < cap) {
        tnode[nlast] = i;
        tstart[nlast] = (double)v[j].start / 1e6; /* ms, as the events' */
        tdur[nlast++] = d / 1e3;
      }
    }
  }
  /* the cost of recording: replays back to back with it, and without */
  CU(L, ctx, cuEventRecord, g->ev[0], st);
  replay(L, sidx, reps);
  CU(L, ctx, cuEventRecord, g->ev[1], st);
  cg_wait_stream(L, ctx, st, ctx->root->timeout);
  float ms = 0;
  CU(L, ctx, cuEventElapsedTime, &ms, g->ev[0], g->ev[1]);
  double with = (double)ms / (double)reps;
  guard_end(L, g); /* the recording ends before the tables are made */

  /* a conditional node's time: from the end of the work before it (the
     capture's earlier nodes) to the end of its bodies' last runs */
  for (size_t i = 0; i < n; i++) {
    const cg_rec *e = &gr->recs->v[i];
    if (e->kind != NK_COND) continue;
    size_t end = i + 1;
    while (end < n && gr->recs->v[end].depth > e->depth) end++;
    for (lua_Integer k = 0; k < reps; k++) {
      const double *row1 = t1 + (size_t)k * n;
      const double *rr = runs + (size_t)k * n;
      double from = 0, to = 0;
      for (size_t j = 0; j < i; j++)
        if (rr[j] && row1[j] > from) from = row1[j];
      for (size_t j = i + 1; j < end; j++)
        if (rr[j] && row1[j] > to) to = row1[j];
      double t = from ? (to - from) / 1e3 /* nothing before it: from the
        replay's start, a replay's time less what ran after the loop */
                      : 1e3 * plain - (lastend[k] - to) / 1e3;
      us[(size_t)k * n + i] = to && t > 0 ? t : 0;
      runs[(size_t)k * n + i] = end - i - 1; /* its body's nodes */
    }
  }

  cg_profile_recnodes(L, gr->recs, reps, us, runs);
  int nodes = lua_gettop(L);
  if (trace) {
    cg_profile_trace(L, nodes, nlast, tnode, tstart, tdur, trace, gr->id);
  }
  cg_profile_result(L, reps, plain, with, 1, "activity", nodes, trace);
  return 1;
}

void profile_kernels_open(lua_State *L) {
  cg_profile_scratch(L, GUARD, guard_close);
}
