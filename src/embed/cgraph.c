/* Graphs and scalars owned by C (src/cugraph.h): handles an engine launches
   from any thread with no Lua call. A C graph holds a share (base/release.c)
   of the handle of every object its Lua graph pins that a launch reads, so
   they outlive their Lua objects and lua_close. Every C graph retains the
   primary context, which so stays alive while any lives. A C graph's exec
   and refs change only under its lock. Lock order: a module's share, then a
   C graph, then a scalar's share. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "embed/embed.h"
#include "cugraph.h"

struct cugraph_graph {
  pthread_mutex_t lock; /* launches, reloads and refs */
  unsigned refs;
  CUdevice dev;
  CUcontext cu;
  int retained;         /* the primary context is held */
  CUgraph g;            /* a copy of the Lua graph's that reload edits;
                           NULL for a graph with conditional nodes */
  unsigned conds;       /* its conditional nodes */
  CUgraphExec exec;
  cg_share *shared;     /* with conditional nodes: exec is the Lua graph's,
                           shared (the driver instantiates such a graph
                           once at a time and copies none of them) */
  size_t npins, nscalars;
  cg_share **pins;      /* the scalars first */
  cg_keep *keep;        /* the memory among them, which the driver holds
                           until g's last launch is over (cg_keep_*) */
  int launched;         /* since made: a launch may be in flight */
  int nvalnodes;
  cg_valnode *valnodes;   /* value: a scalar's share among pins */
};

/* Writes a value C set on stream s, before a launch that reads it. */
static CUresult scalar_flush(cg_share *sc, CUstream s) {
  CUresult r = CUDA_SUCCESS;
  const char *api;
  pthread_mutex_lock(&sc->lock);
  if (sc->pending) {
    r = cg_memset_value(sc->h.mem, sc->bits, cg_type_size[sc->type], s, &api);
    if (r == CUDA_SUCCESS) sc->pending = 0;
  }
  pthread_mutex_unlock(&sc->lock);
  return r;
}

/* The share of o with one more reference; a scalar's starts from the
   script's value, which flush_scalar wrote (C then sets its own), when C
   takes it first (a graph's keep may have made the share before). */
static cg_share *share_of(cg_obj *o) {
  cg_share *sh = cg_share_of(o);
  if (sh && o->kind == CG_SCALAR) {
    const cg_scalar *sc = (const cg_scalar *)o;
    pthread_mutex_lock(&sh->lock);
    if (!sh->seeded) {
      sh->bits = sc->bits;
      sh->pending = sc->pending;
      sh->type = sc->type;
      sh->seeded = 1;
    }
    pthread_mutex_unlock(&sh->lock);
  }
  return sh;
}

/* Writes the script's pending value of sc before C may set its own: left
   pending, the script's next flush (a launch, sc:get()) would write that
   older value over what C launches wrote. 1 when it wrote. */
static int flush_scalar(lua_State *L, cg_scalar *sc) {
  if (!sc->pending || (sc->h.share && sc->h.share->seeded)) return 0;
  cg_scalar_flush(L, sc, sc->h.ctx->stream);
  return 1;
}

/* -- C graphs ------------------------------------------------------------- */

static void remove_user(cg_share *m, cugraph_graph *h) {
  pthread_mutex_lock(&m->lock);
  for (size_t i = 0; i < m->nusers; i++)
    if (m->users[i] == h) {
      m->users[i] = m->users[--m->nusers];
      break;
    }
  pthread_mutex_unlock(&m->lock);
}

static int add_user(cg_share *m, cugraph_graph *h) {
  int ok = 1;
  pthread_mutex_lock(&m->lock);
  if (m->nusers == m->cusers) {
    size_t c = m->cusers ? 2 * m->cusers : 4;
    void **u = realloc(m->users, c * sizeof *u);
    if (u) {
      m->users = u;
      m->cusers = c;
    }
    ok = u != NULL;
  }
  if (ok) m->users[m->nusers++] = h;
  pthread_mutex_unlock(&m->lock);
  return ok;
}

/* Frees a C graph, whole or partly made; its reload entries go first.
   The memory it used goes once its last launch is over (its keep). */
static void graph_destroy(cugraph_graph *h) {
  for (size_t i = 0; i < h->npins; i++)
    if (h->pins[i]->hk == CG_H_MODULE) remove_user(h->pins[i], h);
  if (h->keep) cg_keep_leave(h->keep, !h->launched);
  if (cg_make_current(h->cu) == CUDA_SUCCESS) {
    if (h->exec && !h->shared)
      cg_destroy(CG_H_EXEC, (cg_handle){ .exec = h->exec });
    if (h->g) cg_destroy(CG_H_GRAPH, (cg_handle){ .graph = h->g });
  }
  cg_share_drop(h->shared);
  for (size_t i = 0; i < h->npins; i++) cg_share_drop(h->pins[i]);
  if (h->retained) cg_destroy(CG_H_PRIMARY, (cg_handle){ .dev = h->dev });
  pthread_mutex_destroy(&h->lock);
  free(h->pins);
  free(h->valnodes);
  free(h);
}

/* The Lua graph's semaphore nodes set from scalars, as nodes of h's exec
   (its copy's, found in the clone) and the scalars' shares. */
static CUresult copy_valnodes(cugraph_graph *h, const cg_graph *gr,
                             const char **api) {
  if (!gr->nvalnodes) return CUDA_SUCCESS;
  *api = "cugraph_tograph";
  h->valnodes = malloc((size_t)gr->nvalnodes * sizeof *h->valnodes);
  if (!h->valnodes) return CUDA_ERROR_OUT_OF_MEMORY;
  for (int i = 0; i < gr->nvalnodes; i++) {
    cg_valnode *v = &h->valnodes[h->nvalnodes];
    *v = gr->valnodes[i];
    v->value = ((cg_obj *)v->value)->share; /* made by share_pins */
    v->known = 0; /* the copy's node holds the capture's value */
    if (!v->value) return CUDA_ERROR_OUT_OF_MEMORY;
    if (!h->shared) {
      *api = "cuGraphNodeFindInClone";
      CUresult r = cg_drv.cuGraphNodeFindInClone
                   ? cg_drv.cuGraphNodeFindInClone(&v->node,
                                                   gr->valnodes[i].node, h->g)
                   : CUDA_ERROR_NOT_SUPPORTED;
      if (r != CUDA_SUCCESS) return r;
    }
    h->nvalnodes++;
  }
  return CUDA_SUCCESS;
}

/* Shares every pin of the set at idx whose kind passes (scalars or the
   rest) into h; 0 when out of memory. */
static int share_pins(lua_State *L, cugraph_graph *h, int idx, int scalars,
                      size_t cap) {
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    cg_obj *o = cg_toany(L, cg_sentinel(L), -1);
    if (!o || !cg_shareable(o) || (o->kind == CG_SCALAR) != scalars) continue;
    cg_share *sh = h->npins < cap ? share_of(o) : NULL;
    if (!sh) {
      lua_pop(L, 1);
      return 0;
    }
    h->pins[h->npins++] = sh;
    if (sh->hk == CG_H_MODULE && !add_user(sh, h)) {
      lua_pop(L, 1);
      return 0;
    }
  }
  return 1;
}

/* Hands h's copy a keep of the memory among its pins (without user
   objects in the driver: none). */
static CUresult keep_pins(cugraph_graph *h, const char **api) {
  if (!cg_drv.cuUserObjectCreate || !cg_drv.cuGraphRetainUserObject ||
      !cg_drv.cuUserObjectRelease)
    return CUDA_SUCCESS;
  cg_keep *k = cg_keep_new(NULL);
  int ok = k != NULL;
  for (size_t i = 0; ok && i < h->npins; i++) ok = cg_keep_share(k, h->pins[i]);
  if (!ok) {
    cg_keep_free(k);
    *api = "cugraph_tograph";
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUresult r = cg_keep_attach(k, h->g, api);
  if (r == CUDA_SUCCESS) h->keep = k;
  return r;
}

/* cg_graph_trace of the graph at 1 for the exec and copy at 2 and 3. */
static int trace_graph(lua_State *L) {
  cg_graph_trace(L, lua_touserdata(L, 1), 1, lua_touserdata(L, 2),
                 lua_touserdata(L, 3));
  return 0;
}

cugraph_graph *cugraph_tograph(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  cg_graph *gr = cg_checkobj(L, idx, CG_GRAPH);
  cg_ctx *ctx = gr->h.ctx;
  cg_check_outside(L, ctx, "cugraph_tograph", "take the handle after the capture");
  const cg_recs *rs = gr->recs;
  for (size_t i = 0; rs && i < rs->n; i++)
    if (rs->v[i].kind == NK_ALLOC || rs->v[i].kind == NK_FREE)
      luaL_error(L, "cugraph_tograph: cugraph.Graph #%d allocates or frees "
                 "memory in its nodes, which the driver cannot copy "
                 "(cuGraphClone); allocate its buffers before the capture",
                 (int)gr->id);
  lua_getiuservalue(L, idx, 1); /* the pins */
  int pins = lua_gettop(L);
  size_t n = 0;
  int flushed = 0;
  lua_pushnil(L);
  while (lua_next(L, pins)) {
    lua_pop(L, 1);
    cg_obj *o = cg_toany(L, ctx, -1);
    if (o && o->kind == CG_SCALAR) flushed |= flush_scalar(L, (cg_scalar *)o);
    if (o && cg_in_graphmem(o))
      luaL_error(L, "cugraph_tograph: cugraph.Graph #%d uses memory that "
                 "cugraph.Graph #%d allocates, which a C graph cannot keep "
                 "alive; allocate it before the capture", (int)gr->id,
                 (int)o->graph);
    if (o && o->scoped)
      luaL_error(L, "cugraph_tograph: cugraph.Graph #%d uses a buffer of a "
                 "GLResource's map scope, which a C graph would outlive; "
                 "map the resource from C instead", (int)gr->id);
    n++;
  }
  if (flushed) cg_sync(L, ctx); /* before C's writes */
  cugraph_graph *h = calloc(1, sizeof *h);
  if (h) h->pins = malloc((n ? n : 1) * sizeof *h->pins);
  if (!h || !h->pins) {
    free(h);
    luaL_error(L, "cugraph_tograph: out of host memory");
    return NULL; /* not reached */
  }
  pthread_mutex_init(&h->lock, NULL);
  h->refs = 1;
  h->conds = gr->conds;
  h->dev = ctx->dev;
  h->cu = ctx->cu;
  CUgraph g;
  CUgraphExec x;
  cg_graph_parts(L, idx, &g, &x);
  /* A copy of the graph that reload can edit, instantiated; a graph with
     conditional nodes, which the driver neither copies nor instantiates
     twice, lends its own exec instead (a reload is then refused for it,
     cg_share_conds). */
  CUcontext cu;
  const char *api = "cuDevicePrimaryCtxRetain";
  CUresult r = cg_drv.cuDevicePrimaryCtxRetain(&cu, ctx->dev);
  h->retained = r == CUDA_SUCCESS;
  if (r == CUDA_SUCCESS && gr->conds) {
    if ((h->shared = cg_share_of(&gr->h))) {
      h->exec = x;
      pthread_mutex_lock(&h->shared->lock);
      h->shared->waits = 1; /* an engine may launch it unseen */
      pthread_mutex_unlock(&h->shared->lock);
    } else {
      r = CUDA_ERROR_OUT_OF_MEMORY, api = "cugraph_tograph";
    }
  } else if (r == CUDA_SUCCESS) {
    api = "cuGraphClone";
    r = cg_drv.cuGraphClone ? cg_drv.cuGraphClone(&h->g, g)
                            : CUDA_ERROR_NOT_SUPPORTED;
  }
  int ok = r != CUDA_SUCCESS || share_pins(L, h, pins, 1, n);
  h->nscalars = h->npins;
  ok = ok && (r != CUDA_SUCCESS || share_pins(L, h, pins, 0, n));
  if (ok && r == CUDA_SUCCESS && h->g) r = keep_pins(h, &api);
  if (ok && r == CUDA_SUCCESS && h->g) {
    api = "cuGraphInstantiate";
    r = cg_drv.cuGraphInstantiate(&h->exec, h->g, 0);
  }
  if (ok && r == CUDA_SUCCESS) r = copy_valnodes(h, gr, &api);
  lua_pop(L, 1);
  if (r == CUDA_SUCCESS && ok) {
    /* the trace names its launches' kernels (a shared exec: the graph's);
       what raises there lets the new handle go first */
    if (ctx->root->trace && (h->g || !gr->traced)) {
      lua_pushcfunction(L, trace_graph);
      lua_pushvalue(L, idx);
      lua_pushlightuserdata(L, h->exec);
      lua_pushlightuserdata(L, h->g);
      if (lua_pcall(L, 3, 0, 0) != LUA_OK) {
        graph_destroy(h);
        lua_error(L);
      }
    }
    return h;
  }
  graph_destroy(h);
  if (!ok) luaL_error(L, "cugraph_tograph: out of host memory");
  cg_check(L, ctx, api, r);
  return NULL;
}

int cg_share_conds(cg_share *sh) {
  int any = 0;
  pthread_mutex_lock(&sh->lock);
  for (size_t i = 0; i < sh->nusers && !any; i++)
    any = ((cugraph_graph *)sh->users[i])->conds != 0;
  pthread_mutex_unlock(&sh->lock);
  return any;
}

void cugraph_graph_retain(cugraph_graph *h) {
  pthread_mutex_lock(&h->lock);
  h->refs++;
  pthread_mutex_unlock(&h->lock);
}

void cugraph_graph_release(cugraph_graph *h) {
  if (!h) return;
  pthread_mutex_lock(&h->lock);
  int last = --h->refs == 0;
  pthread_mutex_unlock(&h->lock);
  if (last) graph_destroy(h);
}

CUgraphExec cugraph_graph_exec(cugraph_graph *h) { return h->exec; }

int cugraph_settle(double seconds) { return cg_settle(seconds); }

CUresult cugraph_graph_launch(cugraph_graph *h, CUstream stream) {
  CUresult r = cg_make_current(h->cu);
  if (r != CUDA_SUCCESS) return r;
  pthread_mutex_lock(&h->lock);
  for (size_t i = 0; i < h->nscalars && r == CUDA_SUCCESS; i++)
    r = scalar_flush(h->pins[i], stream);
  for (int i = 0; i < h->nvalnodes && r == CUDA_SUCCESS; i++) {
    cg_valnode *v = &h->valnodes[i];
    cg_share *sc = v->value;
    const char *api;
    pthread_mutex_lock(&sc->lock);
    uint64_t bits = sc->bits;
    pthread_mutex_unlock(&sc->lock);
    if (v->known && bits == v->last) continue;
    r = cg_valnode_set(h->exec, v, bits, &api);
    v->last = bits;
    v->known = !h->shared; /* a shared exec: the Lua graph sets it too */
  }
  if (r == CUDA_SUCCESS) r = cg_drv.cuGraphLaunch(h->exec, stream);
  h->launched = 1;
  pthread_mutex_unlock(&h->lock);
  return r;
}

CUresult cg_share_swap(cg_share *sh, CUmodule newmod, const cg_swap *sw,
                       int n, const char **api) {
  CUresult first = CUDA_SUCCESS;
  pthread_mutex_lock(&sh->lock);
  for (size_t i = 0; i < sh->nusers; i++) {
    cugraph_graph *h = sh->users[i];
    pthread_mutex_lock(&h->lock);
    const char *what = NULL;
    CUresult r = cg_swap_kernels(h->g, h->exec, NULL, sw, n, &what);
    pthread_mutex_unlock(&h->lock);
    if (first == CUDA_SUCCESS && r != CUDA_SUCCESS) {
      first = r;
      *api = what;
    }
  }
  sh->h.module = newmod;
  pthread_mutex_unlock(&sh->lock);
  return first;
}

/* -- C scalars ------------------------------------------------------------ */

cugraph_scalar *cugraph_toscalar(lua_State *L, int idx) {
  cg_scalar *sc = cg_checkobj(L, idx, CG_SCALAR);
  if (flush_scalar(L, sc)) cg_sync(L, sc->h.ctx); /* before C's writes */
  cg_share *sh = share_of(&sc->h);
  if (!sh) luaL_error(L, "cugraph_toscalar: out of host memory");
  return (cugraph_scalar *)sh;
}

const char *cugraph_scalar_type(const cugraph_scalar *s) {
  return cg_type_names[((const cg_share *)s)->type];
}

void cugraph_scalar_set(cugraph_scalar *s, const void *bits) {
  cg_share *sh = (cg_share *)s;
  uint64_t v = 0;
  memcpy(&v, bits, cg_type_size[sh->type]);
  pthread_mutex_lock(&sh->lock);
  sh->bits = v;
  sh->pending = 1;
  pthread_mutex_unlock(&sh->lock);
}

void cugraph_scalar_release(cugraph_scalar *s) {
  cg_share_drop((cg_share *)s);
}
