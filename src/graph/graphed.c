/* cugraph.Graphed: cuda.graphed(fn [, opts]), a function whose calls
   replay CUDA graphs. Each call runs fn's Lua code as a recording: its
   work (kernel launches, fills, copies, library calls, forks and joins,
   conditional nodes) is checked as a capture checks it and noted, not
   sent. The notes are compared with those of the graphs the function has
   made for the call's key (its stream, the kinds and element types of its
   arguments, opts.key's value): the same work with other buffers, sizes or
   numbers sets only the nodes whose parameters changed, in place, and
   launches the graph; work a graph cannot take in place (a library call's
   other operands, a body of a conditional node) is captured again from
   the notes and the graph updated; other work makes a new graph beside the
   others, up to opts.graphs of them, the least recently used going first.
   Graphs are built from the notes (kernels, fills and copies made again by
   the runtime, the other calls made again with their arguments), so a
   call runs fn once; only the bodies of conditional nodes run again when
   a graph is built. */
#include <stdlib.h>
#include <string.h>
#include "graph/graph.h"

enum { MAXGRAPHS = 64 };

/* A graph the calls replay, and the recording its nodes hold (kept as they
   change), whose values are uv[2 * slot + 2] (the Graph: 2 * slot + 1). */
typedef struct variant {
  cg_graph *gr;         /* NULL: the slot is free */
  cg_recs *log;
  uint64_t key;
  unsigned long used;   /* the call that used it last */
} variant;

typedef struct cg_graphed {
  cg_obj h;
  cg_recs *rec;         /* the recording of the call in progress */
  int vals;             /* registry ref: its values */
  size_t nvals;         /* values the last recording left there */
  int max;              /* opts.graphs */
  unsigned char eager;
  unsigned char *changed; /* per record of rec: set in place */
  size_t cchanged;
  unsigned long calls;
  lua_Integer set, builds, same; /* nodes set, graphs built, calls that
                                    found a graph with their parameters */
  int uv;               /* registry ref: uv[UV_T] (the logs' values) */
  uint64_t seen[4];     /* the parameters of the last calls that set nodes
                           or built a graph (params), the latest at */
  int at;
  variant var[MAXGRAPHS];
} cg_graphed;

/* uv 3, the values table, and its fields */
enum { UV_FN = 1, UV_KEY, UV_T };

static cg_graphed *check(lua_State *L) { return cg_checkobj(L, 1, CG_GRAPHED); }

/* Whether parameters h were among the last calls', which they join. */
static int seen_again(cg_graphed *gf, uint64_t h) {
  enum { N = sizeof gf->seen / sizeof *gf->seen };
  for (int i = 0; i < N; i++)
    if (gf->seen[i] == h) return 1;
  gf->at = (gf->at + 1) % N;
  gf->seen[gf->at] = h;
  return 0;
}

/* -- graphs ---------------------------------------------------------------- */

/* Makes the work of recording slot's log again under the capture in
   progress (upvalues: the Graphed, the slot): kernels, fills and copies by
   the runtime, other calls with their arguments; the bodies of conditional
   nodes run again with them. Notes which record of the capture each made. */
static int replay(lua_State *L) {
  cg_graphed *gf = lua_touserdata(L, lua_upvalueindex(1));
  int slot = (int)lua_tointeger(L, lua_upvalueindex(2));
  cg_recs *r = gf->var[slot].log;
  cg_ctx *ctx = gf->h.ctx;
  lua_getiuservalue(L, lua_upvalueindex(1), UV_T);
  lua_rawgeti(L, -1, 2 * slot + 2);
  int vals = lua_gettop(L);
  for (size_t i = 0; i < r->n; i++) {
    cg_rec *e = &r->v[i];
    if (e->depth) continue; /* made by its node's call */
    size_t label = e->label ? cg_label_begin(L, ctx, cg_recs_text(r, e->label))
                            : 0;
    int base = lua_gettop(L);
    luaL_checkstack(L, (int)e->nvals + 4, NULL);
    for (size_t j = 0; j < e->nvals; j++)
      lua_rawgeti(L, vals, (lua_Integer)(e->v0 + j));
    switch (e->kind) {
    case NK_KERNEL: /* kernel, stream, (grid, block), arguments */
      lua_pushnil(L);
      lua_pushnil(L);
      lua_rotate(L, base + 3, 2);
      cg_kernel_replay(L, r, e, base + 1);
      break;
    case NK_FILL: cg_fill_replay(L, e, base + 1); break;
    case NK_COPY: cg_copy_replay(L, e, base + 1); break;
    default: lua_call(L, (int)e->nvals - 1, 0);
    }
    e->peer = cg_recs_count(ctx->capture->top->recs) - 1;
    lua_settop(L, base);
    if (e->label) cg_label_end(ctx, label);
  }
  return 0;
}

/* The values table at idx copied, plain tables in it one level deep (what
   a call was given is compared with later calls' arguments), pushed. */
static void copy_vals(lua_State *L, int idx, size_t n) {
  lua_createtable(L, (int)n, 0);
  for (size_t i = 1; i <= n; i++) {
    lua_rawgeti(L, idx, (lua_Integer)i);
    if (lua_istable(L, -1) && !lua_getmetatable(L, -1)) {
      lua_newtable(L);
      lua_pushnil(L);
      while (lua_next(L, -3)) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, -4);
      }
      lua_remove(L, -2);
    }
    lua_rawseti(L, -2, (lua_Integer)i);
  }
}

/* Frees the graph at uv[i] (t: uv's index), when it is free to go: one a
   live graph embeds stays until that one goes. */
static void free_graph(lua_State *L, int t, int i) {
  int base = lua_gettop(L);
  if (lua_rawgeti(L, t, i) == LUA_TUSERDATA) {
    lua_getfield(L, -1, "free");
    lua_insert(L, -2);
    lua_pcall(L, 1, 0, 0);
  }
  lua_settop(L, base);
  lua_pushnil(L);
  lua_rawseti(L, t, i);
}

/* Frees slot's graph and forgets it. */
static void drop(lua_State *L, cg_graphed *gf, int t, int slot) {
  variant *v = &gf->var[slot];
  if (!v->gr) return;
  free_graph(L, t, 2 * slot + 1);
  lua_pushnil(L);
  lua_rawseti(L, t, 2 * slot + 2);
  cg_recs_free(v->log);
  memset(v, 0, sizeof *v);
}

/* Captures slot's log into a new graph on the stream at sidx, which
   replaces the slot's graph if it has one. (An update in place of that
   graph, cuGraphExecUpdate, would leave its instantiation with the nodes
   of its first capture, which later calls could no longer set.) */
static void build(lua_State *L, cg_graphed *gf, int t, int slot, int sidx) {
  variant *v = &gf->var[slot];
  int base = lua_gettop(L);
  lua_getfield(L, sidx, "capture");
  lua_pushvalue(L, sidx);
  lua_pushvalue(L, 1);
  lua_pushinteger(L, slot);
  lua_pushcclosure(L, replay, 2);
  lua_call(L, 2, 1);
  free_graph(L, t, 2 * slot + 1); /* the one it replaces, if any */
  v->gr = lua_touserdata(L, -1);
  v->gr->graphed = 1;
  lua_rawseti(L, t, 2 * slot + 1);
  cg_graph_resolve(L, v->gr); /* its nodes, which set_nodes changes */
  gf->builds++;
  lua_settop(L, base);
}

/* The recording's values (at rv) and records become slot's log. */
static void keep_log(lua_State *L, cg_graphed *gf, int t, int slot, int rv) {
  variant *v = &gf->var[slot];
  v->log = cg_recs_copy(L, gf->rec, v->log);
  copy_vals(L, rv, gf->nvals);
  lua_rawseti(L, t, 2 * slot + 2);
}

/* A free slot for a new graph, the least recently used one's when none. */
static int free_slot(lua_State *L, cg_graphed *gf, int t) {
  int lru = 0;
  for (int i = 0; i < gf->max; i++) {
    if (!gf->var[i].gr) return i;
    if (gf->var[i].used < gf->var[lru].used) lru = i;
  }
  drop(L, gf, t, lru);
  return lru;
}

/* Adds o (when it is a buffer or scalar) to the set v of *n, unless there
   (at most MAXOBJS: 0 when full). */
enum { MAXOBJS = 32 };
static int add_obj(cg_obj **v, int *n, cg_obj *o) {
  if (!o || (o->kind != CG_BUFFER && o->kind != CG_SCALAR)) return 1;
  for (int i = 0; i < *n; i++)
    if (v[i] == o) return 1;
  if (*n == MAXOBJS) return 0;
  v[(*n)++] = o;
  return 1;
}

/* The buffers and scalars record e (of r) refers to, added to v. */
static int add_objs(cg_obj **v, int *n, const cg_recs *r, const cg_rec *e) {
  int ok = 1;
  if (e->kind == NK_KERNEL)
    for (int j = 0; j < e->nargs; j++) ok &= add_obj(v, n, r->objs[e->arg0 + (size_t)j]);
  else
    ok = add_obj(v, n, e->obj[0]) & add_obj(v, n, e->obj[1]);
  return ok;
}

/* Whether graph record e refers to o. */
static int uses(const cg_recs *g, const cg_rec *e, const cg_obj *o) {
  if (e->kind != NK_KERNEL) return e->obj[0] == o || e->obj[1] == o;
  for (int j = 0; j < e->nargs; j++)
    if (g->objs[e->arg0 + (size_t)j] == o) return 1;
  return 0;
}

/* Pins (pin set) or unpins the object o of the graph at pidx: its value is
   found among the values at vals of the records of r that ch marks. */
static void repin(lua_State *L, int pidx, unsigned id, const cg_recs *r,
                  int vals, const unsigned char *ch, cg_obj *o, int pin) {
  for (size_t i = 0; i < r->n; i++) {
    const cg_rec *e = &r->v[i];
    if (!ch[i]) continue;
    for (size_t j = 0; j < e->nvals; j++) {
      lua_rawgeti(L, vals, (lua_Integer)(e->v0 + j));
      if (lua_touserdata(L, -1) == o) {
        if (pin) cg_pin_in(L, pidx, lua_gettop(L), id);
        else cg_unpin_in(L, pidx, lua_gettop(L), id);
        lua_pop(L, 1);
        return;
      }
      lua_pop(L, 1);
    }
  }
}

/* The parameters of the records of rec that ch marks go to their nodes in
   slot's graph (at gidx) and its log (values at lv). The graph pins what
   they refer to now and lets go of what no node refers to any more. */
static void set_nodes(lua_State *L, cg_graphed *gf, int slot, int gidx,
                      int rv, int lv) {
  variant *v = &gf->var[slot];
  cg_graph *gr = v->gr;
  cg_recs *g = gr->recs, *rec = gf->rec, *log = v->log;
  cg_ctx *ctx = gr->h.ctx;
  cg_obj *news[MAXOBJS], *olds[MAXOBJS];
  int nnew = 0, nold = 0, all = 1;
  for (size_t i = 0; i < rec->n; i++) {
    if (!gf->changed[i]) continue;
    cg_rec *x = &rec->v[i], *y = &log->v[i], *e = &g->v[y->peer];
    all &= add_objs(news, &nnew, rec, x) & add_objs(olds, &nold, log, y);
    if (x->kind == NK_KERNEL) {
      memcpy(e->grid, x->grid, sizeof e->grid);
      memcpy(e->block, x->block, sizeof e->block);
      e->shared = x->shared;
      memcpy(g->words + e->word0, rec->words + x->word0,
             ((const cg_kernel *)x->kernel)->nwords * 8);
      memcpy(g->objs + e->arg0, rec->objs + x->arg0,
             (size_t)x->nargs * sizeof *g->objs);
    } else {
      e->obj[0] = x->obj[0];
      e->obj[1] = x->obj[1];
      e->off = x->off;
      e->soff = x->soff;
      e->bytes = x->bytes;
      e->value = x->value;
      e->width = x->width;
    }
    const char *api;
    CUresult res = cg_rec_apply(ctx, g, e, gr->h.drv.exec, NULL, NULL, 0,
                                NULL, &api);
    if (res != CUDA_SUCCESS) cg_check(L, ctx, api, res);
    e->dirty = 1; /* the graph's own node follows on demand */
    gf->set++;
  }
  lua_getiuservalue(L, gidx, 1);
  int pidx = lua_gettop(L), scalars = 0;
  for (int i = 0; i < nnew; i++) { /* what the nodes use now: pinned */
    cg_obj *o = news[i];
    scalars |= o->kind == CG_SCALAR;
    if (!(o->uses == 1 && o->graph == gr->id)) /* not its alone already */
      repin(L, pidx, gr->id, rec, rv, gf->changed, o, 1);
  }
  /* what no node uses any more: let go (one pass over the graph's records
     finds what is still used; a set too large to hold is scanned per
     record changed, as rebind does) */
  unsigned long used = 0;
  for (size_t j = 0; all && nold && j < g->n; j++)
    for (int i = 0; i < nold; i++)
      if (!(used >> i & 1) && uses(g, &g->v[j], olds[i])) used |= 1ul << i;
  for (int i = 0; i < nold; i++)
    if (all ? !(used >> i & 1) : !cg_recs_use(g, olds[i])) {
      scalars |= olds[i]->kind == CG_SCALAR;
      repin(L, pidx, gr->id, log, lv, gf->changed, olds[i], 0);
    }
  if (!all) /* objects past the sets: each checked as rebind checks them */
    for (size_t i = 0; i < rec->n; i++) {
      if (!gf->changed[i]) continue;
      const cg_rec *y = &log->v[i];
      for (size_t j = 0; j < y->nvals; j++) {
        lua_rawgeti(L, lv, (lua_Integer)(y->v0 + j));
        cg_obj *o = cg_toany(L, ctx, -1);
        if (o && (o->kind == CG_BUFFER || o->kind == CG_SCALAR) &&
            !cg_recs_use(g, o))
          cg_unpin_in(L, pidx, lua_gettop(L), gr->id);
        lua_pop(L, 1);
      }
      const cg_rec *x = &rec->v[i];
      for (size_t j = 0; j < x->nvals; j++) {
        lua_rawgeti(L, rv, (lua_Integer)(x->v0 + j));
        if (cg_toany(L, ctx, -1)) cg_pin_in(L, pidx, lua_gettop(L), gr->id);
        lua_pop(L, 1);
      }
      scalars = 1;
    }
  for (size_t i = 0; i < rec->n; i++) { /* the log takes the new record */
    if (!gf->changed[i]) continue;
    cg_rec *x = &rec->v[i], *y = &log->v[i];
    for (size_t j = 0; j < x->nvals; j++) {
      lua_rawgeti(L, rv, (lua_Integer)(x->v0 + j));
      lua_rawseti(L, lv, (lua_Integer)(y->v0 + j));
    }
    size_t peer = y->peer;
    if (x->kind == NK_KERNEL) {
      memcpy(log->words + y->word0, rec->words + x->word0,
             ((const cg_kernel *)x->kernel)->nwords * 8);
      memcpy(log->objs + y->arg0, rec->objs + x->arg0,
             (size_t)x->nargs * sizeof *log->objs);
    }
    *y = *x;
    y->peer = peer;
  }
  if (scalars) cg_graph_rescan(L, gr, gidx);
  lua_pop(L, 1);
}

/* -- the call --------------------------------------------------------------- */

/* The end of a following recording (argument: the context): which log it
   matched whole, or -1. */
static int follow_end(lua_State *L) {
  lua_pushinteger(L, cg_follow_end(L, lua_touserdata(L, 1)));
  return 1;
}

/* Runs fn (at fidx) with the nargs arguments from 2 as a recording on the
   stream object at sidx, following the logs of f (or none); its results
   left on the stack above the message handler, their count returned;
   *whole: the log of f it matched whole, or -1. */
static int record(lua_State *L, cg_graphed *gf, int fidx, int nargs,
                  int sidx, cg_follow *f, int *whole) {
  cg_ctx *ctx = gf->h.ctx;
  cg_stream *s = lua_touserdata(L, sidx);
  cg_recs_reset(gf->rec);
  cg_capture cap;
  memset(&cap, 0, sizeof cap);
  cap.top = &cap;
  cap.origin = s->h.drv.stream;
  cap.serial = ++ctx->root->captures;
  cap.recording = 1;
  cap.vals = cap.pins = gf->vals;
  cap.recs = gf->rec;
  cap.fn = lua_topointer(L, fidx);
  cap.follow = f;
  *whole = -1;
  int h = lua_gettop(L) + 1;
  lua_pushcfunction(L, cg_traceback);
  luaL_checkstack(L, nargs + 2, NULL);
  lua_pushvalue(L, fidx);
  for (int i = 0; i < nargs; i++) lua_pushvalue(L, 2 + i);
  cg_set_capture(ctx, &cap);
  int status = lua_pcall(L, nargs, LUA_MULTRET, h);
  if (status == LUA_OK && f && !f->stopped) {
    lua_pushcfunction(L, follow_end); /* a light function: no allocation */
    lua_pushlightuserdata(L, ctx);
    if ((status = lua_pcall(L, 1, 1, h)) == LUA_OK) {
      *whole = (int)lua_tointeger(L, -1);
      lua_pop(L, 1);
    }
  }
  cg_set_capture(ctx, NULL);
  if (status != LUA_OK) lua_error(L);
  if (*whole >= 0) return lua_gettop(L) - h; /* nothing noted */
  size_t was = gf->nvals; /* values of a longer recording go */
  gf->nvals = cap.nvals;
  if (was > gf->nvals) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, gf->vals);
    for (size_t i = gf->nvals + 1; i <= was; i++) {
      lua_pushnil(L);
      lua_rawseti(L, -2, (lua_Integer)i);
    }
    lua_pop(L, 1);
  }
  return lua_gettop(L) - h;
}

/* g(...) -> fn(...) */
static int graphed_call(lua_State *L) {
  cg_graphed *gf = check(L);
  cg_ctx *ctx = gf->h.ctx;
  int nargs = lua_gettop(L) - 1;
  if (gf->eager) { /* fn itself */
    lua_getiuservalue(L, 1, UV_FN);
    lua_insert(L, 2);
    lua_call(L, nargs, LUA_MULTRET);
    return lua_gettop(L) - 1;
  }
  cg_check_outside(L, ctx, "a graphed function",
                   "call it after the capture ends, or capture its work");
  cg_hold(L); /* no finalizer frees what the notes point to */
  lua_getiuservalue(L, 1, UV_FN);
  int fidx = lua_gettop(L);
  lua_getiuservalue(L, 1, UV_T);
  int t = lua_gettop(L);
  if (lua_getfield(L, t, "stream") == LUA_TNIL) { /* the first stream given */
    lua_pop(L, 1);
    for (int i = 2; i <= nargs + 1; i++)
      if (cg_testobj(L, i, CG_STREAM)) {
        lua_pushvalue(L, i);
        break;
      }
    if (lua_gettop(L) == t)
      return luaL_error(L, "a graphed function's call needs a cugraph.Stream "
                        "to run on: give it one as an argument, or "
                        "opts.stream to cuda.graphed");
  }
  int sidx = lua_gettop(L);
  cg_stream *s = cg_checkobj(L, sidx, CG_STREAM);
  if (s->h.ctx != ctx) cg_error_devices(L, ctx, s->h.ctx, "a graphed call");
  uint64_t key = cg_mix(0, (uint64_t)(uintptr_t)s);
  for (int i = 2; i <= nargs + 1; i++)
    key = cg_mix(key, cg_graphed_keyof(L, ctx, i, 0));
  if (lua_getiuservalue(L, 1, UV_KEY) == LUA_TFUNCTION) { /* opts.key */
    for (int i = 2; i <= nargs + 1; i++) lua_pushvalue(L, i);
    lua_call(L, nargs, 1);
    key = cg_mix(key, cg_graphed_keyof(L, ctx, -1, 1));
  }
  lua_pop(L, 1);
  cg_follow f; /* the key's graphs' logs */
  int slots[MAXGRAPHS], whole;
  f.n = 0;
  for (int i = 0; i < gf->max; i++) /* one freed through f:graphs() goes */
    if (gf->var[i].gr && !gf->var[i].gr->h.open) drop(L, gf, t, i);
  for (int i = 0; i < gf->max; i++)
    if (gf->var[i].gr && gf->var[i].key == key) {
      slots[f.n] = i;
      f.vals[f.n] = 2 * i + 2;
      f.log[f.n++] = gf->var[i].log;
    }
  f.live = f.n == 64 ? ~(uint64_t)0 : ((uint64_t)1 << f.n) - 1;
  f.ref = gf->uv;
  f.at = 0;
  f.hit = f.stopped = 0;
  int nres = record(L, gf, fidx, nargs, sidx, f.n ? &f : NULL, &whole);
  int top = lua_gettop(L);
  gf->calls++;
  int slot = whole >= 0 ? slots[whole] : -1, how = whole >= 0 ? 0 : -1;
  if (how < 0) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, gf->vals);
    int rv = lua_gettop(L);
    if (gf->cchanged < gf->rec->n) {
      size_t c = gf->rec->n + 64;
      unsigned char *p = realloc(gf->changed, c);
      if (!p) return luaL_error(L, "out of host memory");
      gf->changed = p;
      gf->cchanged = c;
    }
    /* the key's graphs, the most recently used first: one with the
       recording's parameters, else the least recently used whose work is
       its work (others may have parameters that come back) */
    int last = -1;
    unsigned long below = (unsigned long)-1;
    for (;;) {
      int next = -1;
      for (int i = 0; i < gf->max; i++)
        if (gf->var[i].gr && gf->var[i].key == key &&
            gf->var[i].used < below &&
            (next < 0 || gf->var[i].used > gf->var[next].used))
          next = i;
      if (next < 0) break;
      below = gf->var[next].used;
      lua_rawgeti(L, t, 2 * next + 2);
      int d = cg_graphed_differ(L, gf->rec, rv, gf->var[next].log,
                                lua_gettop(L), gf->var[next].gr, gf->changed);
      lua_pop(L, 1);
      last = next;
      if (d == 0) {
        slot = next, how = 0;
        break;
      }
      if (d > 0 && (slot < 0 || d <= how)) slot = next, how = d;
    }
    if (how == 1 && last != slot) { /* its changes again */
      lua_rawgeti(L, t, 2 * slot + 2);
      cg_graphed_differ(L, gf->rec, rv, gf->var[slot].log, lua_gettop(L),
                        gf->var[slot].gr, gf->changed);
      lua_pop(L, 1);
    }
    int again = how != 0 &&
                seen_again(gf, cg_graphed_params(L, gf->rec, rv, key));
    if (how > 0 && again) { /* parameters that come back: a graph of */
      int i = 0;            /* their own, while there is room */
      while (i < gf->max && gf->var[i].gr) i++;
      if (i < gf->max) slot = i, how = -1;
    }
    if (how == 1) { /* the same graph, nodes set in place */
      lua_rawgeti(L, t, 2 * slot + 1);
      lua_rawgeti(L, t, 2 * slot + 2);
      set_nodes(L, gf, slot, lua_gettop(L) - 1, rv, lua_gettop(L));
      lua_pop(L, 2);
    } else if (slot >= 0 && how == 2) { /* the same work, built again */
      keep_log(L, gf, t, slot, rv);
      build(L, gf, t, slot, sidx);
    } else if (how < 0) { /* new work (or parameters): a new graph */
      if (slot < 0) slot = free_slot(L, gf, t);
      keep_log(L, gf, t, slot, rv);
      gf->var[slot].key = key;
      build(L, gf, t, slot, sidx);
    }
  }
  if (how == 0) gf->same++;
  variant *v = &gf->var[slot];
  v->used = gf->calls;
  lua_rawgeti(L, t, 2 * slot + 1);
  cg_graph_launch(L, v->gr, -1, s->h.drv.stream);
  lua_settop(L, top);
  return nres;
}

/* -- the type -------------------------------------------------------------- */

/* cuda.graphed(fn [, {graphs =, key =, stream =, eager =}]) -> Graphed */
static int graphed_new(lua_State *L) {
  static const char *const keys[] = { "graphs", "key", "stream", "eager",
                                      NULL };
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_Integer max = 8;
  int eager = 0;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    cg_check_options(L, 2, "cuda.graphed", keys);
    if (lua_getfield(L, 2, "graphs") != LUA_TNIL) {
      int ok;
      max = lua_tointegerx(L, -1, &ok);
      if (!ok || max < 1 || max > MAXGRAPHS)
        luaL_argerror(L, 2, lua_pushfstring(L, "opts.graphs must be an "
                      "integer from 1 to %d", MAXGRAPHS));
    }
    if (lua_getfield(L, 2, "key") != LUA_TNIL &&
        lua_type(L, -1) != LUA_TFUNCTION)
      luaL_argerror(L, 2, "opts.key must be a function");
    if (lua_getfield(L, 2, "stream") != LUA_TNIL &&
        !cg_testobj(L, -1, CG_STREAM))
      luaL_argerror(L, 2, "opts.stream must be a cugraph.Stream");
    lua_getfield(L, 2, "eager");
    eager = lua_toboolean(L, -1);
    lua_pop(L, 4);
  }
  const char *env = getenv("CUGRAPH_LUA_EAGER");
  if (env && *env && strcmp(env, "0")) eager = 1;
  cg_ctx *ctx = cg_context(L);
  lua_settop(L, 2);
  cg_graphed *gf = cg_newobjuv(L, ctx, sizeof *gf, CG_GRAPHED, 3); /* 3 */
  gf->max = (int)max;
  gf->eager = (unsigned char)eager;
  gf->vals = gf->uv = LUA_NOREF;
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, 3, UV_FN);
  if (!lua_isnil(L, 2)) {
    lua_getfield(L, 2, "key");
    lua_setiuservalue(L, 3, UV_KEY);
  }
  lua_newtable(L); /* the graphs and their values */
  if (!lua_isnil(L, 2)) {
    lua_getfield(L, 2, "stream");
    lua_setfield(L, -2, "stream");
  }
  lua_pushvalue(L, -1);
  gf->uv = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_setiuservalue(L, 3, UV_T);
  lua_newtable(L);
  gf->vals = luaL_ref(L, LUA_REGISTRYINDEX);
  if (!(gf->rec = calloc(1, sizeof *gf->rec)))
    return luaL_error(L, "out of host memory");
  gf->h.open = 1;
  return 1;
}

/* What the type frees beside its handle (it has none): the recordings and
   the values; its graphs go with the table that holds them. */
static void graphed_release(lua_State *L, cg_obj *o) {
  cg_graphed *gf = (cg_graphed *)o;
  cg_recs_free(gf->rec);
  gf->rec = NULL;
  for (int i = 0; i < MAXGRAPHS; i++) {
    cg_recs_free(gf->var[i].log);
    gf->var[i].log = NULL;
    gf->var[i].gr = NULL;
  }
  free(gf->changed);
  gf->changed = NULL;
  luaL_unref(L, LUA_REGISTRYINDEX, gf->vals);
  luaL_unref(L, LUA_REGISTRYINDEX, gf->uv);
  gf->vals = gf->uv = LUA_NOREF;
}

/* g:free(): its graphs too */
static int graphed_free(lua_State *L) {
  cg_graphed *gf = cg_toobj(L, 1, CG_GRAPHED);
  if (gf->h.open) {
    lua_settop(L, 1);
    lua_getiuservalue(L, 1, UV_T);
    for (int i = 0; i < MAXGRAPHS; i++) drop(L, gf, 2, i);
    lua_settop(L, 1);
  }
  return cg_close(L, CG_GRAPHED, 0);
}

static int graphed_gc(lua_State *L) { return cg_close(L, CG_GRAPHED, 1); }

/* g:graphs() -> {Graph, ...}: the graphs its calls replay, the most
   recently used first */
static int graphed_graphs(lua_State *L) {
  cg_graphed *gf = check(L);
  lua_settop(L, 1);
  lua_getiuservalue(L, 1, UV_T);
  lua_newtable(L);
  int n = 0;
  unsigned long last = (unsigned long)-1;
  for (;;) { /* by use, newest first */
    int best = -1;
    for (int i = 0; i < gf->max; i++)
      if (gf->var[i].gr && gf->var[i].used < last &&
          (best < 0 || gf->var[i].used > gf->var[best].used))
        best = i;
    if (best < 0) break;
    last = gf->var[best].used;
    lua_rawgeti(L, 2, 2 * best + 1);
    lua_rawseti(L, 3, ++n);
  }
  return 1;
}

/* g:stats() -> {calls =, graphs =, builds =, set =, same =} */
static int graphed_stats(lua_State *L) {
  cg_graphed *gf = check(L);
  int n = 0;
  for (int i = 0; i < gf->max; i++) n += gf->var[i].gr != NULL;
  lua_createtable(L, 0, 5);
  lua_pushinteger(L, (lua_Integer)gf->calls);
  lua_setfield(L, -2, "calls");
  lua_pushinteger(L, n);
  lua_setfield(L, -2, "graphs");
  lua_pushinteger(L, gf->builds);
  lua_setfield(L, -2, "builds");
  lua_pushinteger(L, gf->set);
  lua_setfield(L, -2, "set");
  lua_pushinteger(L, gf->same);
  lua_setfield(L, -2, "same");
  return 1;
}

static int graphed_tostring(lua_State *L) {
  cg_graphed *gf = cg_toobj(L, 1, CG_GRAPHED);
  int n = 0;
  for (int i = 0; gf->h.open && i < gf->max; i++) n += gf->var[i].gr != NULL;
  return cg_tostring(L, &gf->h, " (%d graph%s of %d%s)", n, n == 1 ? "" : "s",
                     gf->max, gf->eager ? ", eager" : "");
}

void graphed_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"graphs", graphed_graphs}, {"stats", graphed_stats},
    {"free", graphed_free}, {"close", graphed_free}, {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__call", graphed_call}, {"__gc", graphed_gc}, {"__close", graphed_free},
    {"__tostring", graphed_tostring}, {NULL, NULL}
  };
  cg_newtype(L, CG_GRAPHED, methods, meta, graphed_release);
  lua_pushcfunction(L, graphed_new);
  lua_setfield(L, -2, "graphed");
}
