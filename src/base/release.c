/* The one owner of driver handles. It knows every kind of handle the
   runtime holds: which object kind holds it, how it is destroyed, which
   context that needs, and whether a C graph shares it. Nothing else
   destroys a handle: objects release theirs here (their :free(), __close,
   __gc, the last unpin of a collected one), finalizers' frees are held back
   while a capture runs, and shares let a C graph keep a handle past its Lua
   object and lua_close. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "base/base.h"
#include "base/nccl.h"
#include "base/blas.h"
#include "base/fft.h"
#include "base/release.h"
#include "cugraph.h"

/* Each object kind's handle kind and sharing, from base.h's one list (a
   DLPack tensor holds the memory of the Buffer made from it: it is shared
   like memory). */
static const struct {
  unsigned char hk;     /* cg_hkind */
  unsigned char shared;
} kinds[] = {
#define CG_KIND_ROW(k, name, hk, shared, recv) { CG_H_##hk, shared },
  CG_KINDS(CG_KIND_ROW)
#undef CG_KIND_ROW
};

static const char *const destroy_api[] = {
#define CG_HKIND_API(k, api) api,
  CG_HKINDS(CG_HKIND_API)
#undef CG_HKIND_API
};

cg_hkind cg_hkind_of(cg_kind k) { return (cg_hkind)kinds[k].hk; }

/* Calls a DLPack tensor's deleter, when it has one: the producer's code,
   which frees the memory or lets go of its references to it. */
static void dlpack_delete(uintptr_t t) {
  if (t & 1) {
    DLManagedTensorVersioned *v = (DLManagedTensorVersioned *)(t - 1);
    if (v->deleter) v->deleter(v);
  } else {
    DLManagedTensor *m = (DLManagedTensor *)t;
    if (m->deleter) m->deleter(m);
  }
}

/* Frees what a handle holds in host memory when the driver may not be
   called for it (a poisoned or closed context): the driver's part is left
   to the process's end. */
static void forget(cg_hkind hk, cg_handle h) {
  if (hk != CG_H_EXTMEM || !h.extmem) return;
  free(h.extmem->mips);
  free(h.extmem);
}

/* Destroys h, with its context current. A communicator of a context that
   met a sticky error is aborted instead (its work can never finish). NCCL's
   results are told apart from the driver's by the api name. */
static int destroy(cg_hkind hk, cg_handle h, int poisoned, const char **api) {
  *api = destroy_api[hk];
  switch (hk) {
  case CG_H_MEM: return cg_drv.cuMemFree(h.mem);
  case CG_H_HOST: return cg_drv.cuMemFreeHost(h.host);
  case CG_H_MODULE: return cg_drv.cuModuleUnload(h.module);
  case CG_H_STREAM: return cg_drv.cuStreamDestroy(h.stream);
  case CG_H_EVENT: return cg_drv.cuEventDestroy(h.event);
  case CG_H_GRAPH: return cg_drv.cuGraphDestroy(h.graph);
  case CG_H_EXEC: return cg_drv.cuGraphExecDestroy(h.exec);
  case CG_H_GLRES: return cg_drv.cuGraphicsUnregisterResource(h.res);
  case CG_H_ARRAY: return cg_drv.cuArrayDestroy(h.array);
  case CG_H_TEXOBJ: return cg_drv.cuTexObjectDestroy(h.tex);
  case CG_H_SURFOBJ: return cg_drv.cuSurfObjectDestroy(h.surf);
  case CG_H_DLPACK: dlpack_delete(h.dlpack); return 0;
  case CG_H_EXTSEM: return cg_drv.cuDestroyExternalSemaphore(h.extsem);
  case CG_H_EXTMEM: { /* its arrays first: they are mapped from it */
    struct cg_extmem_res *m = h.extmem;
    CUresult r = CUDA_SUCCESS, e;
    for (size_t i = 0; i < m->nmips; i++)
      if ((e = cg_drv.cuMipmappedArrayDestroy(m->mips[i])) && !r) {
        r = e;
        *api = "cuMipmappedArrayDestroy";
      }
    if (!m->borrowed && (e = cg_drv.cuDestroyExternalMemory(m->mem)) && !r)
      r = e;
    forget(hk, h);
    return r;
  }
  case CG_H_BLAS: { /* the handle first: it may use its workspace */
    if (h.blas->lt) cg_cublaslt.cublasLtDestroy(h.blas->lt);
    if (!cg_blas_load()) cg_cublas.cublasDestroy_v2(h.blas->handle);
    CUresult r = cg_drv.cuMemFree(h.blas->mem);
    free(h.blas);
    *api = "cuMemFree";
    return r;
  }
  case CG_H_FFT: { /* the plan first: it may use its work area */
    cg_cufft.cufftDestroy(h.fft->plan); /* the plan holds cuFFT */
    CUresult r = h.fft->work ? cg_drv.cuMemFree(h.fft->work) : CUDA_SUCCESS;
    free(h.fft);
    cg_fft_drop();
    *api = "cuMemFree";
    return r;
  }
  case CG_H_COMM:
    if (cg_nccl_load()) return 0; /* none was made without NCCL */
    if (poisoned) *api = "ncclCommAbort";
    return poisoned ? cg_nccl.ncclCommAbort(h.comm)
                    : cg_nccl.ncclCommDestroy(h.comm);
  case CG_H_PRIMARY: return cg_drv.cuDevicePrimaryCtxRelease(h.dev);
  case CG_H_NONE: case CG_H_NKINDS: return 0;
  }
  return 0;
}

int cg_free_after(cg_ctx *ctx, CUdeviceptr mem, CUevent ev) {
  return cg_drv.cuMemFreeAsync && cg_make_current(ctx->cu) == CUDA_SUCCESS &&
         cg_drv.cuStreamWaitEvent(ctx->stream, ev, 0) == CUDA_SUCCESS &&
         cg_drv.cuMemFreeAsync(mem, ctx->stream) == CUDA_SUCCESS;
}

int cg_destroy(cg_hkind hk, cg_handle h) {
  const char *api;
  return destroy(hk, h, 0, &api);
}

void cg_record(lua_State *L, cg_ctx *ctx, const char *api, const char *name) {
  ctx = ctx->root;
  ctx->gc_errors++;
  snprintf(ctx->gc_error, sizeof ctx->gc_error, "%s: %s", api, name);
  lua_warning(L, "cugraph: ", 1);
  lua_warning(L, ctx->gc_error, 0);
}

void cg_record_cu(lua_State *L, cg_ctx *ctx, const char *api, CUresult r) {
  if (r == CUDA_ERROR_DEINITIALIZED) return;
  char buf[CG_ERRNAME];
  cg_poison(ctx, api, r);
  cg_record(L, ctx, api, cg_driver_errname(r, buf));
}

/* Destroys h now and records a failure (a driver error poisons as any). */
static void destroy_now(lua_State *L, cg_ctx *ctx, cg_hkind hk, cg_handle h) {
  const char *api;
  int r = destroy(hk, h, ctx->poison != CUDA_SUCCESS, &api);
  if (r == 0) return;
  if (hk == CG_H_COMM) {
    const char *name = cg_nccl_result_name(r);
    cg_record(L, ctx, api, name ? name : "ncclResult");
  } else {
    cg_record_cu(L, ctx, api, (CUresult)r);
  }
}

/* A communicator is aborted after a sticky error; every other handle of a
   poisoned or closed context is left to the process's end, but for DLPack
   tensors: their deleters run exactly once whatever the context's state
   (the producer owns the memory and what else it made for the tensor). */
int cg_may_destroy(cg_ctx *ctx, cg_hkind hk) {
  if (hk == CG_H_DLPACK) return 1;
  if (!ctx->ready || ctx->root->closed || ctx->closed) return 0;
  return !ctx->poison || hk == CG_H_COMM;
}

void cg_release(lua_State *L, cg_ctx *ctx, cg_hkind hk, cg_handle h) {
  cg_keep_drain(L, ctx); /* what launches that ended let go of */
  if (hk == CG_H_NONE || !h.p) return;
  if (hk == CG_H_STREAM && ctx->root->stream_gone)
    ctx->root->stream_gone(ctx, h.stream);
  if (!cg_may_destroy(ctx, hk)) {
    forget(hk, h);
    return;
  }
  /* held back while a capture runs (a free would break it), and while the
     work of a wait that timed out still runs (a free would wait for it) */
  if (ctx->capture || cg_still_hung(ctx)) {
    if (ctx->ndeferred == ctx->cdeferred) {
      size_t c = ctx->cdeferred ? 2 * ctx->cdeferred : 16;
      void *p = realloc(ctx->deferred, c * sizeof *ctx->deferred);
      if (!p) return; /* out of host memory: leak rather than break */
      ctx->deferred = p;
      ctx->cdeferred = c;
    }
    ctx->deferred[ctx->ndeferred].hk = (unsigned char)hk;
    ctx->deferred[ctx->ndeferred++].h = h;
    return;
  }
  CUresult r = cg_make_current(ctx->cu); /* a finalizer may run anywhere */
  if (r != CUDA_SUCCESS) {
    cg_record_cu(L, ctx, "cuCtxSetCurrent", r);
    if (hk == CG_H_DLPACK) dlpack_delete(h.dlpack);
    forget(hk, h);
    return;
  }
  if (ctx->ndeferred) cg_flush_deferred(L, ctx); /* held back before */
  destroy_now(L, ctx, hk, h);
}

/* What releases and closes left to the runtime's threads, not done yet:
   keeps let go whose shares are not dropped, and finishers running.
   cg_settle waits for none to be left. */
static struct {
  pthread_mutex_t lock;
  pthread_cond_t done;
  unsigned n;
} loose = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };

void cg_loose_add(int d) {
  pthread_mutex_lock(&loose.lock);
  loose.n += (unsigned)d;
  if (!loose.n) pthread_cond_broadcast(&loose.done);
  pthread_mutex_unlock(&loose.lock);
}

void cg_deadline_in(struct timespec *ts, double t) {
  clock_gettime(CLOCK_REALTIME, ts);
  double s = (double)ts->tv_sec + ts->tv_nsec * 1e-9 + t;
  ts->tv_sec = (time_t)s;
  ts->tv_nsec = (long)((s - (double)ts->tv_sec) * 1e9);
}


int cg_settle(double t) {
  struct timespec end;
  cg_deadline_in(&end, t);
  pthread_mutex_lock(&loose.lock);
  while (loose.n && pthread_cond_timedwait(&loose.done, &loose.lock, &end) == 0) {}
  int all = !loose.n;
  pthread_mutex_unlock(&loose.lock);
  return all;
}

/* What a device closing while work a timed-out wait left behind still runs
   lets go of: its held frees and its context, taken by a thread that
   waits for that work (cuCtxSynchronize) first. */
struct finish {
  CUdevice dev;
  CUcontext cu;
  int release;          /* the primary context is retained: let it go */
  size_t n;
  struct cg_deferred d[];
};

static void *finisher(void *arg) {
  struct finish *f = arg;
  int current = cg_make_current(f->cu) == CUDA_SUCCESS;
  if (current) cg_drv.cuCtxSynchronize();
  for (int last = 0; last < 2; last++) /* DLPack deleters last: a producer */
    for (size_t i = 0; i < f->n; i++) {  /* that sees them run sees all */
      const char *api;
      cg_hkind hk = (cg_hkind)f->d[i].hk;
      if ((hk == CG_H_DLPACK) != last) continue;
      if (current || last) destroy(hk, f->d[i].h, 0, &api);
      else forget(hk, f->d[i].h);
    }
  if (f->release) cg_destroy(CG_H_PRIMARY, (cg_handle){ .dev = f->dev });
  free(f);
  cg_loose_add(-1);
  return NULL;
}

/* A finisher for hung ctx, with its held frees; 0 when none could be made
   (out of host memory or threads). */
static int finish_later(cg_ctx *ctx, int release) {
  struct finish *f = malloc(sizeof *f + ctx->ndeferred * sizeof f->d[0]);
  if (!f) return 0;
  f->dev = ctx->dev;
  f->cu = ctx->cu;
  f->release = release;
  f->n = ctx->ndeferred;
  memcpy(f->d, ctx->deferred, ctx->ndeferred * sizeof f->d[0]);
  pthread_t th;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  cg_loose_add(1);
  int bad = pthread_create(&th, &attr, finisher, f);
  pthread_attr_destroy(&attr);
  if (bad) {
    free(f);
    cg_loose_add(-1);
  }
  return !bad;
}

int cg_drop_deferred(cg_ctx *ctx, int release) {
  int hung = cg_still_hung(ctx);
  if (hung && finish_later(ctx, release)) {
    ctx->ndeferred = 0;
    return 1;
  }
  for (size_t i = 0; i < ctx->ndeferred; i++) {
    if (ctx->deferred[i].hk == CG_H_DLPACK && !hung)
      dlpack_delete(ctx->deferred[i].h.dlpack);
    forget((cg_hkind)ctx->deferred[i].hk, ctx->deferred[i].h);
  }
  ctx->ndeferred = 0;
  return 0;
}

/* Called with ctx's context current on this thread, and left so; the
   other devices' frees are made with theirs. */
void cg_flush_deferred(lua_State *L, cg_ctx *ctx) {
  for (cg_ctx *d = ctx->root; d; d = d->next) {
    if (!d->ndeferred || d->capture || cg_still_hung(d)) continue;
    if (d != ctx && cg_make_current(d->cu) != CUDA_SUCCESS) continue;
    for (size_t i = 0; i < d->ndeferred; i++)
      if (cg_may_destroy(d, (cg_hkind)d->deferred[i].hk))
        destroy_now(L, d, (cg_hkind)d->deferred[i].hk, d->deferred[i].h);
      else
        forget((cg_hkind)d->deferred[i].hk, d->deferred[i].h);
    d->ndeferred = 0;
  }
  cg_make_current(ctx->cu);
}

/* -- shares --------------------------------------------------------------- */

int cg_shareable(const cg_obj *o) {
  return kinds[o->kind].shared && o->owned && !o->graphmem && o->open;
}

/* Frees the share and its handle (if still there); the result of letting
   go of the primary context. */
static CUresult share_free(cg_share *sh) {
  const char *api;
  if (sh->waits && sh->h.p && !cg_reaping() && cg_reap_share(sh))
    return CUDA_SUCCESS;
  if (sh->h.p && (cg_make_current(sh->cu) == CUDA_SUCCESS ||
                  sh->hk == CG_H_DLPACK))
    destroy((cg_hkind)sh->hk, sh->h, 0, &api);
  else if (sh->h.p)
    forget((cg_hkind)sh->hk, sh->h);
  cg_fft_unload(); /* with no plan left: cuFFT's own memory goes first */
  CUresult r = (CUresult)destroy(CG_H_PRIMARY, (cg_handle){ .dev = sh->dev },
                                 0, &api);
  pthread_mutex_destroy(&sh->lock);
  free(sh->users);
  free(sh);
  return r;
}

/* One reference fewer; 1 when it was the last. */
static int unref(cg_share *sh) {
  pthread_mutex_lock(&sh->lock);
  int last = --sh->refs == 0;
  pthread_mutex_unlock(&sh->lock);
  return last;
}

void cg_share_drop(cg_share *sh) {
  if (sh && unref(sh)) share_free(sh);
}

cg_share *cg_share_of(cg_obj *o) {
  CUresult r;
  return cg_share_try(o, &r);
}

cg_share *cg_share_try(cg_obj *o, CUresult *r) {
  cg_share *sh = o->share;
  *r = CUDA_SUCCESS;
  if (!sh) {
    CUcontext cu;
    if (!(sh = calloc(1, sizeof *sh))) return NULL;
    if ((*r = cg_drv.cuDevicePrimaryCtxRetain(&cu, o->ctx->dev))) {
      free(sh);
      return NULL;
    }
    pthread_mutex_init(&sh->lock, NULL);
    sh->refs = 1; /* the Lua object's */
    sh->hk = kinds[o->kind].hk;
    sh->h = o->drv;
    sh->dev = o->ctx->dev;
    sh->cu = o->ctx->cu;
    o->share = sh;
  }
  pthread_mutex_lock(&sh->lock);
  sh->refs++;
  pthread_mutex_unlock(&sh->lock);
  return sh;
}

/* Drops a reference to sh on the thread of ctx's state: the last frees
   the handle as cg_release frees (held back during a capture, failures
   recorded), then the share. */
void cg_let_go(lua_State *L, cg_ctx *ctx, cg_share *sh) {
  if (!unref(sh)) return;
  if (sh->waits && cg_may_destroy(ctx, (cg_hkind)sh->hk) && cg_reap_share(sh))
    return;
  cg_release(L, ctx, (cg_hkind)sh->hk, sh->h);
  sh->h.p = NULL;
  CUresult r = share_free(sh);
  if (r != CUDA_SUCCESS) cg_record_cu(L, ctx, "cuDevicePrimaryCtxRelease", r);
}

void cg_release_obj(lua_State *L, cg_obj *o) {
  cg_share *sh = o->share;
  cg_hkind hk = kinds[o->kind].hk;
  if (sh) { /* the last holder frees; on this thread, as a release */
    o->share = NULL;
    cg_let_go(L, o->ctx, sh);
  } else if (o->owned) {
    cg_release(L, o->ctx, hk, o->drv);
  }
  memset(&o->drv, 0, sizeof o->drv);
}
