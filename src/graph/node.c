/* cugraph.Node, and what a capture records of the nodes it makes through
   the API: each kernel launch, fill, copy, allocation, free, conditional
   and child graph node, with its driver node (the capture stream's
   dependency right after the call), its kernel and the objects and bytes
   of its arguments, and the Lua line that made it. Records are C arrays,
   made only while capturing; g:rebind and node:set change the instantiated
   graph through them (cuGraphExec*NodeSetParams), without a new capture.
   Also the stream-ordered allocations of buffer.c, cuda.memory and
   cuda.trim. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/core.h"
#include "kernel/ptx.h"

enum { NK_KERNEL, NK_FILL, NK_COPY, NK_ALLOC, NK_FREE, NK_COND, NK_GRAPH,
       NK_HOSTCOPY };
static const char *const nk_names[] = {
  "kernel", "fill", "copy", "alloc", "free", "conditional", "graph",
  "host copy"
};

typedef struct rec {
  CUgraphNode node;     /* NULL when the driver could not say which */
  unsigned char kind, enabled;
  unsigned char freed;  /* NK_ALLOC: the same graph frees the memory */
  unsigned char dirty;  /* changed in the exec only: the graph follows on
                           demand (cg_graph_sync) */
  int depth;            /* 0: a node of the top graph; n: in a body */
  int line;             /* of the Lua code that made it; 0: unknown */
  size_t src, label;    /* offsets in text + 1; 0: none */
  cg_obj *kernel;       /* NK_KERNEL */
  cg_obj *obj[2];       /* FILL: dst; COPY: dst, src; ALLOC, FREE: buffer */
  unsigned grid[3], block[3], shared;
  int nargs;            /* NK_KERNEL: its arguments' objects from objs[arg0] */
  size_t arg0, word0;   /* and their bytes from words[word0], 8-aligned */
  size_t off, bytes, width, height, pitch; /* FILL: off and shape; COPY */
  size_t soff;          /* COPY: the source's byte offset (off: dst's) */
  unsigned value, elem;                    /* FILL */
} rec;

/* Objects are referenced by pointer: the graph's pins keep them alive. */
struct cg_recs {
  rec *v;
  size_t n, cap;
  cg_obj **objs;        /* a buffer or scalar argument, or NULL */
  size_t nobjs, cobjs;
  uint64_t *words;
  size_t nwords, cwords;
  char *text;           /* sources and labels, each NUL-terminated */
  size_t ntext, ctext;
  size_t lastsrc;       /* while capturing: the latest source, offset + 1, */
  const void *lastfn;   /* of this function */
  size_t label;         /* while capturing: the label of nodes made now */
  unsigned busy;        /* readers holding pointers into these records
                           across allocations (a finalizer they run may
                           free the graph): the records stay the graph's */
};

typedef struct cg_node {
  cg_obj h;
  size_t index;         /* in the graph's records; the graph: user value 1 */
} cg_node;

void cg_recs_free(cg_recs *r) {
  if (!r) return;
  free(r->v);
  free(r->objs);
  free(r->words);
  free(r->text);
  free(r);
}

void cg_recs_release(cg_ctx *ctx, cg_recs *r) {
  if (!r) return;
  cg_ctx *root = ctx->root;
  if (root->spare_recs || root->closed) { /* closed: the state is closing */
    cg_recs_free(r);
    return;
  }
  r->n = r->nobjs = r->nwords = r->ntext = 0; /* the arrays stay */
  r->lastsrc = r->label = 0;
  r->lastfn = NULL;
  r->busy = 0;
  root->spare_recs = r;
}

int cg_recs_busy(const cg_recs *r) { return r && r->busy; }

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
  cg_recs *r = ctx->root->spare_recs;
  ctx->root->spare_recs = NULL;
  if (!r && !(r = calloc(1, sizeof *r))) luaL_error(L, "out of host memory");
  top->recs = r;
  const size_t *h = ctx->rec_hint;
  r->v = grow(L, r->v, &r->cap, h[0], sizeof *r->v);
  r->objs = grow(L, r->objs, &r->cobjs, h[1], sizeof *r->objs);
  r->words = grow(L, r->words, &r->cwords, h[2], 8);
  return r;
}

void cg_recs_done(cg_ctx *ctx, const cg_recs *r) {
  if (!r) return;
  ctx->rec_hint[0] = r->n;
  ctx->rec_hint[1] = r->nobjs;
  ctx->rec_hint[2] = r->nwords;
}

static size_t addtext(lua_State *L, cg_recs *r, const char *s) {
  size_t len = strlen(s) + 1;
  r->text = grow(L, r->text, &r->ctext, r->ntext + len, 1);
  memcpy(r->text + r->ntext, s, len);
  r->ntext += len;
  return r->ntext - len + 1;
}

static const char *text(const cg_recs *r, size_t at) {
  return at ? r->text + at - 1 : NULL;
}

static const char lastfn_key = 'f';

/* The line of the nearest Lua function calling in. Its source is looked up
   only when the function differs from the last one's, which the capture's
   pins keep alive (or the stack: the closure captured), so that the
   identity holds. */
static void where(lua_State *L, cg_ctx *ctx, cg_recs *r, rec *e) {
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
    if (!r->lastsrc || strcmp(text(r, r->lastsrc), ar.short_src))
      r->lastsrc = addtext(L, r, ar.short_src);
    e->src = r->lastsrc;
    return;
  }
}

/* The node the last work on s made: the stream's one dependency now. */
static CUgraphNode lastnode(lua_State *L, cg_ctx *ctx, CUstream s) {
  if (!cg_drv.cuStreamGetCaptureInfo) return NULL;
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  const CUgraphNode *deps = NULL;
  size_t n = 0;
  CU(L, ctx, cuStreamGetCaptureInfo, s, &st, NULL, NULL, &deps, NULL, &n);
  return n == 1 ? deps[0] : NULL;
}

static rec *newrec(lua_State *L, cg_ctx *ctx, cg_recs *r, CUgraphNode node,
                   int kind) {
  r->v = grow(L, r->v, &r->cap, r->n + 1, sizeof *r->v);
  rec *e = &r->v[r->n];
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

static cg_obj *bufobj(lua_State *L, cg_ctx *ctx, int idx) {
  if (!lua_getmetatable(L, idx)) return NULL;
  const void *mt = lua_topointer(L, -1);
  lua_pop(L, 1);
  return mt == ctx->mt[CG_BUFFER] || mt == ctx->mt[CG_SCALAR]
         ? lua_touserdata(L, idx) : NULL;
}

static CUdeviceptr ptrof(const cg_obj *o) {
  return o->kind == CG_SCALAR ? ((const cg_scalar *)o)->ptr
                              : ((const cg_buffer *)o)->ptr;
}

static size_t words(const ptx_param *p) { return (p->size + 7) / 8; }

void cg_note_kernel(lua_State *L, cg_ctx *ctx, CUstream s, cg_obj *kernel,
                    int kidx, const unsigned grid[3], const unsigned block[3],
                    unsigned shared) {
  cg_kinfo k;
  cg_kernel_info(kernel, &k);
  cg_recs *r = recs_of(L, ctx);
  size_t nw = 0;
  for (int i = 0; i < k.nparams; i++) nw += words(&k.params[i]);
  r->objs = grow(L, r->objs, &r->cobjs, r->nobjs + (size_t)k.nparams,
                 sizeof *r->objs);
  r->words = grow(L, r->words, &r->cwords, r->nwords + nw, 8);
  rec *e = newrec(L, ctx, r, lastnode(L, ctx, s), NK_KERNEL);
  e->kernel = kernel;
  memcpy(e->grid, grid, sizeof e->grid);
  memcpy(e->block, block, sizeof e->block);
  e->shared = shared;
  e->nargs = k.nparams;
  e->arg0 = r->nobjs;
  e->word0 = r->nwords;
  uint64_t *w = r->words + r->nwords;
  if (nw) memset(w, 0, nw * 8); /* no words yet: NULL */
  for (int i = 0; i < k.nparams; i++) {
    memcpy(w, k.argp[i], k.params[i].size);
    w += words(&k.params[i]);
    int t = k.params[i].type; /* a pointer slot's object passed its check */
    cg_obj *o = k.seen[i];
    r->objs[r->nobjs + (size_t)i] = (t == PTX_PTR || (t == PTX_PTR_OR_INT &&
      lua_type(L, kidx + 4 + i) == LUA_TUSERDATA &&
      lua_touserdata(L, kidx + 4 + i) == o)) ? o : NULL;
  }
  r->nobjs += (size_t)k.nparams;
  r->nwords += nw;
}

void cg_note_fill(lua_State *L, cg_ctx *ctx, CUstream s, cg_obj *dst,
                  size_t off, unsigned value, unsigned elem, size_t width,
                  size_t height, size_t pitch) {
  rec *e = newrec(L, ctx, recs_of(L, ctx), lastnode(L, ctx, s), NK_FILL);
  e->obj[0] = dst;
  e->off = off;
  e->value = value;
  e->elem = elem;
  e->width = width;
  e->height = height;
  e->pitch = pitch;
}

void cg_note_copy(lua_State *L, cg_ctx *ctx, CUstream s, cg_obj *dst,
                  cg_obj *src, size_t bytes, size_t doff, size_t soff) {
  rec *e = newrec(L, ctx, recs_of(L, ctx), lastnode(L, ctx, s), NK_COPY);
  e->obj[0] = dst;
  e->obj[1] = src;
  e->bytes = bytes;
  e->off = doff;
  e->soff = soff;
}

void cg_note_hostcopy(lua_State *L, cg_ctx *ctx, CUstream s, cg_obj *dev,
                      cg_obj *host) {
  rec *e = newrec(L, ctx, recs_of(L, ctx), lastnode(L, ctx, s), NK_HOSTCOPY);
  e->obj[0] = dev;
  e->obj[1] = host;
}

void cg_note_node(lua_State *L, cg_ctx *ctx, CUgraphNode node,
                  CUgraphNodeType type) {
  newrec(L, ctx, recs_of(L, ctx), node,
         type == CU_GRAPH_NODE_TYPE_GRAPH ? NK_GRAPH : NK_COND);
}

int cg_recs_launch(const cg_recs *r, const cg_obj *mod) {
  cg_kinfo k;
  for (size_t i = 0; r && i < r->n; i++)
    if (r->v[i].kind == NK_KERNEL) {
      cg_kernel_info(r->v[i].kernel, &k);
      if (k.module == mod) return 1;
    }
  return 0;
}

unsigned cg_recs_allocs(const cg_recs *r) {
  unsigned n = 0;
  for (size_t i = 0; r && i < r->n; i++)
    n += r->v[i].kind == NK_ALLOC && !r->v[i].freed;
  return n;
}

/* -- graph memory -------------------------------------------------------- */

static void need_async(lua_State *L) {
  if (!cg_drv.cuMemAllocAsync || !cg_drv.cuMemFreeAsync)
    luaL_error(L, "stream-ordered allocation needs CUDA 11.2 or later (the "
               "driver lacks cuMemAllocAsync)");
}

void cg_graph_allocs(lua_State *L, cg_graph *gr, int after) {
  const cg_recs *r = gr->recs;
  for (size_t i = 0; i < r->n; i++) {
    const rec *e = &r->v[i];
    if (e->kind != NK_ALLOC || e->freed) continue;
    cg_obj *b = e->obj[0];
    if (after && b->owned == CG_GRAPHMEM_GONE) b->owned = CG_GRAPHMEM_LIVE;
    else if (!after && !gr->auto_free && b->owned == CG_GRAPHMEM_LIVE)
      luaL_error(L, "cugraph.Graph #%d allocates a cugraph.Buffer that its "
                 "last launch left allocated: free it (b:free([stream])) "
                 "before launching again, or capture with auto_free = true",
                 (int)gr->id);
  }
}

int cg_buffer_async(lua_State *L, cg_type t, size_t n, int optidx) {
  if (lua_getfield(L, optidx, "stream") == LUA_TNIL) {
    lua_pop(L, 1);
    return 0;
  }
  int sidx = lua_gettop(L);
  cg_stream *s = cg_testobj(L, sidx, CG_STREAM);
  if (!s)
    luaL_argerror(L, optidx, "opts.stream must be a cugraph.Stream");
  cg_isopen(L, &s->h);
  cg_ctx *ctx = cg_context(L);
  if (s->h.ctx != ctx) cg_mixed(L, ctx, s->h.ctx, "cuda.buffer");
  need_async(L);
  if (ctx->capture && !cg_capturing_on(L, ctx, s->s))
    luaL_error(L, "cuda.buffer: the stream is not part of the capture; make "
               "it wait on the capture stream first");
  cg_pinobj(L, ctx, &s->h, sidx);
  cg_buffer *b = cg_newobj(L, ctx, sizeof *b, CG_BUFFER);
  b->type = t;
  b->n = n;
  cg_isopen(L, &s->h);
  CU(L, ctx, cuMemAllocAsync, &b->ptr, n * cg_type_size[t], s->s);
  b->h.open = 1;
  if (!ctx->capture) return 1;
  b->h.owned = CG_GRAPHMEM_GONE; /* live from the graph's launch on */
  cg_pinobj(L, ctx, &b->h, -1);
  rec *e = newrec(L, ctx, recs_of(L, ctx), lastnode(L, ctx, s->s), NK_ALLOC);
  e->obj[0] = &b->h;
  return 1;
}

int cg_buffer_free_async(lua_State *L, int sidx) {
  cg_buffer *b = cg_checkobj(L, 1, CG_BUFFER);
  cg_ctx *ctx = b->h.ctx;
  cg_stream *s = lua_isnoneornil(L, sidx) ? NULL
               : cg_checkobj(L, sidx, CG_STREAM);
  if (b->h.owned == CG_BORROWED) return cg_close(L, CG_BUFFER, 0);
  need_async(L);
  if (ctx->capture) {
    if (!s)
      luaL_error(L, "b:free() inside a graph capture: pass the capture "
                 "stream, b:free(s), for a free node");
    if (b->h.owned == CG_OWNED)
      luaL_error(L, "b:free(stream) inside a graph capture frees only memory "
                 "a graph allocates (cuda.buffer(type, n, {stream = s}) in "
                 "a capture); free other buffers outside captures");
    if (!cg_capturing_on(L, ctx, s->s))
      luaL_error(L, "b:free: the stream is not part of the capture; make it "
                 "wait on the capture stream first");
    cg_pinobj(L, ctx, &b->h, 1);
    cg_pinobj(L, ctx, &s->h, sidx);
    cg_recs *r = recs_of(L, ctx);
    CU(L, ctx, cuMemFreeAsync, b->ptr, s->s);
    rec *e = newrec(L, ctx, r, lastnode(L, ctx, s->s), NK_FREE);
    e->obj[0] = &b->h;
    for (size_t i = 0; i < r->n; i++)
      if (r->v[i].kind == NK_ALLOC && r->v[i].obj[0] == &b->h)
        r->v[i].freed = 1;
    b->h.owned = CG_BORROWED; /* the graph frees it: the object reads as */
    b->h.open = 0;            /* freed from here on */
    return 0;
  }
  if (b->h.owned == CG_GRAPHMEM_GONE)
    luaL_error(L, "cannot free cugraph.Buffer: a graph allocates it and it "
               "is not allocated now (it is from the graph's launch until "
               "freed)");
  if (b->h.owned == CG_OWNED) cg_canfree(L, &b->h);
  CUstream st = s ? s->s : ctx->stream;
  CU(L, ctx, cuMemFreeAsync, b->ptr, st);
  if (!s) CU(L, ctx, cuStreamSynchronize, st);
  if (b->h.owned == CG_GRAPHMEM_LIVE && b->h.uses) {
    b->h.owned = CG_GRAPHMEM_GONE; /* its graph allocates it again */
    return 0;
  }
  b->h.owned = CG_BORROWED;
  return cg_close(L, CG_BUFFER, 0);
}

/* cuda.memory() -> {free, total, used, graph = {...}, pool = {...}} */
static int memory(lua_State *L) {
  cg_ctx *ctx = cg_context(L);
  size_t fr = 0, total = 0;
  CU(L, ctx, cuMemGetInfo, &fr, &total);
  lua_createtable(L, 0, 5);
  lua_pushinteger(L, (lua_Integer)fr);
  lua_setfield(L, -2, "free");
  lua_pushinteger(L, (lua_Integer)total);
  lua_setfield(L, -2, "total");
  lua_pushinteger(L, (lua_Integer)(total - fr));
  lua_setfield(L, -2, "used");
  static const char *const names[] = { "used", "used_high", "reserved",
                                       "reserved_high" };
  if (cg_drv.cuDeviceGetGraphMemAttribute) {
    static const CUgraphMem_attribute attrs[] = {
      CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH,
      CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT,
      CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH
    };
    lua_createtable(L, 0, 4);
    for (int i = 0; i < 4; i++) {
      cuuint64_t v = 0;
      CU(L, ctx, cuDeviceGetGraphMemAttribute, ctx->dev, attrs[i], &v);
      lua_pushinteger(L, (lua_Integer)v);
      lua_setfield(L, -2, names[i]);
    }
    lua_setfield(L, -2, "graph");
  }
  if (cg_drv.cuDeviceGetDefaultMemPool && cg_drv.cuMemPoolGetAttribute) {
    static const CUmemPool_attribute attrs[] = {
      CU_MEMPOOL_ATTR_USED_MEM_CURRENT, CU_MEMPOOL_ATTR_USED_MEM_HIGH,
      CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH
    };
    CUmemoryPool pool;
    CU(L, ctx, cuDeviceGetDefaultMemPool, &pool, ctx->dev);
    lua_createtable(L, 0, 4);
    for (int i = 0; i < 4; i++) {
      cuuint64_t v = 0;
      CU(L, ctx, cuMemPoolGetAttribute, pool, attrs[i], &v);
      lua_pushinteger(L, (lua_Integer)v);
      lua_setfield(L, -2, names[i]);
    }
    lua_setfield(L, -2, "pool");
  }
  return 1;
}

/* cuda.trim([keep]): gives the device's graph memory and its default
   pool's unused memory (beyond keep bytes) back */
static int trim(lua_State *L) {
  lua_Integer keep = luaL_optinteger(L, 1, 0);
  luaL_argcheck(L, keep >= 0, 1, "keep must not be negative");
  cg_ctx *ctx = cg_context(L);
  cg_guard(L, ctx, "cuda.trim()", "trim after the capture ends");
  if (cg_drv.cuDeviceGraphMemTrim)
    CU(L, ctx, cuDeviceGraphMemTrim, ctx->dev);
  if (cg_drv.cuDeviceGetDefaultMemPool && cg_drv.cuMemPoolTrimTo) {
    CUmemoryPool pool;
    CU(L, ctx, cuDeviceGetDefaultMemPool, &pool, ctx->dev);
    CU(L, ctx, cuMemPoolTrimTo, pool, (size_t)keep);
  }
  return 0;
}

/* -- changing the instantiated graph ------------------------------------- */

/* o, or what the pairs (old[i] -> new[i]) replace it with */
static cg_obj *subst(cg_obj *o, cg_obj *const *olds, cg_obj *const *news,
                     int np) {
  for (int i = 0; o && i < np; i++)
    if (o == olds[i]) return news[i];
  return o;
}

/* Sets e's node in exec x (x NULL: in the graph) to its recorded values
   with the pairs substituted; argument bytes from argw when not NULL. */
static CUresult apply(cg_ctx *ctx, const cg_recs *r, const rec *e,
                      CUgraphExec x, cg_obj *const *olds,
                      cg_obj *const *news, int np, const uint64_t *argw,
                      const char **api) {
  if (e->kind == NK_KERNEL) {
    cg_kinfo k;
    cg_kernel_info(e->kernel, &k);
    void *argv[PTX_MAX_PARAMS];
    uint64_t ptrs[PTX_MAX_PARAMS];
    const uint64_t *w = argw ? argw : r->words + e->word0;
    for (int j = 0; j < e->nargs; j++) {
      cg_obj *o = r->objs[e->arg0 + (size_t)j];
      cg_obj *to = subst(o, olds, news, np);
      argv[j] = (void *)(uintptr_t)w;
      if (to != o) {
        ptrs[j] = ptrof(to);
        argv[j] = &ptrs[j];
      }
      w += words(&k.params[j]);
    }
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.func = k.f;
    p.gridDimX = e->grid[0];
    p.gridDimY = e->grid[1];
    p.gridDimZ = e->grid[2];
    p.blockDimX = e->block[0];
    p.blockDimY = e->block[1];
    p.blockDimZ = e->block[2];
    p.sharedMemBytes = e->shared;
    p.kernelParams = argv;
    if (!x) {
      *api = "cuGraphKernelNodeSetParams";
      return cg_drv.cuGraphKernelNodeSetParams(e->node, &p);
    }
    *api = "cuGraphExecKernelNodeSetParams";
    return cg_drv.cuGraphExecKernelNodeSetParams(x, e->node, &p);
  }
  if (e->kind == NK_FILL) {
    CUDA_MEMSET_NODE_PARAMS m;
    memset(&m, 0, sizeof m);
    m.dst = ptrof(subst(e->obj[0], olds, news, np)) + e->off;
    m.pitch = e->pitch;
    m.value = e->value;
    m.elementSize = e->elem;
    m.width = e->width;
    m.height = e->height;
    *api = x ? "cuGraphExecMemsetNodeSetParams"
             : "cuGraphMemsetNodeSetParams";
    if (!x && !cg_drv.cuGraphMemsetNodeSetParams)
      return CUDA_ERROR_NOT_SUPPORTED;
    return x ? cg_drv.cuGraphExecMemsetNodeSetParams(x, e->node, &m, ctx->cu)
             : cg_drv.cuGraphMemsetNodeSetParams(e->node, &m);
  }
  CUDA_MEMCPY3D c;
  memset(&c, 0, sizeof c);
  c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = ptrof(subst(e->obj[1], olds, news, np)) + e->soff;
  c.dstDevice = ptrof(subst(e->obj[0], olds, news, np)) + e->off;
  c.WidthInBytes = e->bytes;
  c.Height = c.Depth = 1;
  *api = x ? "cuGraphExecMemcpyNodeSetParams" : "cuGraphMemcpyNodeSetParams";
  if (!x && !cg_drv.cuGraphMemcpyNodeSetParams)
    return CUDA_ERROR_NOT_SUPPORTED;
  return x ? cg_drv.cuGraphExecMemcpyNodeSetParams(x, e->node, &c, ctx->cu)
           : cg_drv.cuGraphMemcpyNodeSetParams(e->node, &c);
}

CUresult cg_graph_follow(cg_graph *gr, const char **api) {
  cg_recs *r = gr->recs;
  for (size_t i = 0; r && i < r->n; i++) {
    rec *e = &r->v[i];
    if (!e->dirty) continue;
    CUresult res = apply(gr->h.ctx, r, e, NULL, NULL, NULL, 0, NULL, api);
    if (res != CUDA_SUCCESS) return res;
    e->dirty = 0;
  }
  return CUDA_SUCCESS;
}

void cg_graph_sync(lua_State *L, cg_graph *gr) {
  const char *api = NULL;
  CUresult res = cg_graph_follow(gr, &api);
  if (res != CUDA_SUCCESS) cg_check(L, gr->h.ctx, api, res);
}

/* The graph of the node at 1 (pushed), open, and the node's record. */
static rec *noderec(lua_State *L, cg_graph **pgr) {
  cg_node *n = cg_checkobj(L, 1, CG_NODE);
  lua_getiuservalue(L, 1, 1);
  cg_graph *gr = cg_checkobj(L, -1, CG_GRAPH);
  if (!gr->recs || n->index >= gr->recs->n)
    luaL_error(L, "cugraph.Node #%d no longer belongs to cugraph.Graph #%d",
               (int)n->index + 1, (int)gr->id);
  *pgr = gr;
  return &gr->recs->v[n->index];
}

/* Raises unless record i of gr can change in place. */
static void changeable(lua_State *L, cg_graph *gr, const rec *e, size_t i) {
  int id = (int)gr->id, at = (int)i + 1;
  if (gr->h.ctx->capture)
    luaL_error(L, "cugraph.Graph #%d: nodes change outside captures", id);
  if (gr->updated)
    luaL_error(L, "cugraph.Graph #%d was updated with g:update(), and the "
               "instantiated graph knows only the nodes of its first "
               "capture: capture a new graph to rebind", id);
  if (e->kind != NK_KERNEL && e->kind != NK_FILL && e->kind != NK_COPY)
    luaL_error(L, "cugraph.Graph #%d: node %d (%s) cannot change in place",
               id, at, nk_names[e->kind]);
  if (e->depth)
    luaL_error(L, "cugraph.Graph #%d: node %d is in the body of a "
               "conditional node, which the driver does not change in place: "
               "capture a new graph", id, at);
  if (!e->node)
    luaL_error(L, "cugraph.Graph #%d: the driver did not say which node %d "
               "is (it needs cuStreamGetCaptureInfo_v3, CUDA 12.3)", id, at);
  if (e->kind == NK_FILL && e->height > 1)
    luaL_error(L, "cugraph.Graph #%d: node %d fills 8-byte elements with 2D "
               "memsets, which the driver does not change in place", id, at);
  if ((e->kind == NK_KERNEL && !cg_drv.cuGraphExecKernelNodeSetParams) ||
      (e->kind == NK_FILL && !cg_drv.cuGraphExecMemsetNodeSetParams) ||
      (e->kind == NK_COPY && !cg_drv.cuGraphExecMemcpyNodeSetParams))
    luaL_error(L, "changing nodes in place needs CUDA 12.0 or later (the "
               "driver lacks cuGraphExecKernelNodeSetParams_v2)");
}

static int uses(const cg_recs *r, const rec *e, const cg_obj *o) {
  if (e->kind == NK_KERNEL) {
    for (int j = 0; j < e->nargs; j++)
      if (r->objs[e->arg0 + (size_t)j] == o) return 1;
    return 0;
  }
  return e->obj[0] == o || e->obj[1] == o;
}

static int used(const cg_recs *r, const cg_obj *o) {
  for (size_t i = 0; i < r->n; i++)
    if (uses(r, &r->v[i], o)) return 1;
  return 0;
}

/* Pins the object at oidx in the graph's set at pidx, unless there. */
static void pin(lua_State *L, cg_graph *gr, int pidx, int oidx) {
  cg_obj *o = lua_touserdata(L, oidx);
  lua_pushvalue(L, oidx);
  if (lua_rawget(L, pidx) == LUA_TNIL) {
    if (o->uses++ == 0) o->graph = gr->id; /* before the set grows */
    lua_pushvalue(L, oidx);
    lua_pushboolean(L, 1);
    lua_rawset(L, pidx);
  }
  lua_pop(L, 1);
}

/* Unpins the object at oidx from the set at pidx. */
static void unpin(lua_State *L, cg_graph *gr, int pidx, int oidx) {
  cg_obj *o = lua_touserdata(L, oidx);
  lua_pushvalue(L, oidx);
  if (lua_rawget(L, pidx) != LUA_TNIL) {
    lua_pushvalue(L, oidx);
    lua_pushnil(L);
    lua_rawset(L, pidx);
    if (o->uses) o->uses--;
    if (!o->uses || o->graph == gr->id) o->graph = 0;
    if (!o->uses) cg_unpinned(L, o);
  }
  lua_pop(L, 1);
}

#define MAXPAIRS 16

/* g:rebind(old, new [, old2, new2, ...]): every node that uses an old
   buffer or scalar uses its new one, all pairs at once (a swap is
   g:rebind(a, b, b, a)); each new has the old's type and count. */
static int graph_rebind(lua_State *L) {
  cg_graph *gr = cg_checkself(L, CG_GRAPH);
  cg_ctx *ctx = gr->h.ctx;
  int top = lua_gettop(L), np = (top - 1) / 2, scalars = 0;
  if (top < 3 || (top - 1) % 2 || np > MAXPAIRS)
    return luaL_error(L, "g:rebind(old, new [, old2, new2, ...]): 1 to %d "
                      "pairs of buffers or scalars", MAXPAIRS);
  cg_obj *olds[MAXPAIRS], *news[MAXPAIRS];
  for (int i = 0; i < np; i++) {
    int at = 2 + 2 * i;
    cg_obj *o = bufobj(L, ctx, at), *n = bufobj(L, ctx, at + 1);
    if (!o || !n)
      luaL_typeerror(L, o ? at + 1 : at, "cugraph.Buffer or cugraph.Scalar");
    cg_isopen(L, n);
    size_t on = o->kind == CG_SCALAR ? 1 : ((cg_buffer *)o)->n;
    size_t nn = n->kind == CG_SCALAR ? 1 : ((cg_buffer *)n)->n;
    int ot = o->kind == CG_SCALAR ? (int)((cg_scalar *)o)->type
                                  : (int)((cg_buffer *)o)->type;
    int nt = n->kind == CG_SCALAR ? (int)((cg_scalar *)n)->type
                                  : (int)((cg_buffer *)n)->type;
    if (o->kind != n->kind || ot != nt || on != nn)
      luaL_error(L, "g:rebind: %s of %s[%I] cannot replace %s of %s[%I]: the "
                 "kind, element type and count must match",
                 cg_kind_names[n->kind], cg_type_names[nt], (LUAI_UACINT)nn,
                 cg_kind_names[o->kind], cg_type_names[ot], (LUAI_UACINT)on);
    olds[i] = o;
    news[i] = n;
    scalars |= o->kind == CG_SCALAR;
  }
  cg_recs *r = gr->recs;
  size_t n = r ? r->n : 0;
  for (int i = 0; i < np; i++) {
    int hit = 0;
    for (size_t j = 0; j < n; j++)
      if (uses(r, &r->v[j], olds[i])) {
        changeable(L, gr, &r->v[j], j);
        hit = 1;
      }
    if (!hit)
      luaL_error(L, "g:rebind: argument %d is not used by any node that "
                 "cugraph.Graph #%d recorded", 2 + 2 * i, (int)gr->id);
  }
  const char *api = NULL;
  CUresult res = CUDA_SUCCESS;
  size_t done = 0;
  for (; done < n && res == CUDA_SUCCESS; done++) {
    const rec *e = &r->v[done];
    int hit = 0;
    for (int i = 0; i < np && !hit; i++) hit = uses(r, e, olds[i]);
    if (hit) res = apply(ctx, r, e, gr->exec, olds, news, np, NULL, &api);
  }
  if (res != CUDA_SUCCESS) { /* the nodes changed so far change back */
    const char *ignored;
    for (size_t j = 0; j + 1 < done; j++)
      for (int i = 0; i < np; i++)
        if (uses(r, &r->v[j], olds[i])) {
          apply(ctx, r, &r->v[j], gr->exec, NULL, NULL, 0, NULL, &ignored);
          break;
        }
    cg_check(L, ctx, api, res);
  }
  for (size_t j = 0; j < n; j++) { /* the records follow */
    rec *e = &r->v[j];
    int hit = 0;
    for (int i = 0; i < np && !hit; i++) hit = uses(r, e, olds[i]);
    if (!hit) continue;
    e->dirty = 1;
    if (e->kind != NK_KERNEL) {
      e->obj[0] = subst(e->obj[0], olds, news, np);
      e->obj[1] = subst(e->obj[1], olds, news, np);
      continue;
    }
    cg_kinfo k;
    cg_kernel_info(e->kernel, &k);
    uint64_t *w = r->words + e->word0;
    for (int a = 0; a < e->nargs; a++) {
      cg_obj **o = &r->objs[e->arg0 + (size_t)a];
      cg_obj *to = subst(*o, olds, news, np);
      if (to != *o) {
        CUdeviceptr p = ptrof(to);
        memcpy(w, &p, 8);
        *o = to;
      }
      w += words(&k.params[a]);
    }
  }
  if (r) r->busy++;
  lua_getiuservalue(L, 1, 1); /* the pins: the news in, the olds unused out */
  int pidx = lua_gettop(L);
  for (int i = 0; i < np; i++) pin(L, gr, pidx, 3 + 2 * i);
  for (int i = 0; i < np; i++)
    if (!used(r, olds[i])) unpin(L, gr, pidx, 2 + 2 * i);
  if (scalars) cg_graph_rescan(L, gr, 1);
  if (r) r->busy--;
  lua_settop(L, 1);
  return 1;
}

/* -- nodes ---------------------------------------------------------------- */

/* g:node(i | label) -> Node: record i (1-based, in the order the capture
   made them), or the first made under s:label(label, fn) */
static int graph_node(lua_State *L) {
  cg_graph *gr = cg_checkobj(L, 1, CG_GRAPH);
  cg_recs *r = gr->recs;
  size_t n = r ? r->n : 0, i = 0;
  if (lua_type(L, 2) == LUA_TSTRING) {
    const char *name = lua_tostring(L, 2);
    while (i < n && (!r->v[i].label || strcmp(text(r, r->v[i].label), name)))
      i++;
    if (i == n)
      return luaL_error(L, "cugraph.Graph #%d has no node labelled '%s'",
                        (int)gr->id, name);
  } else {
    lua_Integer v = luaL_checkinteger(L, 2);
    if (v < 1 || (size_t)v > n)
      return luaL_argerror(L, 2, lua_pushfstring(L, "node %I out of range: "
                           "the graph recorded %I", (LUAI_UACINT)v,
                           (LUAI_UACINT)n));
    i = (size_t)v - 1;
  }
  cg_node *node = cg_newobj(L, gr->h.ctx, sizeof *node, CG_NODE);
  node->index = i;
  node->h.open = 1;
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  return 1;
}

/* Pushes a table from pointers to the pinned objects (set at pidx). */
static void pushobjects(lua_State *L, int pidx) {
  lua_newtable(L);
  lua_pushnil(L);
  while (lua_next(L, pidx)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) == LUA_TUSERDATA) {
      lua_pushvalue(L, -1);
      lua_rawsetp(L, -3, lua_touserdata(L, -1));
    }
  }
}

static void pushobj(lua_State *L, int map, const cg_obj *o) {
  if (lua_rawgetp(L, map, o) == LUA_TNIL) {
    lua_pop(L, 1);
    lua_pushboolean(L, 0);
  }
}

/* An argument's value from its bytes, as the signature types it. */
static void pusharg(lua_State *L, const ptx_param *p, const uint64_t *w) {
  if (p->type <= PTX_U64) {
    cg_pushbits(L, (cg_type)p->type, w);
  } else if (p->type == PTX_BYTES) {
    lua_pushlstring(L, (const char *)w, p->size);
  } else {
    lua_Integer v = 0;
    memcpy(&v, w, p->size < 8 ? p->size : 8);
    lua_pushinteger(L, v);
  }
}

/* Pushes record i of gr as a table; map: pointers to objects. */
static void pushrec(lua_State *L, cg_graph *gr, size_t i, int map) {
  cg_recs *r = gr->recs;
  const rec *e = &r->v[i];
  r->busy++; /* the strings and tables below may run finalizers */
  lua_createtable(L, 0, 10);
  lua_pushinteger(L, (lua_Integer)i + 1);
  lua_setfield(L, -2, "index");
  lua_pushstring(L, nk_names[e->kind]);
  lua_setfield(L, -2, "kind");
  if (e->src) {
    lua_pushstring(L, text(r, e->src));
    lua_setfield(L, -2, "source");
    lua_pushinteger(L, e->line);
    lua_setfield(L, -2, "line");
  }
  if (e->label) {
    lua_pushstring(L, text(r, e->label));
    lua_setfield(L, -2, "label");
  }
  lua_pushinteger(L, e->depth);
  lua_setfield(L, -2, "depth");
  lua_pushboolean(L, e->enabled);
  lua_setfield(L, -2, "enabled");
  if (e->kind == NK_KERNEL) {
    cg_kinfo k;
    cg_kernel_info(e->kernel, &k);
    pushobj(L, map, e->kernel);
    lua_setfield(L, -2, "kernel");
    lua_pushstring(L, k.name);
    lua_setfield(L, -2, "name");
    lua_createtable(L, e->nargs, 0);
    const uint64_t *w = r->words + e->word0;
    for (int j = 0; j < e->nargs; j++) {
      const cg_obj *o = r->objs[e->arg0 + (size_t)j];
      if (o) pushobj(L, map, o);
      else pusharg(L, &k.params[j], w);
      lua_rawseti(L, -2, j + 1);
      w += words(&k.params[j]);
    }
    lua_setfield(L, -2, "args");
  } else if (e->obj[0]) {
    pushobj(L, map, e->obj[0]);
    lua_setfield(L, -2, e->kind == NK_COPY ? "dst" : "buffer");
    if (e->obj[1]) {
      pushobj(L, map, e->obj[1]);
      lua_setfield(L, -2, "src");
    }
  }
  r->busy--;
}

int cg_nodes_detail(lua_State *L, cg_graph *gr) {
  lua_settop(L, 1);
  lua_getiuservalue(L, 1, 1);
  pushobjects(L, 2); /* 3 */
  lua_newtable(L);   /* 4 */
  cg_isopen(L, &gr->h); /* the allocations may have run a finalizer */
  cg_recs *r = gr->recs;
  size_t n = r ? r->n : 0;
  if (r) r->busy++;
  for (size_t i = 0; i < n; i++) {
    pushrec(L, gr, i, 3);
    lua_rawseti(L, 4, (lua_Integer)i + 1);
  }
  if (r) r->busy--;
  lua_pushinteger(L, (lua_Integer)n);
  lua_insert(L, 4);
  return 2;
}

/* node:info() -> the table g:nodes("detail") gives for it */
static int node_info(lua_State *L) {
  cg_graph *gr;
  noderec(L, &gr); /* 2: the graph */
  lua_settop(L, 2);
  lua_getiuservalue(L, 2, 1);
  pushobjects(L, 3); /* 4 */
  noderec(L, &gr); /* again: the allocations may have run a finalizer */
  pushrec(L, gr, ((cg_node *)lua_touserdata(L, 1))->index, 4);
  return 1;
}

/* node:set(args...): the kernel node's arguments, checked as k:launch
   checks them, in the instantiated graph */
static int node_set(lua_State *L) {
  int nargs = lua_gettop(L) - 1;
  cg_graph *gr;
  rec *e = noderec(L, &gr);
  size_t index = ((cg_node *)lua_touserdata(L, 1))->index;
  int gidx = lua_gettop(L), argc = nargs;
  cg_recs *r = gr->recs;
  changeable(L, gr, e, index);
  if (e->kind != NK_KERNEL)
    return luaL_error(L, "node:set(): node %d is a %s node; rebind its "
                      "buffers with g:rebind", (int)index + 1,
                      nk_names[e->kind]);
  lua_getiuservalue(L, gidx, 1);
  int pidx = lua_gettop(L);
  pushobjects(L, pidx);
  int map = lua_gettop(L);
  pushobj(L, map, e->kernel); /* the kernel, pinned by the graph */
  int kidx = lua_gettop(L);
  cg_kernel_args(L, kidx, 2, argc);
  cg_isopen(L, &gr->h); /* a finalizer may have freed or updated the graph */
  r = gr->recs;
  e = &r->v[index];
  cg_kinfo k;
  cg_kernel_info(e->kernel, &k);
  uint64_t argw[PTX_MAX_PARAMS * 4];
  size_t nw = 0;
  for (int j = 0; j < k.nparams; j++) nw += words(&k.params[j]);
  if (nw > sizeof argw / 8)
    return luaL_error(L, "node:set(): %s takes too many argument bytes",
                      k.name);
  memset(argw, 0, nw * 8);
  uint64_t *w = argw;
  for (int j = 0; j < k.nparams; j++) {
    memcpy(w, k.argp[j], k.params[j].size);
    w += words(&k.params[j]);
  }
  const char *api;
  CUresult res = apply(gr->h.ctx, r, e, gr->exec, NULL, NULL, 0, argw, &api);
  if (res != CUDA_SUCCESS) cg_check(L, gr->h.ctx, api, res);
  cg_obj *was[PTX_MAX_PARAMS];
  int scalars = 0;
  for (int j = 0; j < k.nparams; j++) {
    cg_obj *o = bufobj(L, gr->h.ctx, 2 + j);
    was[j] = r->objs[e->arg0 + (size_t)j];
    r->objs[e->arg0 + (size_t)j] = o;
    scalars |= (o && o->kind == CG_SCALAR) || (was[j] &&
                was[j]->kind == CG_SCALAR);
  }
  memcpy(r->words + e->word0, argw, nw * 8);
  e->dirty = 1;
  r->busy++;
  for (int j = 0; j < k.nparams; j++)
    if (r->objs[e->arg0 + (size_t)j]) pin(L, gr, pidx, 2 + j);
  for (int j = 0; j < k.nparams; j++)
    if (was[j] && !used(r, was[j])) {
      pushobj(L, map, was[j]);
      if (lua_type(L, -1) == LUA_TUSERDATA) unpin(L, gr, pidx, -1);
      lua_pop(L, 1);
    }
  if (scalars) cg_graph_rescan(L, gr, gidx);
  r->busy--;
  lua_settop(L, 1);
  return 1;
}

/* node:enable(on): whether launches of the graph run the node */
static int node_enable(lua_State *L) {
  cg_graph *gr;
  rec *e = noderec(L, &gr);
  luaL_checktype(L, 2, LUA_TBOOLEAN);
  int on = lua_toboolean(L, 2);
  changeable(L, gr, e, ((cg_node *)lua_touserdata(L, 1))->index);
  if (!cg_drv.cuGraphNodeSetEnabled)
    return luaL_error(L, "node:enable() needs CUDA 11.6 or later (the driver "
                      "lacks cuGraphNodeSetEnabled)");
  CU(L, gr->h.ctx, cuGraphNodeSetEnabled, gr->exec, e->node, (unsigned)on);
  e->enabled = (unsigned char)on;
  lua_settop(L, 1);
  return 1;
}

static int node_enabled(lua_State *L) {
  cg_graph *gr;
  lua_pushboolean(L, noderec(L, &gr)->enabled);
  return 1;
}

/* node:handle(): the CUgraphNode of the graph the exec was made from, as an
   integer, for foreign code; valid while the graph lives */
static int node_handle(lua_State *L) {
  cg_graph *gr;
  lua_pushinteger(L, (lua_Integer)(intptr_t)noderec(L, &gr)->node);
  return 1;
}

static int node_index(lua_State *L) {
  cg_node *n = cg_checkobj(L, 1, CG_NODE);
  lua_pushinteger(L, (lua_Integer)n->index + 1);
  return 1;
}

static int node_free(lua_State *L) {
  ((cg_obj *)cg_toobj(L, 1, CG_NODE))->open = 0;
  return 0;
}

static int node_tostring(lua_State *L) {
  cg_node *n = cg_toobj(L, 1, CG_NODE);
  if (!n->h.open) return cg_tostring(L, &n->h, "");
  lua_getiuservalue(L, 1, 1);
  cg_graph *gr = cg_toobj(L, -1, CG_GRAPH);
  if (!gr->h.open || !gr->recs || n->index >= gr->recs->n)
    return cg_tostring(L, &n->h, " %d", (int)n->index + 1);
  cg_recs *r = gr->recs;
  const rec *e = &r->v[n->index];
  const char *what = nk_names[e->kind];
  r->busy++; /* the strings below may run finalizers */
  if (e->kind == NK_KERNEL) {
    cg_kinfo k;
    cg_kernel_info(e->kernel, &k);
    what = lua_pushfstring(L, "kernel %s", k.name);
  }
  cg_tostring(L, &n->h, " %d of cugraph.Graph #%d (%s%s%s:%d)",
              (int)n->index + 1, (int)gr->id, what, e->src ? " at " : "",
              e->src ? text(r, e->src) : "", e->line);
  r->busy--;
  return 1;
}

/* s:label(name, fn) -> fn(s)'s results: the nodes fn makes are labelled
   name (g:node(name) finds the first) */
static int stream_label(lua_State *L) {
  cg_stream *s = cg_checkobj(L, 1, CG_STREAM);
  const char *name = luaL_checkstring(L, 2);
  luaL_checktype(L, 3, LUA_TFUNCTION);
  cg_ctx *ctx = s->h.ctx;
  if (!ctx->capture)
    return luaL_error(L, "s:label() outside a capture: labels name the "
                      "nodes that a capture makes");
  cg_recs *r = recs_of(L, ctx);
  size_t saved = r->label;
  r->label = addtext(L, r, name);
  lua_settop(L, 3);
  lua_pushcfunction(L, cg_traceback);
  lua_pushvalue(L, 3);
  lua_pushvalue(L, 1);
  int status = lua_pcall(L, 1, LUA_MULTRET, 4);
  r->label = saved; /* the capture, still on, keeps r */
  if (status != LUA_OK) return lua_error(L);
  return lua_gettop(L) - 4;
}

/* -- dot ----------------------------------------------------------------- */

/* Text gathered as strings in a table (at t), joined at the end: the stack
   stays free for the driver's node arrays. */
typedef struct dotbuf { lua_State *L; int t; lua_Integer n; } dotbuf;

static void add(dotbuf *d, const char *s) {
  lua_pushstring(d->L, s);
  lua_rawseti(d->L, d->t, ++d->n);
}

static void addf(dotbuf *d, const char *fmt, size_t a, size_t b) {
  char line[80];
  snprintf(line, sizeof line, fmt, a, b);
  add(d, line);
}

/* A label's text: quotes and backslashes become apostrophes. */
static void addlabel(dotbuf *d, const char *s) {
  luaL_gsub(d->L, s, "\"", "'");
  luaL_gsub(d->L, lua_tostring(d->L, -1), "\\", "'");
  lua_rawseti(d->L, d->t, ++d->n);
  lua_pop(d->L, 1);
}

static const char *const types[] = {
  "kernel", "memcpy", "memset", "host", "graph", "empty", "wait_event",
  "event_record", "ext_semas_signal", "ext_semas_wait", "mem_alloc",
  "mem_free", "batch_mem_op", "conditional"
};

/* Adds the nodes and edges of g, numbered from *id on, labelled from the
   records; the bodies of conditional nodes as clusters, from what the
   capture noted in the pins (at pidx). */
static void dotgraph(dotbuf *d, cg_graph *gr, CUgraph g, int pidx,
                     size_t *id) {
  lua_State *L = d->L;
  cg_ctx *ctx = gr->h.ctx;
  size_t n = 0, ne = 0;
  CU(L, ctx, cuGraphGetNodes, g, NULL, &n);
  CU(L, ctx, cuGraphGetEdges, g, NULL, NULL, NULL, &ne);
  CUgraphNode *v = lua_newuserdatauv(L, (n + 2 * ne + 1) * sizeof *v, 0);
  cg_isopen(L, &gr->h);
  CU(L, ctx, cuGraphGetNodes, g, v, &n);
  if (ne) /* the driver refuses arrays for no edges */
    CU(L, ctx, cuGraphGetEdges, g, v + n, v + n + ne, NULL, &ne);
  size_t base = *id;
  *id += n;
  const cg_recs *r = gr->recs;
  for (size_t i = 0; i < n; i++) {
    const rec *e = NULL;
    for (size_t j = 0; j < r->n && !e; j++)
      if (r->v[j].node == v[i]) e = &r->v[j];
    CUgraphNodeType t;
    CU(L, ctx, cuGraphNodeGetType, v[i], &t);
    lua_pushfstring(L, "  n%I [label=\"%s", (LUAI_UACINT)(base + i),
                    (size_t)t < sizeof types / sizeof *types ? types[t]
                                                           : "node");
    lua_rawseti(L, d->t, ++d->n);
    if (e && e->kind == NK_KERNEL) {
      cg_kinfo k;
      cg_kernel_info(e->kernel, &k);
      add(d, " ");
      addlabel(d, k.name);
    }
    if (e && e->label) {
      add(d, " [");
      addlabel(d, text(r, e->label));
      add(d, "]");
    }
    if (e && e->src) {
      add(d, "\\n");
      addlabel(d, text(r, e->src));
      addf(d, ":%zu", (size_t)e->line, 0);
    }
    add(d, "\"];\n");
    if (t != CU_GRAPH_NODE_TYPE_CONDITIONAL) continue;
    if (lua_rawgetp(L, pidx, v[i]) == LUA_TTABLE) {
      for (int j = 1; lua_rawgeti(L, -1, j) == LUA_TLIGHTUSERDATA; j++) {
        CUgraph body = lua_touserdata(L, -1);
        lua_pop(L, 1);
        size_t first = *id;
        addf(d, "  subgraph cluster_%zu_%zu {\n", base + i, (size_t)j);
        addf(d, "  label=\"body %zu\";\n", (size_t)j, 0);
        dotgraph(d, gr, body, pidx, id);
        add(d, "  }\n");
        if (*id > first)
          addf(d, "  n%zu -> n%zu [style=dashed];\n", base + i, first);
      }
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  for (size_t i = 0; i < ne; i++) {
    size_t from = n, to = n;
    for (size_t j = 0; j < n; j++) {
      if (v[j] == v[n + i]) from = j;
      if (v[j] == v[n + ne + i]) to = j;
    }
    if (from < n && to < n) addf(d, "  n%zu -> n%zu;\n", base + from,
                                 base + to);
  }
  lua_pop(L, 1); /* the node arrays */
}

int cg_dot(lua_State *L, cg_graph *gr) {
  if (!gr->recs || !cg_drv.cuGraphGetEdges) return 0;
  const char *path = luaL_checkstring(L, 2);
  lua_settop(L, 2);
  lua_getiuservalue(L, 1, 1); /* 3: the pins */
  lua_newtable(L);            /* 4: the text */
  dotbuf d = { L, 4, 0 };
  size_t id = 0;
  add(&d, "digraph cugraph {\n  node [shape=box];\n");
  cg_isopen(L, &gr->h);
  cg_recs *r = gr->recs; /* held by dotgraph across allocations */
  if (r) r->busy++;
  dotgraph(&d, gr, gr->g, 3, &id);
  if (r) r->busy--;
  add(&d, "}\n");
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (lua_Integer i = 1; i <= d.n; i++) {
    lua_rawgeti(L, 4, i);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  size_t len;
  const char *s = lua_tolstring(L, -1, &len);
  FILE *f = fopen(path, "w");
  if (!f)
    return luaL_error(L, "g:dot: cannot open %s: %s", path, strerror(errno));
  int bad = fwrite(s, 1, len, f) != len;
  bad |= fclose(f) != 0;
  if (bad) return luaL_error(L, "g:dot: cannot write %s", path);
  lua_settop(L, 1);
  return 1;
}

void node_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"set", node_set}, {"enable", node_enable}, {"enabled", node_enabled},
    {"info", node_info}, {"index", node_index}, {"handle", node_handle},
    {"free", node_free},
    {"close", node_free}, {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", node_free}, {"__close", node_free},
    {"__tostring", node_tostring}, {NULL, NULL}
  };
  cg_newtype(L, CG_NODE, methods, meta, NULL);
  lua_pushcfunction(L, memory);
  lua_setfield(L, -2, "memory");
  lua_pushcfunction(L, trim);
  lua_setfield(L, -2, "trim");
  luaL_getmetatable(L, cg_kind_names[CG_GRAPH]);
  lua_getfield(L, -1, "methods");
  luaL_getmetatable(L, cg_kind_names[CG_GRAPH]);
  lua_pushcclosure(L, graph_rebind, 1); /* cg_checkself's upvalue */
  lua_setfield(L, -2, "rebind");
  lua_pushcfunction(L, graph_node);
  lua_setfield(L, -2, "node");
  lua_pop(L, 2);
  luaL_getmetatable(L, cg_kind_names[CG_STREAM]);
  lua_getfield(L, -1, "methods");
  lua_pushcfunction(L, stream_label);
  lua_setfield(L, -2, "label");
  lua_pop(L, 2);
}
