/* CUPTI's activity records of kernels, as far as g:profile reads them: the
   software driver stands in for libcupti itself (the runtime finds it by
   cugraph_cupti_standin). While kernel activity is on, every kernel a graph
   node runs leaves a record of the fifth kernel record's layout (its kind,
   start and end in ns of CLOCK_MONOTONIC, the node's id), delivered through
   the registered buffer callbacks at a flush; the ids are those
   cuptiGetGraphNodeId gives the nodes, which bodies and clones' copies
   keep, and for an instantiated graph's nodes its own id
   (cuptiGetGraphExecId) << 32 | the node's position there. These calls take no lock of the driver's: a flush
   calls back into the runtime, which reads the records here. */
#include "double.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

extern const char *const cugraph_cupti_standin;
#ifdef CUDA_SIM
const char *const cugraph_cupti_standin = "libcuda-sim.so";
#else
const char *const cugraph_cupti_standin = "libcuda-double.so";
#endif

typedef int CUptiResult;
enum { OK = 0, INVALID_PARAMETER = 1, NOT_INITIALIZED = 15,
       MAX_LIMIT_REACHED = 12, NOT_COMPATIBLE = 19 };
enum { KIND_CONCURRENT_KERNEL = 10, RECORD = 160 };

typedef void (*request_fn)(uint8_t **buffer, size_t *size, size_t *max);
typedef void (*complete_fn)(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                            size_t size, size_t valid);

typedef struct run { uint64_t node, start, end; } run;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static request_fn requested;
static complete_fn completed;
static int kernels_on;
static run *pending;
static size_t npending, cpending;
static size_t launch0; /* the first record of the launch running */

void dbl_activity_launch(void) {
  pthread_mutex_lock(&lock);
  launch0 = npending;
  pthread_mutex_unlock(&lock);
}

uint32_t dbl_graph_id(void) {
  static uint32_t ids; /* under the driver's lock */
  return ++ids;
}

int dbl_activity_on(void) { return __atomic_load_n(&kernels_on, __ATOMIC_RELAXED); }

uint64_t dbl_activity_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void dbl_activity_kernel(uint64_t node, uint64_t start, uint64_t end) {
  pthread_mutex_lock(&lock);
  for (size_t i = launch0; kernels_on && i < npending; i++)
    if (pending[i].node == node) { /* it ran before in this launch */
      memmove(pending + i, pending + i + 1,
              (npending - i - 1) * sizeof *pending);
      npending--;
      break;
    }
  if (kernels_on && npending == cpending) {
    size_t c = cpending ? 2 * cpending : 256;
    run *v = realloc(pending, c * sizeof *v);
    if (v) pending = v, cpending = c;
  }
  if (kernels_on && npending < cpending)
    pending[npending++] = (run){ node, start, end };
  pthread_mutex_unlock(&lock);
}

CUptiResult cuptiActivityRegisterCallbacks(request_fn req, complete_fn done);
CUptiResult cuptiActivityRegisterCallbacks(request_fn req, complete_fn done) {
  if (!req || !done) return INVALID_PARAMETER;
  pthread_mutex_lock(&lock);
  requested = req;
  completed = done;
  pthread_mutex_unlock(&lock);
  return OK;
}

static CUptiResult set_kind(int kind, int on) {
  if (kind != KIND_CONCURRENT_KERNEL) return NOT_COMPATIBLE;
  pthread_mutex_lock(&lock);
  CUptiResult r = requested ? OK : NOT_INITIALIZED;
  if (!r) __atomic_store_n(&kernels_on, on, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&lock);
  return r;
}

CUptiResult cuptiActivityEnable(int kind);
CUptiResult cuptiActivityEnable(int kind) { return set_kind(kind, 1); }
CUptiResult cuptiActivityDisable(int kind);
CUptiResult cuptiActivityDisable(int kind) { return set_kind(kind, 0); }

/* Hands every pending record over, in buffers the runtime gives. */
CUptiResult cuptiActivityFlushAll(uint32_t flag);
CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  (void)flag;
  pthread_mutex_lock(&lock);
  run *v = pending;
  size_t n = npending;
  request_fn req = requested;
  complete_fn done = completed;
  pending = NULL;
  npending = cpending = launch0 = 0;
  pthread_mutex_unlock(&lock);
  for (size_t i = 0; req && i < n;) {
    uint8_t *buf = NULL;
    size_t size = 0, max = 0;
    req(&buf, &size, &max);
    if (!buf || size < RECORD) break;
    size_t k = 0;
    for (; i < n && (k + 1) * RECORD <= size; i++, k++) {
      uint8_t *p = buf + k * RECORD;
      uint32_t kind = KIND_CONCURRENT_KERNEL;
      memset(p, 0, RECORD);
      memcpy(p, &kind, 4);
      memcpy(p + 16, &v[i].start, 8);
      memcpy(p + 24, &v[i].end, 8);
      memcpy(p + 144, &v[i].node, 8);
    }
    done(NULL, 0, buf, size, k * RECORD);
  }
  free(v);
  return OK;
}

/* The record after *record in buffer (the first when *record is NULL or
   outside it); MAX_LIMIT_REACHED after the last. */
CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid,
                                       void **record);
CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid,
                                       void **record) {
  if (!buffer || !record) return INVALID_PARAMETER;
  uint8_t *p = *record;
  p = p >= buffer && p < buffer + valid ? p + RECORD : buffer;
  if (p + RECORD > buffer + valid) return MAX_LIMIT_REACHED;
  *record = p;
  return OK;
}

CUptiResult cuptiGetGraphNodeId(CUgraphNode node, uint64_t *id);
CUptiResult cuptiGetGraphNodeId(CUgraphNode node, uint64_t *id) {
  if (!node || !id) return INVALID_PARAMETER;
  *id = node->op.id;
  return OK;
}

/* An instantiated graph's id: the one its nodes' records carry above
   their positions (graph_exec.c numbers them). */
CUptiResult cuptiGetGraphExecId(CUgraphExec exec, uint32_t *id);
CUptiResult cuptiGetGraphExecId(CUgraphExec exec, uint32_t *id) {
  if (!exec || !id) return INVALID_PARAMETER;
  *id = dbl_exec_id(exec);
  return OK;
}

/* The clock of the records' start and end. */
CUptiResult cuptiGetTimestamp(uint64_t *ts);
CUptiResult cuptiGetTimestamp(uint64_t *ts) {
  if (!ts) return INVALID_PARAMETER;
  *ts = dbl_activity_now();
  return OK;
}

CUptiResult cuptiGetResultString(CUptiResult r, const char **s);
CUptiResult cuptiGetResultString(CUptiResult r, const char **s) {
  if (!s) return INVALID_PARAMETER;
  *s = r == OK ? "CUPTI_SUCCESS"
     : r == INVALID_PARAMETER ? "CUPTI_ERROR_INVALID_PARAMETER"
     : r == NOT_INITIALIZED ? "CUPTI_ERROR_NOT_INITIALIZED"
     : r == MAX_LIMIT_REACHED ? "CUPTI_ERROR_MAX_LIMIT_REACHED"
     : r == NOT_COMPATIBLE ? "CUPTI_ERROR_NOT_COMPATIBLE"
     : "CUPTI_ERROR_UNKNOWN";
  return OK;
}
