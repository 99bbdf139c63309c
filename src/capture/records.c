/* What a capture records of the nodes it makes through the API: each
   kernel launch, fill, copy, allocation, free, conditional and child graph
   node, with its driver node (the capture stream's dependency right after
   the call), its kernel and the objects and bytes of its arguments, and
   the Lua line that made it. Records are C arrays, made only while
   capturing; the graph layer changes the instantiated graph through them
   (g:rebind, node:set) and labels its nodes (g:nodes, g:dot). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "capture/capture.h"

const char *const cg_nk_names[] = {
  "kernel", "fill", "copy", "alloc", "free", "conditional", "graph",
  "host copy", "copy 3d", "semaphore wait", "semaphore signal",
  "wait value", "write value", "host"
};
_Static_assert(sizeof cg_nk_names / sizeof *cg_nk_names == NK_HOST + 1,
               "a name for every kind of record");

void cg_recs_free(cg_recs *r) {
  if (!r) return;
  free(r->v);
  free(r->objs);
  free(r->words);
  free(r->text);
  free(r->calls);
  free(r);
}

void cg_recs_release(cg_ctx *ctx, cg_recs *r) {
  if (!r) return;
  cg_capstate *cs = ctx->root->capstate;
  if (!cs || cs->spare || ctx->root->closed) { /* the state is closing */
    cg_recs_free(r);
    return;
  }
  cg_recs_reset(r);
  cs->spare = r;
}

void cg_recs_reset(cg_recs *r) {
  r->n = r->nobjs = r->nwords = r->ntext = r->lazy = r->ncalls = 0; /* the
    arrays stay */
  r->tail = NULL;
  r->lastsrc = r->label = 0;
  r->lastfn = NULL;
}

size_t cg_recs_count(const cg_recs *r) { return r ? r->n : 0; }

static void *grow(lua_State *L, void *v, size_t *cap, size_t need,
                  size_t size) {
  if (need <= *cap) return v;
  size_t c = *cap ? *cap : 8;
  while (c < need) c *= 2;
  void *w = realloc(v, c * size);
  if (!w) luaL_error(L, "out of host memory");
  *cap = c;
  return w;
}

/* The records of the capture in progress, made on first use with room for
   as many as the last capture made, in the arrays of a freed graph's
   records when the state kept them (a loop capturing the same closure
   allocates nothing); the capture releases them when it fails. */
static cg_recs *recs_of(lua_State *L, cg_ctx *ctx) {
  cg_capture *top = ctx->capture->top;
  if (top->recs) return top->recs;
  cg_capstate *cs = cg_capstate_of(L, ctx);
  cg_recs *r = cs->spare;
  cs->spare = NULL;
  if (!r && !(r = calloc(1, sizeof *r))) luaL_error(L, "out of host memory");
  top->recs = r;
  const size_t *h = cs->hint;
  r->v = grow(L, r->v, &r->cap, h[0], sizeof *r->v);
  r->objs = grow(L, r->objs, &r->cobjs, h[1], sizeof *r->objs);
  r->words = grow(L, r->words, &r->cwords, h[2], 8);
  return r;
}

void cg_recs_done(cg_ctx *ctx, const cg_recs *r) {
  cg_capstate *cs = ctx->root->capstate;
  if (!r || !cs) return;
  cs->hint[0] = r->n;
  cs->hint[1] = r->nobjs;
  cs->hint[2] = r->nwords;
}

cg_recs *cg_recs_copy(lua_State *L, const cg_recs *from, cg_recs *to) {
  if (!to && !(to = calloc(1, sizeof *to))) luaL_error(L, "out of host memory");
  cg_recs_reset(to);
  to->v = grow(L, to->v, &to->cap, from->n, sizeof *to->v);
  to->objs = grow(L, to->objs, &to->cobjs, from->nobjs, sizeof *to->objs);
  to->words = grow(L, to->words, &to->cwords, from->nwords, 8);
  to->text = grow(L, to->text, &to->ctext, from->ntext, 1);
  if (from->n) memcpy(to->v, from->v, from->n * sizeof *to->v);
  if (from->nobjs) memcpy(to->objs, from->objs, from->nobjs * sizeof *to->objs);
  if (from->nwords) memcpy(to->words, from->words, from->nwords * 8);
  if (from->ntext) memcpy(to->text, from->text, from->ntext);
  to->calls = grow(L, to->calls, &to->ccalls, from->ncalls, sizeof *to->calls);
  if (from->ncalls)
    memcpy(to->calls, from->calls, from->ncalls * sizeof *to->calls);
  to->ncalls = from->ncalls;
  to->n = from->n;
  to->nobjs = from->nobjs;
  to->nwords = from->nwords;
  to->ntext = from->ntext;
  return to;
}

static size_t addtext(lua_State *L, cg_recs *r, const char *s) {
  size_t len = strlen(s) + 1;
  r->text = grow(L, r->text, &r->ctext, r->ntext + len, 1);
  memcpy(r->text + r->ntext, s, len);
  r->ntext += len;
  return r->ntext - len + 1;
}

const char *cg_recs_text(const cg_recs *r, size_t at) {
  return at ? r->text + at - 1 : NULL;
}

static const char lastfn_key = 'f';

/* The line of the nearest Lua function calling in. Its source is looked up
   only when the function differs from the last one's, which the capture's
   pins keep alive (or the stack: the closure captured), so that the
   identity holds. */
static void where(lua_State *L, cg_ctx *ctx, cg_recs *r, cg_rec *e) {
  lua_Debug ar;
  for (int level = 1; level < 4 && lua_getstack(L, level, &ar); level++) {
    if (!lua_getinfo(L, "lf", &ar)) continue;
    if (ar.currentline <= 0) {
      lua_pop(L, 1);
      continue;
    }
    e->line = ar.currentline;
    if (lua_topointer(L, -1) == r->lastfn) {
      lua_pop(L, 1);
      e->src = r->lastsrc;
      return;
    }
    r->lastfn = lua_topointer(L, -1);
    if (r->lastfn != ctx->capture->top->fn) { /* that one is on the stack */
      lua_rawgeti(L, LUA_REGISTRYINDEX, ctx->capture->pins);
      lua_pushvalue(L, -2);
      lua_rawsetp(L, -2, &lastfn_key);
      lua_pop(L, 1);
    }
    lua_getinfo(L, ">S", &ar);
    if (!r->lastsrc || strcmp(cg_recs_text(r, r->lastsrc), ar.short_src))
      r->lastsrc = addtext(L, r, ar.short_src);
    e->src = r->lastsrc;
    return;
  }
}

/* The one node that work on capturing stream s now depends on (NULL when
   there are more, or none); the driver's result. */
static CUresult chain_end(CUstream s, CUgraphNode *node) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  const CUgraphNode *deps = NULL;
  size_t n = 0;
  CUresult res = cg_drv.cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps,
                                               NULL, &n);
  *node = res == CUDA_SUCCESS && n == 1 ? deps[0] : NULL;
  return res;
}

/* The node the last work on s made: the stream's one dependency now (none
   in a recording, which sends no work). */
static CUgraphNode lastnode(lua_State *L, cg_ctx *ctx, CUstream s) {
  CUgraphNode v = NULL;
  if (cg_drv.cuStreamGetCaptureInfo && !ctx->capture->top->recording)
    cg_check(L, ctx, "cuStreamGetCaptureInfo", chain_end(s, &v));
  return v;
}

/* Whether a kernel launch on s may be recorded lazily: s is the top
   capture's stream, whose nodes a walk back finds (the driver has the
   walk's calls), and no other lazy records wait on a resolution whose
   chain a wait broke. */
static int deferrable(const cg_ctx *ctx, const cg_recs *r, CUstream s) {
  return ctx->capture->depth == 0 && s == ctx->capture->origin &&
         !ctx->capture->top->recording &&
         !r->tail && cg_drv.cuGraphNodeGetDependencies &&
         cg_drv.cuStreamGetCaptureInfo;
}

/* Whether kernel node node is the launch of record e. */
static int same_launch(const cg_recs *r, const cg_rec *e, CUgraphNode node,
                       CUresult *res, const char **api) {
  CUgraphNodeType t;
  *api = "cuGraphNodeGetType";
  if ((*res = cg_drv.cuGraphNodeGetType(node, &t)) != CUDA_SUCCESS ||
      t != CU_GRAPH_NODE_TYPE_KERNEL)
    return 0;
  CUDA_KERNEL_NODE_PARAMS p;
  *api = "cuGraphKernelNodeGetParams";
  if ((*res = cg_drv.cuGraphKernelNodeGetParams(node, &p)) != CUDA_SUCCESS)
    return 0;
  if (p.func != e->f || p.gridDimX != e->grid[0] || p.gridDimY != e->grid[1]
      || p.gridDimZ != e->grid[2] || p.blockDimX != e->block[0] ||
      p.blockDimY != e->block[1] || p.blockDimZ != e->block[2] ||
      p.sharedMemBytes != e->shared)
    return 0;
  const uint64_t *w = r->words + e->word0;
  for (int i = 0; i < e->nargs; i++) {
    size_t size = e->params[i].size;
    if (!p.kernelParams || !p.kernelParams[i] ||
        memcmp(p.kernelParams[i], w, size))
      return 0;
    w += (size + 7) / 8;
  }
  return 1;
}

CUresult cg_recs_resolve(cg_recs *r, const char **api) {
  if (!r || !r->lazy) return CUDA_SUCCESS;
  CUgraphNode node = r->tail, deps[2];
  CUgraphEdgeData ed[2]; /* asked for: a programmatic edge's type would be
                            lost, which the driver refuses */
  size_t j = r->n;
  CUresult res = CUDA_SUCCESS;
  while (r->lazy && node) {
    while (j > 0 && !r->v[j - 1].lazy) j--;
    if (!j) break;
    cg_rec *e = &r->v[j - 1];
    if (same_launch(r, e, node, &res, api)) {
      e->node = node;
      e->lazy = 0;
      r->lazy--;
      j--;
    }
    if (res != CUDA_SUCCESS) break;
    if (!r->lazy) break;
    size_t nd = 2;
    *api = "cuGraphNodeGetDependencies";
    res = cg_drv.cuGraphNodeGetDependencies(node, deps, ed, &nd);
    if (res != CUDA_SUCCESS) break;
    node = nd == 1 ? deps[0] : NULL; /* a join or the root: the walk ends */
  }
  /* what the walk did not find stays without a node (g:rebind says so) */
  for (size_t i = 0; r->lazy && i < r->n; i++)
    if (r->v[i].lazy) {
      r->v[i].lazy = 0;
      r->lazy--;
    }
  r->tail = NULL;
  return res;
}

CUresult cg_recs_end(cg_ctx *ctx) {
  cg_capture *top = ctx->capture ? ctx->capture->top : NULL;
  cg_recs *r = top ? top->recs : NULL;
  if (!r || !r->lazy || r->tail) return CUDA_SUCCESS;
  CUresult res = chain_end(top->origin, &r->tail);
  if (!r->tail) { /* no chain's end: the lazy records get no node */
    const char *ignored;
    cg_recs_resolve(r, &ignored);
  }
  return res;
}

void cg_recs_libcall(lua_State *L, cg_ctx *ctx, CUstream s, const char *what) {
  cg_capture *c = ctx->capture;
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  CUgraph g = NULL;
  size_t k = 0;
  if (!c || c->top->recording || !cg_drv.cuStreamGetCaptureInfo ||
      cg_drv.cuStreamGetCaptureInfo(s, &st, NULL, &g, NULL, NULL, NULL) ||
      !g || cg_drv.cuGraphGetNodes(g, NULL, &k))
    return; /* its nodes go unnamed */
  cg_recs *r = recs_of(L, ctx);
  r->calls = grow(L, r->calls, &r->ccalls, r->ncalls + 1, sizeof *r->calls);
  cg_rec at;
  memset(&at, 0, sizeof at);
  where(L, ctx, r, &at);
  size_t name = addtext(L, r, what);
  r->calls[r->ncalls++] = (cg_libcall){ g, k, at.src, name, at.line };
}

void cg_recs_mark(lua_State *L, cg_ctx *ctx, CUstream s) {
  if (!ctx->capture || s != ctx->capture->top->origin) return;
  CUresult res = cg_recs_end(ctx);
  if (res != CUDA_SUCCESS) cg_check(L, ctx, "cuStreamGetCaptureInfo", res);
}

/* A recording's values of record e: the stack's values at idx[0 .. n-1],
   absolute (0: nil), in the recording's table from its next free index. */
static void putvals(lua_State *L, cg_ctx *ctx, cg_rec *e, const int *idx,
                    int n) {
  cg_capture *top = ctx->capture->top;
  if (!top->recording) return;
  lua_rawgeti(L, LUA_REGISTRYINDEX, top->vals);
  e->v0 = top->nvals + 1;
  e->nvals = (size_t)n;
  for (int i = 0; i < n; i++) {
    if (idx[i]) lua_pushvalue(L, idx[i]);
    else lua_pushnil(L);
    lua_rawseti(L, -2, (lua_Integer)(e->v0 + (size_t)i));
  }
  top->nvals += (size_t)n;
  lua_pop(L, 1);
}

/* -- following earlier recordings ----------------------------------------- */

/* The 8-byte words of kernel record e's arguments. */
static size_t words_of(const cg_rec *e) {
  size_t w = 0;
  for (int i = 0; i < e->nargs; i++) w += (e->params[i].size + 7) / 8;
  return w;
}

/* Whether record y of log is the work x describes (a kernel's argument
   words at w, nw of them, and its arguments' objects at o). */
static int same_work(const cg_recs *log, const cg_rec *y, const cg_rec *x,
                     const void *w, size_t nw, cg_obj *const *o) {
  if (y->kind != x->kind || y->depth || y->label || y->stream != x->stream)
    return 0;
  switch (x->kind) {
  case NK_KERNEL: { /* few words and objects: compared inline */
    if (y->kernel != x->kernel || y->f != x->f || y->shared != x->shared ||
        y->grid[0] != x->grid[0] || y->grid[1] != x->grid[1] ||
        y->grid[2] != x->grid[2] || y->block[0] != x->block[0] ||
        y->block[1] != x->block[1] || y->block[2] != x->block[2])
      return 0;
    const uint64_t *a = log->words + y->word0;
    for (size_t i = 0; i < nw; i++) {
      uint64_t b;
      memcpy(&b, (const char *)w + 8 * i, 8);
      if (a[i] != b) return 0;
    }
    cg_obj *const *p = log->objs + y->arg0;
    for (int i = 0; i < x->nargs; i++)
      if (p[i] != o[i]) return 0;
    return 1;
  }
  case NK_FILL:
    return y->obj[0] == x->obj[0] && y->off == x->off &&
           y->value == x->value && y->elem == x->elem &&
           y->width == x->width && y->height == x->height &&
           y->pitch == x->pitch;
  default: /* NK_COPY */
    return y->obj[0] == x->obj[0] && y->obj[1] == x->obj[1] &&
           y->bytes == x->bytes && y->off == x->off && y->soff == x->soff;
  }
}

/* Stops following: the records matched so far are copied, with their
   values, from a log that has them all. */
static void stop(lua_State *L, cg_ctx *ctx, cg_follow *f) {
  f->stopped = 1;
  f->hit = 0;
  if (!f->at) return;
  int from = 0;
  while (!(f->live >> from & 1)) from++;
  const cg_recs *log = f->log[from];
  cg_capture *top = ctx->capture->top;
  cg_recs *r = recs_of(L, ctx);
  luaL_checkstack(L, 4, NULL);
  lua_rawgeti(L, LUA_REGISTRYINDEX, f->ref);
  lua_rawgeti(L, -1, f->vals[from]);
  lua_rawgeti(L, LUA_REGISTRYINDEX, top->vals);
  size_t was = 0, src = 0;
  for (size_t i = 0; i < f->at; i++) {
    const cg_rec *y = &log->v[i];
    size_t nw = y->kind == NK_KERNEL ? words_of(y) : 0;
    size_t no = y->kind == NK_KERNEL ? (size_t)y->nargs : 0;
    r->v = grow(L, r->v, &r->cap, r->n + 1, sizeof *r->v);
    r->objs = grow(L, r->objs, &r->cobjs, r->nobjs + no, sizeof *r->objs);
    r->words = grow(L, r->words, &r->cwords, r->nwords + nw, 8);
    cg_rec *e = &r->v[r->n++];
    *e = *y;
    if (no) {
      memcpy(r->objs + r->nobjs, log->objs + y->arg0, no * sizeof *r->objs);
      e->arg0 = r->nobjs;
      r->nobjs += no;
    }
    if (nw) {
      memcpy(r->words + r->nwords, log->words + y->word0, nw * 8);
      e->word0 = r->nwords;
      r->nwords += nw;
    }
    if (y->src != was) { /* one text a run of records from one source */
      was = y->src;
      src = was ? addtext(L, r, cg_recs_text(log, was)) : 0;
    }
    e->src = src;
    e->v0 = top->nvals + 1;
    for (size_t j = 0; j < y->nvals; j++) {
      lua_rawgeti(L, -2, (lua_Integer)(y->v0 + j));
      lua_rawseti(L, -2, (lua_Integer)(e->v0 + j));
    }
    top->nvals += y->nvals;
  }
  lua_pop(L, 3);
}

/* Whether the work x describes (see same_work) is the next record of a log
   the recording follows: then nothing is noted. */
static int follow(lua_State *L, cg_ctx *ctx, const cg_rec *x, const void *w,
                  size_t nw, cg_obj *const *o) {
  cg_capture *c = ctx->capture;
  cg_follow *f = c->top->follow;
  uint64_t live = 0;
  if (!c->depth && !(c->top->recs && c->top->recs->label))
    for (int i = 0; i < f->n; i++)
      if (f->live >> i & 1 && f->at < f->log[i]->n &&
          same_work(f->log[i], &f->log[i]->v[f->at], x, w, nw, o))
        live |= (uint64_t)1 << i;
  if (!live) {
    stop(L, ctx, f);
    return 0;
  }
  f->live = live;
  f->at++;
  f->hit = 1;
  return 1;
}

/* Whether the recording in progress still follows logs. */
static int following(const cg_ctx *ctx) {
  const cg_follow *f = ctx->capture->top->follow;
  return f && !f->stopped;
}

int cg_follow_end(lua_State *L, cg_ctx *ctx) {
  cg_follow *f = ctx->capture->top->follow;
  if (!f || f->stopped) return -1;
  for (int i = 0; i < f->n; i++)
    if (f->live >> i & 1 && f->log[i]->n == f->at) return i;
  stop(L, ctx, f);
  return -1;
}

static cg_rec *newrec(lua_State *L, cg_ctx *ctx, cg_recs *r, CUgraphNode node,
                   int kind) {
  if (following(ctx)) stop(L, ctx, ctx->capture->top->follow);
  r->v = grow(L, r->v, &r->cap, r->n + 1, sizeof *r->v);
  cg_rec *e = &r->v[r->n];
  memset(e, 0, sizeof *e);
  e->node = node;
  e->kind = (unsigned char)kind;
  e->enabled = 1;
  e->depth = ctx->capture->depth;
  e->label = r->label;
  where(L, ctx, r, e);
  r->n++;
  return e;
}

/* The object each argument of launch k passes (NULL: none): a pointer
   slot's object passed its check; an integer-or-pointer slot took it this
   time when it is the argument (the launch refused any light userdata). */
static void launch_objs(lua_State *L, const cg_launchnote *k, cg_obj **objs) {
  for (int i = 0; i < k->nparams; i++) {
    int t = k->params[i].type;
    cg_obj *o = k->seen[i];
    objs[i] = t == CG_P_PTR || (t == CG_P_PTR_OR_INT && o &&
              lua_touserdata(L, k->argidx + i) == o) ? o : NULL;
  }
}

void cg_note_kernel(lua_State *L, cg_ctx *ctx, CUstream s,
                    const cg_launchnote *k) {
  size_t np = (size_t)k->nparams, nw = k->nwords;
  if (ctx->capture->top->follow && following(ctx)) {
    cg_obj *objs[CG_MAX_PARAMS];
    cg_rec x;
    x.kind = NK_KERNEL;
    x.stream = s;
    x.kernel = k->kernel;
    x.f = k->f;
    memcpy(x.grid, k->grid, sizeof x.grid);
    memcpy(x.block, k->block, sizeof x.block);
    x.shared = k->shared;
    x.nargs = k->nparams;
    launch_objs(L, k, objs);
    if (follow(L, ctx, &x, nw ? k->argp[0] : NULL, nw, objs)) return;
  }
  cg_recs *r = recs_of(L, ctx);
  if (r->nobjs + np > r->cobjs)
    r->objs = grow(L, r->objs, &r->cobjs, r->nobjs + np, sizeof *r->objs);
  if (r->nwords + nw > r->cwords)
    r->words = grow(L, r->words, &r->cwords, r->nwords + nw, 8);
  int lazy = deferrable(ctx, r, s);
  cg_rec *e = newrec(L, ctx, r, lazy ? NULL : lastnode(L, ctx, s), NK_KERNEL);
  e->lazy = (unsigned char)lazy;
  r->lazy += (size_t)lazy;
  e->kernel = k->kernel;
  e->f = k->f;
  e->params = k->params;
  memcpy(e->grid, k->grid, sizeof e->grid);
  memcpy(e->block, k->block, sizeof e->block);
  e->shared = k->shared;
  e->nargs = k->nparams;
  e->programmatic = (unsigned char)k->programmatic;
  e->arg0 = r->nobjs;
  e->word0 = r->nwords;
  if (nw) memcpy(r->words + r->nwords, k->argp[0], nw * 8);
  launch_objs(L, k, r->objs + r->nobjs);
  r->nobjs += np;
  r->nwords += nw;
  e->stream = s;
  if (ctx->capture->top->recording) { /* the kernel, its stream, then */
    int idx[2 + CG_MAX_PARAMS];        /* the arguments */
    idx[0] = k->kernelidx;
    idx[1] = k->streamidx;
    for (int i = 0; i < k->nparams; i++) idx[2 + i] = k->argidx + i;
    putvals(L, ctx, e, idx, 2 + k->nparams);
  }
  cg_stamp_after(L, ctx, s);
}

void cg_note_vals(lua_State *L, cg_ctx *ctx, CUstream s, const int *idx,
                  int n) {
  if (!cg_recording(ctx)) return;
  cg_follow *f = ctx->capture->top->follow;
  if (f && f->hit) return; /* the record followed has them */
  cg_recs *r = recs_of(L, ctx);
  cg_rec *e = &r->v[r->n - 1];
  e->stream = s;
  putvals(L, ctx, e, idx, n);
}

void cg_record_stream(lua_State *L, cg_ctx *ctx, CUstream s,
                      const char *what) {
  cg_capture *c = ctx->capture;
  if (s == c->origin) return;
  for (int i = 0; !c->depth && i < c->top->nforks; i++)
    if (c->top->forks[i].s == s) return;
  luaL_error(L, "%s: the stream is not part of the graphed function's work; "
             "make it wait on the stream the function runs on first "
             "(s2:wait(s))", what);
}

void cg_record_call(lua_State *L, cg_ctx *ctx, CUstream s, int n) {
  cg_record_stream(L, ctx, s, "work in a graphed function");
  int idx[1 + 16];
  lua_Debug ar;
  if (n > 16 || !lua_getstack(L, 0, &ar) || !lua_getinfo(L, "f", &ar))
    luaL_error(L, "a call of more than 16 arguments cannot be recorded");
  cg_rec *e = newrec(L, ctx, recs_of(L, ctx), NULL, NK_CALL);
  e->stream = s;
  idx[0] = lua_gettop(L); /* the function getinfo pushed */
  for (int i = 1; i <= n; i++) idx[i] = i;
  putvals(L, ctx, e, idx, 1 + n);
  lua_pop(L, 1);
}

void cg_note_fill(lua_State *L, cg_ctx *ctx, CUstream s, cg_obj *dst,
                  size_t off, unsigned value, unsigned elem, size_t width,
                  size_t height, size_t pitch) {
  cg_rec x;
  if (ctx->capture->top->follow && following(ctx)) {
    x.kind = NK_FILL;
    x.stream = s;
    x.obj[0] = dst;
    x.off = off;
    x.value = value;
    x.elem = elem;
    x.width = width;
    x.height = height;
    x.pitch = pitch;
    if (follow(L, ctx, &x, NULL, 0, NULL)) return;
  }
  cg_rec *e = newrec(L, ctx, recs_of(L, ctx), lastnode(L, ctx, s), NK_FILL);
  e->obj[0] = dst;
  e->off = off;
  e->value = value;
  e->elem = elem;
  e->width = width;
  e->height = height;
  e->pitch = pitch;
  cg_stamp_after(L, ctx, s);
}

void cg_note_copy(lua_State *L, cg_ctx *ctx, CUstream s, cg_obj *dst,
                  cg_obj *src, size_t bytes, size_t doff, size_t soff) {
  cg_rec x;
  if (ctx->capture->top->follow && following(ctx)) {
    x.kind = NK_COPY;
    x.stream = s;
    x.obj[0] = dst;
    x.obj[1] = src;
    x.bytes = bytes;
    x.off = doff;
    x.soff = soff;
    if (follow(L, ctx, &x, NULL, 0, NULL)) return;
  }
  cg_rec *e = newrec(L, ctx, recs_of(L, ctx), lastnode(L, ctx, s), NK_COPY);
  e->obj[0] = dst;
  e->obj[1] = src;
  e->bytes = bytes;
  e->off = doff;
  e->soff = soff;
  cg_stamp_after(L, ctx, s);
}

void cg_note_copy3d(lua_State *L, cg_ctx *ctx, CUstream s, cg_obj *dst,
                    cg_obj *src) {
  cg_rec *e = newrec(L, ctx, recs_of(L, ctx), lastnode(L, ctx, s), NK_COPY3D);
  e->obj[0] = dst;
  e->obj[1] = src;
  cg_stamp_after(L, ctx, s);
}

void cg_note_hostcopy(lua_State *L, cg_ctx *ctx, CUstream s, cg_obj *dev,
                      cg_obj *host) {
  cg_rec *e = newrec(L, ctx, recs_of(L, ctx), lastnode(L, ctx, s), NK_HOSTCOPY);
  e->obj[0] = dev;
  e->obj[1] = host;
  cg_stamp_after(L, ctx, s);
}

void cg_note_node(lua_State *L, cg_ctx *ctx, CUgraphNode node,
                  const CUgraphNodeParams *p) {
  if (p->type == CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT ||
      p->type == CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL ||
      p->type == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP)
    return; /* cg_note_extsem and cg_note_memop know their objects */
  int kind = p->type == CU_GRAPH_NODE_TYPE_GRAPH ? NK_GRAPH
           : p->type == CU_GRAPH_NODE_TYPE_HOST ? NK_HOST : NK_COND;
  cg_rec *e = newrec(L, ctx, recs_of(L, ctx), node, kind);
  if (kind == NK_COND) e->value = (unsigned)p->conditional.type;
}

void cg_note_extsem(lua_State *L, cg_ctx *ctx, CUgraphNode node, int wait,
                    cg_obj *sem, cg_obj *value, uint64_t v) {
  cg_rec *e = newrec(L, ctx, recs_of(L, ctx), node,
                     wait ? NK_EXTWAIT : NK_EXTSIGNAL);
  e->obj[0] = sem;
  e->obj[1] = value;
  e->off = (size_t)v;
}

void cg_note_memop(lua_State *L, cg_ctx *ctx, CUgraphNode node, int wait,
                   cg_obj *c, cg_obj *value, uint64_t v, unsigned flags) {
  cg_rec *e = newrec(L, ctx, recs_of(L, ctx), node,
                     wait ? NK_MEMWAIT : NK_MEMWRITE);
  e->obj[0] = c;
  e->obj[1] = value;
  e->off = (size_t)v;
  e->value = flags;
}

int cg_recs_launch(const cg_recs *r, const cg_obj *mod) {
  for (size_t i = 0; r && i < r->n; i++)
    if ((r->v[i].kind == NK_KERNEL && r->v[i].kernel->parent == mod) ||
        r->v[i].kind == NK_GRAPH) /* a child graph's copy may */
      return 1;
  return 0;
}

unsigned cg_recs_allocs(const cg_recs *r) {
  unsigned n = 0;
  for (size_t i = 0; r && i < r->n; i++)
    n += r->v[i].kind == NK_ALLOC && !r->v[i].freed;
  return n;
}


void cg_note_alloc(lua_State *L, cg_ctx *ctx, CUstream s, cg_obj *b) {
  newrec(L, ctx, recs_of(L, ctx), lastnode(L, ctx, s), NK_ALLOC)->obj[0] = b;
}

/* The allocation node of b in this capture, if any, frees its memory. */
void cg_note_free(lua_State *L, cg_ctx *ctx, CUstream s, cg_obj *b) {
  cg_recs *r = recs_of(L, ctx);
  newrec(L, ctx, r, lastnode(L, ctx, s), NK_FREE)->obj[0] = b;
  for (size_t i = 0; i < r->n; i++)
    if (r->v[i].kind == NK_ALLOC && r->v[i].obj[0] == b) r->v[i].freed = 1;
}

size_t cg_label_begin(lua_State *L, cg_ctx *ctx, const char *name) {
  cg_recs *r = recs_of(L, ctx);
  size_t saved = r->label;
  r->label = addtext(L, r, name);
  return saved;
}

/* The capture, still on, keeps its records. */
void cg_label_end(cg_ctx *ctx, size_t saved) {
  if (ctx->capture && ctx->capture->top->recs)
    ctx->capture->top->recs->label = saved;
}
