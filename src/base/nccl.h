/* The door to NCCL: its ABI (the types and calls the runtime uses, declared
   here so that no NCCL header is needed to build) and the library, loaded
   with dlopen on first use (CUGRAPH_LUA_LIBNCCL names another; with the
   software driver, its NCCL stand-in beside it is the default). */
#ifndef CUGRAPH_NCCL_H
#define CUGRAPH_NCCL_H

#include <cuda.h>

typedef struct ncclComm *ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef int ncclResult_t; /* an enum of int size in nccl.h */
enum { ncclSuccess = 0, ncclInProgress = 7 };
enum { ncclInt8 = 0, ncclUint8 = 1, ncclInt32 = 2, ncclUint32 = 3,
       ncclInt64 = 4, ncclUint64 = 5, ncclFloat16 = 6, ncclFloat32 = 7,
       ncclFloat64 = 8, ncclBfloat16 = 9 };

#define CG_NCCL_FUNCS(X) \
  X(ncclGetVersion, (int *)) \
  X(ncclGetUniqueId, (ncclUniqueId *)) \
  X(ncclCommInitRank, (ncclComm_t *, int, ncclUniqueId, int)) \
  X(ncclCommInitAll, (ncclComm_t *, int, const int *)) \
  X(ncclCommDestroy, (ncclComm_t)) \
  X(ncclCommAbort, (ncclComm_t)) \
  X(ncclAllReduce, (const void *, void *, size_t, int, int, ncclComm_t, \
                    CUstream)) \
  X(ncclBroadcast, (const void *, void *, size_t, int, int, ncclComm_t, \
                    CUstream)) \
  X(ncclReduce, (const void *, void *, size_t, int, int, int, ncclComm_t, \
                 CUstream)) \
  X(ncclAllGather, (const void *, void *, size_t, int, ncclComm_t, CUstream)) \
  X(ncclReduceScatter, (const void *, void *, size_t, int, int, ncclComm_t, \
                        CUstream)) \
  X(ncclSend, (const void *, size_t, int, int, ncclComm_t, CUstream)) \
  X(ncclRecv, (void *, size_t, int, int, ncclComm_t, CUstream)) \
  X(ncclGroupStart, (void)) \
  X(ncclGroupEnd, (void))

#define CG_NCCL_FIELD(f, args) ncclResult_t (*f) args;
typedef struct cg_nccl_table {
  CG_NCCL_FUNCS(CG_NCCL_FIELD)
  const char *(*ncclGetErrorString)(ncclResult_t);
  const char *(*ncclGetLastError)(ncclComm_t); /* NCCL 2.13; may be NULL */
} cg_nccl_table;
#undef CG_NCCL_FIELD

extern cg_nccl_table cg_nccl;

/* Loads NCCL once per process: NULL, or why it is unusable. */
const char *cg_nccl_load(void);

/* "ncclInvalidArgument", or NULL for a result NCCL does not name. */
const char *cg_nccl_result_name(ncclResult_t r);

#endif
