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
static const cg_symbol symbols[] = { CG_CUPTI_FUNCS(SYMBOL) { NULL, NULL, 0 } };
#undef SYMBOL

static cg_library libcupti = {
  "CUGRAPH_LUA_LIBCUPTI", "CUPTI",
  "; install the CUDA toolkit's CUPTI, or name it with CUGRAPH_LUA_LIBCUPTI",
  candidates, symbols, NULL, CG_LIBRARY_STATE
};

const char *cg_cupti_load(void) { return cg_library_load(&libcupti); }

/* The fields of a kernel record the runtime reads, at the offsets every
   version of CUpti_ActivityKernel since the fifth keeps them. */
enum { REC_KIND = 0, REC_START = 16, REC_END = 24, REC_NODE = 144 };
enum { BUFFER = 1 << 20 };

static pthread_mutex_t recording = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* what follows */
static cg_kernel_run *runs;
static size_t nruns, cruns, taken;
static int registered, oom;

static void request(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = aligned_alloc(8, BUFFER);
  *size = *buffer ? BUFFER : 0;
  *max_records = 0;
}

/* CUPTI's thread or a flush: the buffer's kernel records are appended. */
static void complete(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                     size_t size, size_t valid) {
  (void)ctx, (void)stream, (void)size;
  void *rec = NULL;
  pthread_mutex_lock(&lock);
  while (buffer && cg_cupti.cuptiActivityGetNextRecord(buffer, valid, &rec) ==
         CUPTI_SUCCESS) {
    uint32_t kind;
    const unsigned char *p = rec;
    memcpy(&kind, p + REC_KIND, 4);
    if (kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    if (nruns == cruns) {
      size_t c = cruns ? 2 * cruns : 1024;
      void *v = realloc(runs, c * sizeof *runs);
      if (!v) {
        oom = 1;
        break;
      }
      runs = v;
      cruns = c;
    }
    cg_kernel_run *r = &runs[nruns++];
    memcpy(&r->start, p + REC_START, 8);
    memcpy(&r->end, p + REC_END, 8);
    memcpy(&r->node, p + REC_NODE, 8);
  }
  pthread_mutex_unlock(&lock);
  free(buffer);
}

/* CUPTI's message for r. */
static const char *why(const char *call, CUptiResult r) {
  static char msg[160]; /* under the recording lock */
  const char *s = NULL;
  if (cg_cupti.cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s) s = "?";
  snprintf(msg, sizeof msg, "%s: %s (%d)", call, s, r);
  return msg;
}

const char *cg_cupti_start(void) {
  const char *e = cg_cupti_load();
  if (e) return e;
  if (pthread_mutex_trylock(&recording)) /* never waits, or waits for us */
    return "another activity profile is running in this process (CUPTI's "
           "records are one process's): profile one graph at a time";
  CUptiResult r = CUPTI_SUCCESS;
  if (!registered) {
    r = cg_cupti.cuptiActivityRegisterCallbacks(request, complete);
    registered = r == CUPTI_SUCCESS;
    if (!registered) e = why("cuptiActivityRegisterCallbacks", r);
  }
  if (!e && (r = cg_cupti.cuptiActivityEnable(
                 CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) != CUPTI_SUCCESS)
    e = why("cuptiActivityEnable", r);
  pthread_mutex_lock(&lock);
  nruns = taken = 0;
  oom = 0;
  pthread_mutex_unlock(&lock);
  if (e) pthread_mutex_unlock(&recording);
  return e;
}

const char *cg_cupti_take(const cg_kernel_run **out, size_t *n) {
  CUptiResult r = cg_cupti.cuptiActivityFlushAll(
      CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (r != CUPTI_SUCCESS) return why("cuptiActivityFlushAll", r);
  pthread_mutex_lock(&lock);
  *out = runs + taken;
  *n = nruns - taken;
  taken = nruns;
  int lost = oom;
  pthread_mutex_unlock(&lock);
  return lost ? "out of host memory for CUPTI's records" : NULL;
}

void cg_cupti_stop(void) {
  cg_cupti.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cg_cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  pthread_mutex_unlock(&recording);
}
