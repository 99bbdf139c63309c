/* The door to CUPTI's activity records: the part of its ABI the runtime
   uses (declared here, so that no CUPTI header is needed to build) and the
   library, loaded with dlopen on first use (CUGRAPH_LUA_LIBCUPTI names
   another; with the software driver, the driver itself stands in). g:profile
   reads kernel records from it for the nodes it cannot time with events:
   those in the bodies of conditional nodes. */
#ifndef CUGRAPH_CUPTI_H
#define CUGRAPH_CUPTI_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

typedef int CUptiResult;
enum { CUPTI_SUCCESS = 0 };
enum { CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL = 10 };
enum { CUPTI_ACTIVITY_FLAG_FLUSH_FORCED = 1 };

typedef void (*cg_cupti_request_fn)(uint8_t **buffer, size_t *size,
                                    size_t *max_records);
typedef void (*cg_cupti_complete_fn)(CUcontext ctx, uint32_t stream,
                                     uint8_t *buffer, size_t size,
                                     size_t valid);

#define CG_CUPTI_FUNCS(X) \
  X(cuptiActivityRegisterCallbacks, (cg_cupti_request_fn, \
                                     cg_cupti_complete_fn)) \
  X(cuptiActivityEnable, (int)) \
  X(cuptiActivityDisable, (int)) \
  X(cuptiActivityFlushAll, (uint32_t)) \
  X(cuptiActivityGetNextRecord, (uint8_t *, size_t, void **)) \
  X(cuptiGetGraphNodeId, (CUgraphNode, uint64_t *)) \
  X(cuptiGetResultString, (CUptiResult, const char **))

#define CG_CUPTI_FIELD(f, args) CUptiResult (*f) args;
typedef struct cg_cupti_table {
  CG_CUPTI_FUNCS(CG_CUPTI_FIELD)
} cg_cupti_table;
#undef CG_CUPTI_FIELD

extern cg_cupti_table cg_cupti;

/* One kernel's run as an activity record says: the graph node that ran
   it (CUPTI's id; 0: not a graph's) and when, in ns. */
typedef struct cg_kernel_run {
  uint64_t node, start, end;
} cg_kernel_run;

/* Loads CUPTI once per process: NULL, or why it is unusable. */
const char *cg_cupti_load(void);
/* Starts recording kernel runs: NULL, or why not (another tool holds
   CUPTI). One recording at a time in the process: a second start waits
   for the first's stop. */
const char *cg_cupti_start(void);
/* The runs recorded since the last take (all work the device finished
   before the call), in *runs, valid until the next call; NULL or why. */
const char *cg_cupti_take(const cg_kernel_run **runs, size_t *n);
/* Stops recording (idempotent after a start). */
void cg_cupti_stop(void);

#endif
