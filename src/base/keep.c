/* What graphs keep until their last launch is over (cg_keep_*, base.h):
   the references a keep holds, the driver's release of it (a user
   object's destructor, or a host function behind a graph's last launch),
   the state's queue its thread drains, and the reaper, the thread that
   drops what C graphs and closed states let go of (and destroys the
   executable graphs with conditional nodes that C graphs shared, whose
   destroy waits for their launches). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "base/release.h"

/* A state's keeps that the driver holds: released ones wait here for the
   state's thread, which drops them as it frees anything (cg_keep_drain).
   It outlives the state while a keep names it: a keep released after
   lua_close goes to the reaper. */
struct cg_keepq {
  pthread_mutex_t lock;
  pthread_cond_t came;
  unsigned refs;        /* the state's, and one a keep that names it */
  int alive;            /* the state is open */
  unsigned out;         /* left to the driver, not released yet */
  cg_keep *list;        /* released, not dropped yet */
  atomic_int pending;   /* list is not empty (read without the lock) */
};

struct cg_keep {
  cg_keep *next;        /* on a released list */
  cg_keepq *q;          /* its state's (NULL: a C graph's, the reaper's) */
  int out;              /* let go: counted by cg_loose_add, and in q->out
                           until the driver releases it */
  size_t n, cap;
  cg_share **sh;        /* a reference each */
  CUgraph graph;        /* with an exec's share alone: its graph, destroyed
                           first (cg_keep_exec_after) */
};

/* The reaper: a thread of the process, made on first use, that drops the
   shares of the keeps the driver released when no state takes them (a C
   graph's, or after lua_close). Process-wide, as the driver's user objects
   are. Its frees' errors are not reported (there is no state). */
static struct {
  pthread_mutex_t lock;
  pthread_cond_t work, idle;
  cg_keep *list;
  unsigned busy;        /* keeps queued or being reaped */
  int started;
} reaper = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
             PTHREAD_COND_INITIALIZER, NULL, 0, 0 };

static void queue_unref(cg_keepq *q) {
  pthread_mutex_lock(&q->lock);
  int last = --q->refs == 0;
  pthread_mutex_unlock(&q->lock);
  if (!last) return;
  pthread_mutex_destroy(&q->lock);
  pthread_cond_destroy(&q->came);
  free(q);
}

cg_keep *cg_keep_new(cg_ctx *ctx) {
  cg_keep *k = calloc(1, sizeof *k);
  cg_ctx *root = ctx ? ctx->root : NULL;
  if (!k || !root) return k;
  if (!root->keepq) {
    cg_keepq *q = calloc(1, sizeof *q);
    if (!q) {
      free(k);
      return NULL;
    }
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->came, NULL);
    q->refs = 1;
    q->alive = 1;
    root->keepq = q;
  }
  k->q = root->keepq;
  pthread_mutex_lock(&k->q->lock);
  k->q->refs++;
  pthread_mutex_unlock(&k->q->lock);
  return k;
}

CUresult cg_keep_add(cg_keep *k, cg_obj *o, const char **api) {
  cg_hkind hk = cg_hkind_of(o->kind);
  *api = NULL;
  if ((hk != CG_H_MEM && hk != CG_H_HOST) || !cg_shareable(o))
    return CUDA_SUCCESS;
  for (size_t i = 0; i < k->n; i++)
    if (k->sh[i] == o->share) return CUDA_SUCCESS;
  if (k->n == k->cap) {
    size_t c = k->cap ? 2 * k->cap : 8;
    cg_share **v = realloc(k->sh, c * sizeof *v);
    if (!v) return CUDA_ERROR_OUT_OF_MEMORY;
    k->sh = v;
    k->cap = c;
  }
  CUresult r;
  cg_share *sh = cg_share_try(o, &r);
  if (!sh) {
    if (r == CUDA_SUCCESS) return CUDA_ERROR_OUT_OF_MEMORY; /* host's */
    *api = "cuDevicePrimaryCtxRetain";
    return r;
  }
  k->sh[k->n++] = sh;
  return CUDA_SUCCESS;
}

int cg_keep_share(cg_keep *k, cg_share *sh) {
  if (sh->hk != CG_H_MEM && sh->hk != CG_H_HOST) return 1;
  for (size_t i = 0; i < k->n; i++)
    if (k->sh[i] == sh) return 1;
  if (k->n == k->cap) {
    size_t c = k->cap ? 2 * k->cap : 8;
    cg_share **v = realloc(k->sh, c * sizeof *v);
    if (!v) return 0;
    k->sh = v;
    k->cap = c;
  }
  pthread_mutex_lock(&sh->lock);
  sh->refs++;
  pthread_mutex_unlock(&sh->lock);
  k->sh[k->n++] = sh;
  return 1;
}

static void drop_shares(cg_keep *k) {
  for (size_t i = 0; i < k->n; i++) cg_share_drop(k->sh[i]);
  k->n = 0;
}

void cg_keep_free(cg_keep *k) {
  if (!k) return;
  drop_shares(k);
  if (k->out) cg_loose_add(-1);
  if (k->q) queue_unref(k->q);
  free(k->sh);
  free(k);
}

static _Thread_local int reaping; /* on the reaper's thread */

int cg_reaping(void) { return reaping; }

static void *reaper_main(void *arg) {
  (void)arg;
  reaping = 1;
  pthread_mutex_lock(&reaper.lock);
  for (;;) {
    while (!reaper.list) pthread_cond_wait(&reaper.work, &reaper.lock);
    cg_keep *k = reaper.list;
    reaper.list = k->next;
    pthread_mutex_unlock(&reaper.lock);
    if (k->graph) { /* its exec's share, which follows, holds the context */
      CUcontext cu = k->sh[0]->cu;
      cg_gate_shut(cu);
      if (cg_make_current(cu) == CUDA_SUCCESS)
        cg_destroy(CG_H_GRAPH, (cg_handle){ .graph = k->graph });
      cg_gate_open(cu);
      k->graph = NULL;
    }
    for (size_t i = 0; i < k->n; i++) { /* a free breaks a global capture */
      CUcontext cu = k->sh[i]->cu;
      cg_gate_shut(cu);
      cg_share_drop(k->sh[i]);
      cg_gate_open(cu);
    }
    k->n = 0;
    cg_keep_free(k);
    pthread_mutex_lock(&reaper.lock);
    if (!--reaper.busy) pthread_cond_broadcast(&reaper.idle);
  }
  return NULL;
}

/* Hands k to the reaper; a keep it cannot take (no thread could be made)
   is left, its shares with it, to the process's end: 0 then. */
static int to_reaper(cg_keep *k) {
  pthread_mutex_lock(&reaper.lock);
  if (!reaper.started) {
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    reaper.started = pthread_create(&th, &attr, reaper_main, NULL) == 0;
    pthread_attr_destroy(&attr);
  }
  if (reaper.started) {
    k->next = reaper.list;
    reaper.list = k;
    reaper.busy++;
    pthread_cond_signal(&reaper.work);
  }
  int started = reaper.started;
  pthread_mutex_unlock(&reaper.lock);
  return started;
}

/* A keep of ctx's state (NULL: the reaper's) holding sh, with a reference
   the caller gives it; NULL when out of host memory. */
static cg_keep *keep_one(cg_ctx *ctx, cg_share *sh) {
  cg_keep *k = cg_keep_new(ctx);
  if (k && (k->sh = malloc(sizeof *k->sh))) {
    k->sh[0] = sh;
    k->n = k->cap = 1;
    return k;
  }
  cg_keep_free(k);
  return NULL;
}

/* The reaper frees the handle of sh as it drops a keep's share: a keep
   holding sh alone, with the reference the caller's drop let go of. Its
   wait for the launches keeps the reaper from other keeps meanwhile:
   they go after it. */
int cg_reap_share(cg_share *sh) {
  cg_keep *k = keep_one(NULL, sh);
  if (!k) return 0;
  pthread_mutex_lock(&sh->lock);
  sh->refs = 1;
  pthread_mutex_unlock(&sh->lock);
  k->out = 1; /* cg_settle waits for it */
  cg_loose_add(1);
  if (to_reaper(k)) return 1;
  k->n = 0; /* no thread: the caller frees sh now */
  sh->refs = 0;
  cg_keep_free(k);
  return 0;
}

/* The user object's destructor, on the driver's thread: no CUDA call. */
static void CUDA_CB keep_released(void *p) {
  cg_keep *k = p;
  cg_keepq *q = k->q;
  if (q) {
    pthread_mutex_lock(&q->lock);
    int alive = q->alive;
    if (alive) {
      k->next = q->list;
      q->list = k;
      atomic_store(&q->pending, 1);
    }
    if (k->out) q->out--;
    pthread_cond_broadcast(&q->came);
    pthread_mutex_unlock(&q->lock);
    if (alive) return;
  }
  to_reaper(k);
}

CUresult cg_keep_attach(cg_keep *k, CUgraph g, const char **api) {
  CUuserObject uo;
  if (!cg_drv.cuUserObjectCreate || !cg_drv.cuGraphRetainUserObject ||
      !cg_drv.cuUserObjectRelease)
    return CUDA_ERROR_NOT_SUPPORTED;
  *api = "cuUserObjectCreate";
  CUresult r = cg_drv.cuUserObjectCreate(&uo, k, keep_released, 1,
                                         CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
  if (r != CUDA_SUCCESS) {
    cg_keep_free(k);
    return r;
  }
  *api = "cuGraphRetainUserObject";
  r = cg_drv.cuGraphRetainUserObject(g, uo, 1, CU_GRAPH_USER_OBJECT_MOVE);
  if (r != CUDA_SUCCESS) /* ours: its destructor takes k */
    cg_drv.cuUserObjectRelease(uo, 1);
  return r;
}

void cg_keep_leave(cg_keep *k, int drop) {
  if (drop) { /* before the graph goes: the driver cannot release k yet */
    drop_shares(k);
    return;
  }
  cg_loose_add(1);
  if (!k->q) {
    k->out = 1;
    return;
  }
  pthread_mutex_lock(&k->q->lock);
  k->q->out++;
  k->out = 1;
  pthread_mutex_unlock(&k->q->lock);
}

static void CUDA_CB keep_after_run(void *p) { keep_released(p); }

void cg_keep_after(lua_State *L, cg_ctx *ctx, cg_keep *k, CUstream s) {
  cg_keep_leave(k, 0);
  /* during a capture of the context the stream may be the one capturing,
     where a host function would be recorded; frees are held back then */
  if (s && cg_drv.cuLaunchHostFunc && cg_may_destroy(ctx, CG_H_STREAM) &&
      !ctx->capture) {
    const char *api = "cuCtxSetCurrent";
    CUresult r = cg_make_current(ctx->cu); /* a finalizer may run anywhere */
    if (r == CUDA_SUCCESS) {
      api = "cuLaunchHostFunc";
      r = cg_drv.cuLaunchHostFunc(s, keep_after_run, k);
    }
    if (r == CUDA_SUCCESS) return;
    cg_record_cu(L, ctx, api, r); /* as a failed release, never raised */
  }
  keep_released(k);
}

void cg_keep_exec_after(lua_State *L, cg_ctx *ctx, cg_obj *o, CUgraph *g,
                        CUstream s) {
  CUresult r;
  cg_share *sh = cg_share_try(o, &r);
  cg_keep *k = sh ? keep_one(ctx, sh) : NULL; /* the reference it gave */
  if (!k) {
    if (r != CUDA_SUCCESS) cg_record_cu(L, ctx, "cuDevicePrimaryCtxRetain", r);
    cg_share_drop(sh); /* the object's stays */
    return;
  }
  k->graph = *g;
  *g = NULL;
  cg_keep_after(L, ctx, k, s);
}

void cg_keep_drain(lua_State *L, cg_ctx *ctx) {
  cg_ctx *root = ctx->root;
  cg_keepq *q = root->keepq;
  if (!q || !atomic_load_explicit(&q->pending, memory_order_relaxed)) return;
  pthread_mutex_lock(&q->lock);
  cg_keep *list = q->list;
  q->list = NULL;
  atomic_store(&q->pending, 0);
  pthread_mutex_unlock(&q->lock);
  while (list) {
    cg_keep *k = list;
    list = k->next;
    if (k->graph) { /* before its exec's share, which holds the context */
      cg_ctx *d = root;
      while (d && d->cu != k->sh[0]->cu) d = d->next;
      if (d) cg_release(L, d, CG_H_GRAPH, (cg_handle){ .graph = k->graph });
      k->graph = NULL;
    }
    for (size_t i = 0; i < k->n; i++) {
      cg_ctx *d = root;
      while (d && d->cu != k->sh[i]->cu) d = d->next;
      if (d) cg_let_go(L, d, k->sh[i]);
      else cg_share_drop(k->sh[i]);
    }
    k->n = 0;
    cg_keep_free(k);
  }
}

int cg_keep_settle(lua_State *L, cg_ctx *ctx, double t) {
  cg_keepq *q = ctx->root->keepq;
  struct timespec end;
  cg_deadline_in(&end, t);
  int all = 1;
  if (q) {
    pthread_mutex_lock(&q->lock);
    while (q->out && pthread_cond_timedwait(&q->came, &q->lock, &end) == 0) {}
    all = !q->out;
    pthread_mutex_unlock(&q->lock);
    cg_keep_drain(L, ctx);
  }
  pthread_mutex_lock(&reaper.lock); /* and C graphs' */
  while (reaper.busy && pthread_cond_timedwait(&reaper.idle, &reaper.lock,
                                               &end) == 0) {}
  all = all && !reaper.busy;
  pthread_mutex_unlock(&reaper.lock);
  return all;
}

void cg_keep_close(lua_State *L, cg_ctx *root) {
  cg_keepq *q = root->keepq;
  if (!q) return;
  if (cg_alive(root)) /* the graphs' finalizers ran: their keeps come */
    cg_keep_settle(L, root, CG_KEEP_SETTLE);
  pthread_mutex_lock(&q->lock);
  q->alive = 0;                 /* from here a keep goes to the reaper */
  cg_keep *list = q->list;
  q->list = NULL;
  pthread_mutex_unlock(&q->lock);
  for (cg_keep *k = list, *next; k; k = next) {
    next = k->next;
    to_reaper(k);
  }
  root->keepq = NULL;
  queue_unref(q);
}
