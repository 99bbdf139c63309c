/* A test double of libnccl.so.2, for the specs on machines without GPUs.
   Built as build/libnccl-double.so and named by CUGRAPH_LUA_LIBNCCL, it
   exports the NCCL calls the runtime makes and does real collectives on
   the test double of the driver, whose device memory is host memory.

   The ranks of a communicator share one POSIX shared memory segment, named
   by the unique id: a staging area per rank, a mailbox per rank for sends,
   and a barrier. Ranks may live in several processes (cuda.comm, one GPU
   per process, as under the launcher) or in one (ncclCommInitAll). A
   collective copies this rank's data to its staging area, waits for every
   rank at the barrier, computes this rank's result from all the staging
   areas, and waits again: ranks in several processes run their collectives
   concurrently. In one process, the calls of a group (ncclGroupStart/End)
   on all the ranks of an ncclCommInitAll run together at the group's end,
   each staged on every rank before any finishes it. A call that one thread
   makes on a communicator of ncclCommInitAll outside such a group fails
   with ncclInvalidUsage, where NCCL would hang.

   On a capturing stream (the driver double's cuStreamIsCapturing), a call
   becomes a host node (cuLaunchHostFunc) that does the collective each
   time the graph runs; the node's data lives as long as the communicator.
   Otherwise it runs at once: the double's streams are synchronous, so all
   earlier work is done.

   Environment: NCCL_DOUBLE_BYTES, the largest message (per rank and call)
   the staging areas hold (32 MiB). NCCL_DOUBLE_FAULT=name:n:code[,...]
   makes the n-th call of an entry point fail with result code, before it
   does anything; NCCL_DOUBLE_TRACE=path writes "name calls" lines, one
   per entry point called, to path at exit. A wait longer than 60 s (a rank that never comes) fails
   with ncclSystemError. */
#ifndef NCCL_INT_H
#define NCCL_INT_H

#include <cuda.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* What the files share stays inside the library, which exports NCCL's
   entry points only. */
#pragma GCC visibility push(hidden)

typedef enum { ncclSuccess, ncclUnhandledCudaError, ncclSystemError,
               ncclInternalError, ncclInvalidArgument, ncclInvalidUsage,
               ncclRemoteError, ncclInProgress } ncclResult_t;
typedef struct { char internal[128]; } ncclUniqueId;
enum { I8, U8, I32, U32, I64, U64, F16, F32, F64, BF16, NTYPES };
enum { SUM, PROD, MAX, MIN, AVG, NOPS };
static const size_t type_size[NTYPES] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};

#define MAX_RANKS 8
#define WAIT_S 60

typedef struct shared {
  atomic_uint joined;           /* ranks that opened the segment */
  atomic_uint arrived, generation; /* the barrier */
  atomic_uint sent[MAX_RANKS][MAX_RANKS], taken[MAX_RANKS][MAX_RANKS];
  size_t cap;                   /* bytes of each staging area */
} shared;

/* The segment of one clique, mapped once per process. */
typedef struct clique {
  struct clique *next;
  char name[64];
  int nranks, refs;
  shared *sh;
  size_t size;
} clique;

enum { C_ALLREDUCE, C_REDUCE, C_BROADCAST, C_ALLGATHER, C_REDUCESCATTER,
       C_SEND, C_RECV };

typedef struct call {
  struct call *next;            /* the communicator's list, or a group's */
  struct ncclComm *comm;
  int kind, type, op, root;     /* root: also the peer of send and recv */
  const void *send;
  void *recv;
  size_t count;
  CUstream stream;
  int done;                     /* run_together: finished */
} call;

struct ncclComm {
  struct ncclComm *next;        /* every live one, in a list: one whose
                                   destroy failed stays reachable */
  clique *q;
  int rank, nranks, dev, local; /* local: ranks of the clique in this
                                   process (ncclCommInitAll) */
  call *kept;                   /* captured calls, freed with the comm */
};
typedef struct ncclComm *ncclComm_t;

static inline int p2p(const call *c) {
  return c->kind == C_SEND || c->kind == C_RECV;
}

/* ranks.c: the data of a call between the ranks of a clique */
clique *ranks_open_clique(const ncclUniqueId *id, int nranks, int create);
void ranks_close_clique(clique *q);
int ranks_wait_for(atomic_uint *v, unsigned old, int differs, int wait_s);
int ranks_stage_call(const call *c, int wait_s);
int ranks_finish_call(const call *c, int wait_s);
int ranks_run(const call *c);

#pragma GCC visibility pop

#endif
