/* The door to CUPTI's activity records: the part of its ABI the runtime
   uses (declared here, so that no CUPTI header is needed to build) and the
   library, loaded with dlopen on first use (CUGRAPH_LUA_LIBCUPTI names
   another; with the software driver, the driver itself stands in). g:profile
   reads kernel records from it for the nodes it cannot time with events
   (those in the bodies of conditional nodes), and the script's trace
   (trace.c) to name every kernel a graph's replays run. */
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
  X(cuptiGetTimestamp, (uint64_t *)) \
  X(cuptiGetResultString, (CUptiResult, const char **))
/* optional: NULL where CUPTI is older than CUDA 12.3's */
#define CG_CUPTI_OPTIONAL(X) \
  X(cuptiGetGraphExecId, (CUgraphExec, uint32_t *))

#define CG_CUPTI_FIELD(f, args) CUptiResult (*f) args;
typedef struct cg_cupti_table {
  CG_CUPTI_FUNCS(CG_CUPTI_FIELD)
  CG_CUPTI_OPTIONAL(CG_CUPTI_FIELD)
} cg_cupti_table;
#undef CG_CUPTI_FIELD

extern cg_cupti_table cg_cupti;

/* One kernel's run as an activity record says: the graph node that ran
   it (CUPTI's id; 0: not a graph's), when, in ns of CUPTI's clock
   (cuptiGetTimestamp), and the device and stream it ran on. */
typedef struct cg_kernel_run {
  uint64_t node, start, end;
  uint32_t device, stream;
} cg_kernel_run;

/* One reader of the recording: the runs it has not taken yet are those
   of the store from next on. Recording is reference-counted: each reader
   started keeps kernel activity on, all share one store of at most
   CG_CUPTI_MAX runs (those past it are dropped and counted), which is
   emptied when the last reader stops. */
enum { CG_CUPTI_MAX = 1 << 21 };
typedef struct cg_cupti_reader {
  int on;               /* started and not stopped */
  size_t next;          /* the store's first run not taken */
  size_t dropped0;      /* the store's dropped runs when it started */
  cg_kernel_run *v;     /* what the last take copied */
  size_t cap;
} cg_cupti_reader;

/* Loads CUPTI once per process: NULL, or why it is unusable. */
const char *cg_cupti_load(void);
/* Starts r reading kernel runs from now on, turning recording on for the
   first reader: NULL, or why not (another tool holds CUPTI). */
const char *cg_cupti_start(cg_cupti_reader *r);
/* The runs recorded since r's last take (all work the device finished
   before the call), copied into r: *runs, valid until its next take or
   stop; *dropped (may be NULL): runs lost to the store's cap since r
   started. NULL or why. */
const char *cg_cupti_take(cg_cupti_reader *r, const cg_kernel_run **runs,
                          size_t *n, size_t *dropped);
/* Stops r (idempotent): the last reader turns recording off. */
void cg_cupti_stop(cg_cupti_reader *r);

#endif
