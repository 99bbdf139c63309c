/* g:profile by stamps (profile.c): the graph's closure is captured once
   more into a copy in which each node the capture records is followed by a
   one-thread kernel on the node's stream (cg_stamp of
   src/types/setters.cu) that reads the global timer and adds the time
   since the previous stamp on its clock (its stream's, or its body's) to
   the node's cell. Each turn of a conditional body starts with a stamp of
   its own, and so does a stream's next node after a wait. A node's time is
   thus from when the work before it on its stream (its turn's start, or
   what it waited for) ended to when it ended, stamp included, summed over
   its runs in a replay: a loop's body nodes count every turn; a
   conditional node's time is its whole loop or branch. Any graph the
   driver runs can be timed so, conditional nodes at any depth included,
   with no tool attached; a child graph node is timed as one node. The copy
   must record the nodes the graph did (same kinds, kernels and shapes; the
   graph's current arguments are set into it), else the profile says why
   and times whole replays only. */
#include <string.h>
#include "inspect/inspect.h"

#define SCRATCH "cugraph.profile.stamps"

/* What the profile holds, let go by its __close whatever happens. Its
   user value: the copy's set of pins. */
typedef struct scratch {
  cg_ctx *ctx;
  int pinned;           /* the user value holds pins to let go */
  cg_recs *recs;        /* the copy's records */
  CUdeviceptr mem;
  CUgraph g;
  CUgraphExec x;
  CUevent ev[2];
} scratch;

static int scratch_close(lua_State *L) {
  scratch *s = luaL_checkudata(L, 1, SCRATCH);
  cg_ctx *ctx = s->ctx;
  if (!ctx) return 0;
  cg_release(L, ctx, CG_H_EXEC, (cg_handle){ .exec = s->x });
  cg_release(L, ctx, CG_H_GRAPH, (cg_handle){ .graph = s->g });
  cg_release(L, ctx, CG_H_MEM, (cg_handle){ .mem = s->mem });
  for (int i = 0; i < 2; i++)
    cg_release(L, ctx, CG_H_EVENT, (cg_handle){ .event = s->ev[i] });
  cg_recs_release(ctx, s->recs);
  if (s->pinned) {
    lua_getiuservalue(L, 1, 1); /* with id 0: the graph keeps its id */
    cg_unpin_set(L, ctx, -1, 0, 0);   /* on what it uses too */
    lua_pop(L, 1);
  }
  memset(s, 0, sizeof *s);
  return 0;
}

/* Why record i of the copy is not the graph's record o, or NULL. */
static const char *differs(const cg_rec *o, const cg_rec *e) {
  if (o->kind != e->kind) return "another kind of node";
  if (o->depth != e->depth) return "a node at another depth";
  if (o->kind != NK_KERNEL) return NULL;
  if (o->kernel != e->kernel) return "another kernel";
  if (memcmp(o->grid, e->grid, sizeof o->grid) ||
      memcmp(o->block, e->block, sizeof o->block) || o->shared != e->shared)
    return "another grid, block or shared memory";
  return NULL;
}

enum { MAXHANDLES = 64 };

/* The handles the copy's capture made for its Conditions (pins at pidx),
   in h[]; their number, or -1 past MAXHANDLES. */
static int copy_handles(lua_State *L, cg_ctx *ctx, int pidx, uint64_t *h) {
  int n = 0;
  lua_pushnil(L);
  while (lua_next(L, pidx)) {
    lua_pop(L, 1);
    cg_obj *o = cg_toany(L, ctx, -1);
    if (!o || o->kind != CG_CONDITION) continue;
    if (n == MAXHANDLES) n = -1;
    if (n < 0) continue;
    h[n++] = ((cg_condition *)o)->handle;
  }
  return n;
}

/* Whether v may be one of the nh handles h (nh < 0: more than known). */
static int is_handle(uint64_t v, const uint64_t *h, int nh) {
  for (int i = 0; i < nh; i++)
    if (h[i] == v) return 1;
  return nh < 0;
}

/* The copy takes what the graph's nodes hold now (g:rebind and node:set
   change them after the capture): each kernel node the graph's arguments,
   but for a Condition's handle, which is the copy's own (an 8-byte value
   equal to a handle the copy's capture made: any, when it made more than
   MAXHANDLES); each fill and copy its objects. argw: room for the words
   of any one record. */
static void follow(lua_State *L, scratch *s, const cg_recs *r,
                   uint64_t *argw, const uint64_t *handles, int nh) {
  cg_ctx *ctx = s->ctx;
  const char *api = NULL;
  CUresult res = cg_recs_resolve(s->recs, &api);
  for (size_t i = 0; res == CUDA_SUCCESS && i < r->n; i++) {
    const cg_rec *o = &r->v[i];
    cg_rec *e = &s->recs->v[i];
    if (!e->node) continue;
    if (o->kind == NK_KERNEL) {
      const uint64_t *ow = r->words + o->word0;
      const uint64_t *ew = s->recs->words + e->word0;
      size_t w = 0;
      int change = 0;
      for (int j = 0; j < o->nargs; j++) {
        const cg_param *p = &o->params[j];
        size_t k = (p->size + 7) / 8;
        int own = !r->objs[o->arg0 + (size_t)j] &&
                  !s->recs->objs[e->arg0 + (size_t)j] &&
                  (p->type == CG_U64 || p->type == CG_P_PTR_OR_INT) &&
                  is_handle(ew[w], handles, nh);
        memcpy(argw + w, own ? ew + w : ow + w, 8 * k);
        change |= memcmp(argw + w, ew + w, 8 * k) != 0;
        w += k;
      }
      if (change)
        res = cg_rec_apply(ctx, s->recs, e, NULL, NULL, NULL, 0, argw, &api);
    } else if ((o->kind == NK_FILL || o->kind == NK_COPY) &&
               (o->obj[0] != e->obj[0] || o->obj[1] != e->obj[1])) {
      cg_obj *olds[2] = { e->obj[0], e->obj[1] };
      cg_obj *news[2] = { o->obj[0], o->obj[1] };
      res = cg_rec_apply(ctx, s->recs, e, NULL, olds, news,
                         o->kind == NK_COPY ? 2 : 1, NULL, &api);
    }
  }
  cg_check(L, ctx, api, res);
}

static void download(lua_State *L, cg_ctx *ctx, CUstream st, void *dst,
                     CUdeviceptr src, size_t bytes) {
  CU(L, ctx, cuMemcpyDtoHAsync, dst, src, bytes, st);
  cg_wait_stream(L, ctx, st, ctx->root->timeout);
}

int cg_profile_stamps(lua_State *L, cg_graph *gr, CUstream st,
                      lua_Integer reps, double plain, const char *trace) {
  cg_ctx *ctx = gr->h.ctx;
  cg_graph_resolve(L, gr);
  const cg_recs *r = gr->recs;
  size_t n = cg_recs_count(r);
  for (size_t i = 0; i < n; i++)
    if (r->v[i].kind == NK_EXTWAIT || r->v[i].kind == NK_EXTSIGNAL) {
      lua_pushliteral(L, "its copy would wait on or signal its external "
                      "semaphores");
      return 0;
    } else if (r->v[i].kind == NK_MEMWAIT || r->v[i].kind == NK_MEMWRITE) {
      lua_pushliteral(L, "its copy would wait for or write its counters "
                      "(s:wait_value, s:write_value)");
      return 0;
    }
  if (!n) { /* its nodes came from C, which the runtime does not see */
    lua_pushliteral(L, "its capture recorded none of its nodes");
    return 0;
  }
  if (n + 1 > (size_t)INT32_MAX / 4) {
    lua_pushliteral(L, "it has too many nodes to stamp");
    return 0;
  }
  int base = lua_gettop(L);
  scratch *s = lua_newuserdatauv(L, sizeof *s, 1); /* base + 1 */
  memset(s, 0, sizeof *s);
  luaL_setmetatable(L, SCRATCH);
  lua_toclose(L, base + 1);
  s->ctx = ctx;
  cg_check_open(L, &gr->h);
  CUfunction f = cg_setter_function(L, ctx, "cg_stamp");
  cg_check_open(L, &gr->h);
  if (!f) {
    lua_pushliteral(L, "the runtime's kernels are loaded on another device");
    return 0;
  }
  size_t cells = n + 1; /* the last: a stamp's own time, after the nodes */
  size_t bytes = 8 * (1 + CG_STAMP_SLOTS) + cells * (8 + 16 + 4);
  CU(L, ctx, cuMemAlloc, &s->mem, bytes);
  cg_stamps stamps;
  memset(&stamps, 0, sizeof stamps);
  stamps.f = f;
  stamps.clocks = s->mem;
  stamps.sums = s->mem + 8 * (1 + CG_STAMP_SLOTS);
  stamps.last = stamps.sums + 8 * cells;
  stamps.runs = stamps.last + 16 * cells;
  stamps.ncells = (int)cells;

  /* the copy: the closure captured again on the graph's capture stream */
  lua_getiuservalue(L, 1, 3); /* base + 2: the closure */
  if (!lua_isfunction(L, base + 2)) {
    lua_pushliteral(L, "its closure is not kept");
    return 0;
  }
  lua_getiuservalue(L, 1, 2); /* base + 3: the capture stream */
  cg_stream *cs = cg_checkobj(L, base + 3, CG_STREAM);
  int scalars;
  unsigned conds;
  s->g = cg_capture_graph(L, ctx, cs, base + 3, base + 2, gr->mode, gr->id,
                          &scalars, &conds, &s->recs, 0, NULL, &stamps);
  lua_setiuservalue(L, base + 1, 1); /* its pins, let go at the close */
  s->pinned = 1;
  cg_check_open(L, &gr->h); /* the closure ran */
  size_t m = cg_recs_count(s->recs);
  if (m != n) {
    lua_pushfstring(L, "its closure, captured again, recorded %d nodes, not "
                    "%d: it must record the same nodes each time it runs",
                    (int)m, (int)n);
    return 0;
  }
  for (size_t i = 0; i < n; i++) {
    const char *why = differs(&r->v[i], &s->recs->v[i]);
    if (why) {
      lua_pushfstring(L, "its closure, captured again, recorded %s as node "
                      "%d: it must record the same nodes each time it runs",
                      why, (int)i + 1);
      return 0;
    }
  }
  {
    size_t most = 0; /* the words of the largest kernel record */
    for (size_t i = 0; i < n; i++)
      if (r->v[i].kind == NK_KERNEL &&
          ((const cg_kernel *)r->v[i].kernel)->nwords > most)
        most = ((const cg_kernel *)r->v[i].kernel)->nwords;
    uint64_t handles[MAXHANDLES];
    lua_getiuservalue(L, base + 1, 1);
    int nh = copy_handles(L, ctx, lua_gettop(L), handles);
    lua_pop(L, 1);
    follow(L, s, r, cg_profile_temp(L, most, 8), handles, nh);
    lua_pop(L, 1);
  }
  CU(L, ctx, cuGraphInstantiate, &s->x, s->g, 0);
  for (size_t i = 0; !gr->updated && i < n; i++) {
    const cg_rec *o = &r->v[i];
    s->recs->v[i].enabled = o->enabled;
    if (!o->enabled && !o->depth && s->recs->v[i].node)
      CU(L, ctx, cuGraphNodeSetEnabled, s->x, s->recs->v[i].node, 0);
  }
  CU(L, ctx, cuGraphUpload, s->x, st);

  /* one replay that is not counted, then reps, each read back */
  double *us = cg_profile_temp(L, 2 * (size_t)reps * n, sizeof *us);
  double *runs = us + (size_t)reps * n;                   /* base + 4 */
  uint64_t *sum = cg_profile_temp(L, 3 * cells + 1, 8);   /* base + 5 */
  uint64_t *last = sum + cells, *clock0 = last + 2 * cells;
  uint32_t *run = cg_profile_temp(L, cells, 4);           /* base + 6 */
  double *own = cg_profile_temp(L, (size_t)reps, sizeof *own); /* 7 */
  cg_check_open(L, &gr->h); /* what the copy reads since follow() */
  for (lua_Integer k = -1; k < reps; k++) {
    CU(L, ctx, cuMemsetD8Async, s->mem, 0, bytes, st);
    CU(L, ctx, cuGraphLaunch, s->x, st);
    cg_wait_stream(L, ctx, st, ctx->root->timeout);
    if (k < 0) continue;
    download(L, ctx, st, sum, stamps.sums, 8 * cells);
    download(L, ctx, st, run, stamps.runs, 4 * cells);
    for (size_t i = 0; i < n; i++) {
      us[(size_t)k * n + i] = (double)sum[i] / 1e3;
      runs[(size_t)k * n + i] = run[i];
    }
    own[k] = run[n] ? (double)sum[n] / 1e3 : 0;
  }
  download(L, ctx, st, last, stamps.last, 16 * cells);
  download(L, ctx, st, clock0, stamps.clocks, 8);

  /* the copy back to back, for the cost of its stamps */
  for (int i = 0; i < 2; i++)
    CU(L, ctx, cuEventCreate, &s->ev[i], CU_EVENT_DEFAULT);
  CU(L, ctx, cuEventRecord, s->ev[0], st);
  for (lua_Integer k = 0; k < reps; k++) CU(L, ctx, cuGraphLaunch, s->x, st);
  CU(L, ctx, cuEventRecord, s->ev[1], st);
  cg_wait_stream(L, ctx, st, ctx->root->timeout);
  float ms = 0;
  CU(L, ctx, cuEventElapsedTime, &ms, s->ev[0], s->ev[1]);
  double with = (double)ms / (double)reps;

  cg_profile_recnodes(L, s->recs, reps, us, runs); /* base + 8 */
  int nodes = lua_gettop(L);
  if (trace) { /* the last run of each node in the last replay */
    size_t *of = cg_profile_temp(L, n, sizeof *of);
    double *ts = cg_profile_temp(L, 2 * n, sizeof *ts);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
      if (run[i] && last[2 * i + 1] >= last[2 * i]) {
        of[k] = i;
        ts[k] = (double)(last[2 * i] - *clock0) / 1e6; /* ms */
        ts[n + k++] = (double)(last[2 * i + 1] - last[2 * i]) / 1e6;
      }
    cg_profile_trace(L, nodes, k, of, ts, ts + n, trace, gr->id);
    lua_pop(L, 2);
  }
  cg_profile_result(L, reps, plain, with, 1, "stamps", nodes, trace);
  cg_setnum(L, "stamp_us", cg_median(own, (size_t)reps, 1, runs));
  return 1;
}

void profile_stamps_open(lua_State *L) {
  cg_profile_scratch(L, SCRATCH, scratch_close);
}
