/* CUPTI's kernel activity records (base/cupti.h). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/driver.h"
#include "base/loader.h"
#include "base/cupti.h"

cg_cupti_table cg_cupti;

/* The software driver first (it stands in itself), then the toolkit's. */
static int candidates(char paths[][CG_PATHLEN], int max) {
  static const char *const names[] = {
    "libcupti.so.13", "libcupti.so.12", "libcupti.so"
  };
  int n = cg_driver_standin("cugraph_cupti_standin", paths[0], CG_PATHLEN);
  for (size_t i = 0; i < sizeof names / sizeof *names && n < max; i++)
    snprintf(paths[n++], CG_PATHLEN, "%s", names[i]);
  const char *home = getenv("CUDA_HOME");
  if (home && *home && n < max)
    snprintf(paths[n++], CG_PATHLEN, "%.400s/lib64/libcupti.so", home);
  if (n < max)
    snprintf(paths[n++], CG_PATHLEN, "/usr/local/cuda/lib64/libcupti.so");
  if (n < max)
    snprintf(paths[n++], CG_PATHLEN,
             "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so");
  return n;
}

#define SYMBOL(f, args) { #f, &cg_cupti.f, 0 },
#define OPTIONAL(f, args) { #f, &cg_cupti.f, 1 },
static const cg_symbol symbols[] = {
  CG_CUPTI_FUNCS(SYMBOL) CG_CUPTI_OPTIONAL(OPTIONAL) { NULL, NULL, 0 }
};
#undef OPTIONAL
#undef SYMBOL

static cg_library libcupti = {
  "CUGRAPH_LUA_LIBCUPTI", "CUPTI",
  "; install the CUDA toolkit's CUPTI, or name it with CUGRAPH_LUA_LIBCUPTI",
  candidates, symbols, NULL, CG_LIBRARY_STATE
};

const char *cg_cupti_load(void) { return cg_library_load(&libcupti); }

/* The fields of a kernel record the runtime reads, at the offsets every
   version of CUpti_ActivityKernel since the fifth keeps them. */
enum { REC_KIND = 0, REC_START = 16, REC_END = 24, REC_DEVICE = 40,
       REC_STREAM = 48, REC_NODE = 144 };
enum { BUFFER = 1 << 20 };

/* Turning recording on and off, and registered, under onoff (never held
   by complete, which a flush calls); the rest under lock. */
static pthread_mutex_t onoff = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned readers;  /* started, not stopped */
static cg_kernel_run *runs; /* the store */
static size_t nruns, cruns, dropped;
static int registered;

static void request(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = aligned_alloc(8, BUFFER);
  *size = *buffer ? BUFFER : 0;
  *max_records = 0;
}

/* CUPTI's thread or a flush: the buffer's kernel records are appended
   while some reader reads them. */
static void complete(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                     size_t size, size_t valid) {
  (void)ctx, (void)stream, (void)size;
  void *rec = NULL;
  pthread_mutex_lock(&lock);
  while (buffer && readers &&
         cg_cupti.cuptiActivityGetNextRecord(buffer, valid, &rec) ==
         CUPTI_SUCCESS) {
    uint32_t kind;
    const unsigned char *p = rec;
    memcpy(&kind, p + REC_KIND, 4);
    if (kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    if (nruns == cruns) {
      size_t c = cruns ? 2 * cruns : 1024;
      void *v = c <= CG_CUPTI_MAX ? realloc(runs, c * sizeof *runs) : NULL;
      if (v) {
        runs = v;
        cruns = c;
      }
    }
    if (nruns == cruns) {
      dropped++;
      continue;
    }
    cg_kernel_run *r = &runs[nruns++];
    memcpy(&r->start, p + REC_START, 8);
    memcpy(&r->end, p + REC_END, 8);
    memcpy(&r->node, p + REC_NODE, 8);
    memcpy(&r->device, p + REC_DEVICE, 4);
    memcpy(&r->stream, p + REC_STREAM, 4);
  }
  pthread_mutex_unlock(&lock);
  free(buffer);
}

/* CUPTI's message for r, into buf. */
static const char *why(char *buf, size_t size, const char *call,
                       CUptiResult r) {
  const char *s = NULL;
  if (cg_cupti.cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s) s = "?";
  snprintf(buf, size, "%s: %s (%d)", call, s, r);
  return buf;
}

const char *cg_cupti_start(cg_cupti_reader *rd) {
  static char msg[160]; /* under onoff */
  const char *e = cg_cupti_load();
  if (e || rd->on) return e;
  pthread_mutex_lock(&onoff);
  CUptiResult r = CUPTI_SUCCESS;
  if (!readers && !registered) {
    r = cg_cupti.cuptiActivityRegisterCallbacks(request, complete);
    registered = r == CUPTI_SUCCESS;
    if (!registered) e = why(msg, sizeof msg, "cuptiActivityRegisterCallbacks", r);
  }
  if (!e && !readers && (r = cg_cupti.cuptiActivityEnable(
                             CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) !=
                            CUPTI_SUCCESS)
    e = why(msg, sizeof msg, "cuptiActivityEnable", r);
  if (!e) {
    pthread_mutex_lock(&lock);
    readers++;
    *rd = (cg_cupti_reader){ .on = 1, .next = nruns, .dropped0 = dropped };
    pthread_mutex_unlock(&lock);
  }
  pthread_mutex_unlock(&onoff);
  return e;
}

const char *cg_cupti_take(cg_cupti_reader *rd, const cg_kernel_run **out,
                          size_t *n, size_t *lost) {
  static char msg[160];
  *out = rd->v;
  *n = 0;
  CUptiResult r = cg_cupti.cuptiActivityFlushAll(
      CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (r != CUPTI_SUCCESS) return why(msg, sizeof msg, "cuptiActivityFlushAll", r);
  pthread_mutex_lock(&lock);
  size_t k = nruns - rd->next;
  if (k > rd->cap) {
    void *v = realloc(rd->v, k * sizeof *rd->v);
    if (!v) {
      pthread_mutex_unlock(&lock);
      return "out of host memory for CUPTI's records";
    }
    rd->v = v;
    rd->cap = k;
  }
  if (k) memcpy(rd->v, runs + rd->next, k * sizeof *rd->v);
  rd->next = nruns;
  if (lost) *lost = dropped - rd->dropped0;
  pthread_mutex_unlock(&lock);
  *out = rd->v;
  *n = k;
  return NULL;
}

void cg_cupti_stop(cg_cupti_reader *rd) {
  if (rd->on) {
    pthread_mutex_lock(&onoff);
    pthread_mutex_lock(&lock);
    int last = --readers == 0;
    pthread_mutex_unlock(&lock);
    if (last) { /* what the flush hands over is no reader's */
      cg_cupti.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
      cg_cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
      pthread_mutex_lock(&lock);
      nruns = dropped = 0;
      pthread_mutex_unlock(&lock);
    }
    pthread_mutex_unlock(&onoff);
  }
  free(rd->v);
  *rd = (cg_cupti_reader){ 0 };
}
