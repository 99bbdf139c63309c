/* The NCCL stand-in's entry points: injected faults and the trace, the
   driver double's capture, communicators, calls and groups. What the
   stand-in is: nccl_int.h. */
#define _GNU_SOURCE
#include "nccl_int.h"
#include "standin.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* NCCL's entry points, as nccl.h declares them (its enums as ints) */
ncclResult_t ncclGetVersion(int *version);
ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id,
                              int rank);
ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device);
const char *ncclGetErrorString(ncclResult_t r);
const char *ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count,
                           int type, int op, ncclComm_t comm, CUstream s);
ncclResult_t ncclReduce(const void *send, void *recv, size_t count, int type,
                        int op, int root, ncclComm_t comm, CUstream s);
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count,
                           int type, int root, ncclComm_t comm, CUstream s);
ncclResult_t ncclAllGather(const void *send, void *recv, size_t count,
                           int type, ncclComm_t comm, CUstream s);
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count,
                               int type, int op, ncclComm_t comm, CUstream s);
ncclResult_t ncclSend(const void *send, size_t count, int type, int peer,
                      ncclComm_t comm, CUstream s);
ncclResult_t ncclRecv(void *recv, size_t count, int type, int peer,
                      ncclComm_t comm, CUstream s);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long ids;
static char last_error[256];   /* per process: the double is driven by one thread at a time */
static int group_depth;
static call *group, **group_tail; /* NULL: &group */

static ncclResult_t fail(ncclResult_t r, const char *msg) {
  snprintf(last_error, sizeof last_error, "%s", msg);
  return r;
}

static standin_calls counts = { PTHREAD_MUTEX_INITIALIZER, {{0, 0}} };
static int tracing;

static void write_trace(void) {
  FILE *f = fopen(getenv("NCCL_DOUBLE_TRACE"), "w");
  if (!f) return;
  for (int i = 0; i < 32 && counts.at[i].name; i++)
    fprintf(f, "%s %lu\n", counts.at[i].name, counts.at[i].calls);
  fclose(f);
}

/* Counts a call of name; NCCL_DOUBLE_FAULT: the result it fails with, or
   0. */
static ncclResult_t injected(const char *name) {
  pthread_mutex_lock(&lock);
  const char *trace = getenv("NCCL_DOUBLE_TRACE");
  if (trace && *trace && !tracing) {
    tracing = 1;
    atexit(write_trace);
  }
  pthread_mutex_unlock(&lock);
  int code = standin_fault("NCCL_DOUBLE_FAULT", name,
                           standin_count(&counts, name));
  return code ? fail((ncclResult_t)code, "injected by NCCL_DOUBLE_FAULT")
              : ncclSuccess;
}

#define ENTRY(name) do { \
    ncclResult_t r_ = injected(#name); \
    if (r_) return r_; \
  } while (0)

/* -- the driver double's capture --------------------------------------- */

static standin_capturing_fn is_capturing;
static standin_host_fn launch_host;

static void find_driver(void) { standin_driver(&is_capturing, &launch_host); }

static void host_node(void *p) {
  if (ranks_run(p))
    fprintf(stderr, "nccl double: a captured collective timed out waiting "
            "for the other ranks\n");
}

/* -- communicators -------------------------------------------------------- */

ncclResult_t ncclGetVersion(int *version) {
  if (!version) return fail(ncclInvalidArgument, "version is NULL");
  *version = 22809;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  ENTRY(ncclGetUniqueId);
  if (!id) return fail(ncclInvalidArgument, "id is NULL");
  memset(id, 0, sizeof *id);
  pthread_mutex_lock(&lock);
  unsigned long n = ++ids;
  pthread_mutex_unlock(&lock);
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  snprintf(id->internal, sizeof id->internal, "cgnccl:/cgnccl-%d-%lu-%lx",
           (int)getpid(), n, (unsigned long)t.tv_nsec);
  return ncclSuccess;
}

static ncclComm_t live_comms;

static ncclComm_t new_comm(clique *q, int rank, int nranks, int dev,
                           int local) {
  ncclComm_t c = calloc(1, sizeof *c);
  if (!c) return NULL;
  pthread_mutex_lock(&lock);
  c->next = live_comms;
  live_comms = c;
  pthread_mutex_unlock(&lock);
  c->q = q;
  c->rank = rank;
  c->nranks = nranks;
  c->dev = dev;
  c->local = local;
  return c;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id,
                              int rank) {
  ENTRY(ncclCommInitRank);
  if (!comm || nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, "bad rank or nranks (the double "
                "takes up to 8 ranks)");
  if (strncmp(id.internal, "cgnccl:/", 8))
    return fail(ncclInvalidArgument, "not an id of this library");
  pthread_mutex_lock(&lock);
  if (!launch_host) find_driver();
  clique *q = ranks_open_clique(&id, nranks, 0);
  pthread_mutex_unlock(&lock);
  if (!q) return fail(ncclSystemError, "cannot map the shared segment");
  atomic_fetch_add(&q->sh->joined, 1);
  if (ranks_wait_for(&q->sh->joined, (unsigned)nranks, 0, WAIT_S)) {
    pthread_mutex_lock(&lock);
    ranks_close_clique(q);
    pthread_mutex_unlock(&lock);
    return fail(ncclSystemError, "timed out waiting for the other ranks");
  }
  if (rank == 0) shm_unlink(q->name); /* every rank has it mapped */
  *comm = new_comm(q, rank, nranks, -1, 1);
  return *comm ? ncclSuccess : fail(ncclSystemError, "out of memory");
}

ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist) {
  ENTRY(ncclCommInitAll);
  if (!comms || ndev < 1 || ndev > MAX_RANKS)
    return fail(ncclInvalidArgument, "bad ndev (the double takes up to 8)");
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  pthread_mutex_lock(&lock);
  if (!launch_host) find_driver();
  clique *q = ranks_open_clique(&id, ndev, 1);
  if (q) q->refs += ndev - 1;
  pthread_mutex_unlock(&lock);
  if (!q) return fail(ncclSystemError, "cannot map the shared segment");
  atomic_store(&q->sh->joined, (unsigned)ndev);
  for (int i = 0; i < ndev; i++) {
    comms[i] = new_comm(q, i, ndev, devlist ? devlist[i] : i, ndev);
    if (!comms[i]) abort();
  }
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  ENTRY(ncclCommDestroy);
  if (!comm) return fail(ncclInvalidArgument, "comm is NULL");
  for (call *c = comm->kept, *next; c; c = next) {
    next = c->next;
    free(c);
  }
  pthread_mutex_lock(&lock);
  ranks_close_clique(comm->q);
  ncclComm_t *p = &live_comms;
  while (*p && *p != comm) p = &(*p)->next;
  if (*p) *p = comm->next;
  pthread_mutex_unlock(&lock);
  free(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
  if (!comm || !count) return fail(ncclInvalidArgument, "NULL argument");
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
  if (!comm || !rank) return fail(ncclInvalidArgument, "NULL argument");
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device) {
  if (!comm || !device) return fail(ncclInvalidArgument, "NULL argument");
  *device = comm->dev;
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r) {
  static const char *const s[] = {
    "no error", "unhandled cuda error", "unhandled system error",
    "internal error", "invalid argument", "invalid usage", "remote error",
    "operation in progress"
  };
  return (unsigned)r < sizeof s / sizeof *s ? s[r] : "unknown result";
}

const char *ncclGetLastError(ncclComm_t comm) {
  (void)comm;
  return last_error;
}

/* -- calls ---------------------------------------------------------------- */

static int capturing(CUstream s) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  return is_capturing && is_capturing(s, &st) == CUDA_SUCCESS &&
         st != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* Runs or records one call (not in a group). */
static ncclResult_t issue(call *c) {
  if (capturing(c->stream)) {
    if (!launch_host) return fail(ncclUnhandledCudaError, "no host nodes");
    call *k = malloc(sizeof *k);
    if (!k) return fail(ncclSystemError, "out of memory");
    *k = *c;
    k->next = c->comm->kept;
    c->comm->kept = k;
    return launch_host(c->stream, host_node, k) == CUDA_SUCCESS
               ? ncclSuccess
               : fail(ncclUnhandledCudaError, "cuLaunchHostFunc failed");
  }
  standin_settle(c->stream);
  return ranks_run(c) ? fail(ncclSystemError, "timed out waiting for the other "
                             "ranks") : ncclSuccess;
}

static ncclResult_t enqueue(ncclComm_t comm, int kind, const void *send,
                            void *recv, size_t count, int type, int op,
                            int root, CUstream stream) {
  if (!comm) return fail(ncclInvalidArgument, "comm is NULL");
  if (type < 0 || type >= NTYPES) return fail(ncclInvalidArgument, "bad type");
  if (op < 0 || op >= NOPS) return fail(ncclInvalidArgument, "bad op");
  if (root < 0 || root >= comm->nranks)
    return fail(ncclInvalidArgument, "bad root or peer");
  size_t bytes = count * type_size[type];
  size_t cap = comm->q->sh->cap;
  if ((kind == C_REDUCESCATTER && bytes > cap / (size_t)comm->nranks) ||
      ((kind == C_SEND || kind == C_RECV) && bytes > cap / MAX_RANKS) ||
      bytes > cap)
    return fail(ncclInvalidArgument, "message larger than the double's "
                "staging area (NCCL_DOUBLE_BYTES)");
  call c = {NULL, comm, kind, type, op, root, send, recv, count, stream, 0};
  if (group_depth) {
    call *k = malloc(sizeof *k);
    if (!k) return fail(ncclSystemError, "out of memory");
    *k = c;
    *(group_tail ? group_tail : &group) = k;
    group_tail = &k->next;
    return ncclSuccess;
  }
  if (comm->local > 1)
    return fail(ncclInvalidUsage, "a call on one communicator of several "
                "that one thread drives must be inside a group "
                "(ncclGroupStart/End), else it would hang");
  return issue(&c);
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count,
                           int type, int op, ncclComm_t comm, CUstream s) {
  ENTRY(ncclAllReduce);
  return enqueue(comm, C_ALLREDUCE, send, recv, count, type, op, 0, s);
}

ncclResult_t ncclReduce(const void *send, void *recv, size_t count, int type,
                        int op, int root, ncclComm_t comm, CUstream s) {
  ENTRY(ncclReduce);
  return enqueue(comm, C_REDUCE, send, recv, count, type, op, root, s);
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count,
                           int type, int root, ncclComm_t comm, CUstream s) {
  ENTRY(ncclBroadcast);
  return enqueue(comm, C_BROADCAST, send, recv, count, type, 0, root, s);
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count,
                           int type, ncclComm_t comm, CUstream s) {
  ENTRY(ncclAllGather);
  return enqueue(comm, C_ALLGATHER, send, recv, count, type, 0, 0, s);
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count,
                               int type, int op, ncclComm_t comm,
                               CUstream s) {
  ENTRY(ncclReduceScatter);
  return enqueue(comm, C_REDUCESCATTER, send, recv, count, type, op, 0, s);
}

ncclResult_t ncclSend(const void *send, size_t count, int type, int peer,
                      ncclComm_t comm, CUstream s) {
  ENTRY(ncclSend);
  return enqueue(comm, C_SEND, send, NULL, count, type, 0, peer, s);
}

ncclResult_t ncclRecv(void *recv, size_t count, int type, int peer,
                      ncclComm_t comm, CUstream s) {
  ENTRY(ncclRecv);
  return enqueue(comm, C_RECV, NULL, recv, count, type, 0, peer, s);
}

ncclResult_t ncclGroupStart(void) {
  ENTRY(ncclGroupStart);
  group_depth++;
  return ncclSuccess;
}

/* The calls of a group, all ranks of one clique in this thread: each
   lane's sends, then its receives, then the collectives in order, each
   staged on every lane before any lane finishes it. */
static ncclResult_t run_together(call **v, int n) {
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < n; i++)
      if (v[i]->kind == (pass ? C_RECV : C_SEND) &&
          (pass ? ranks_finish_call(v[i], 0) : ranks_stage_call(v[i], 0)))
        return fail(ncclInvalidUsage, "unmatched send or receive in a group");
  for (int i = 0; i < n; i++) {
    if (p2p(v[i]) || v[i]->done) continue;
    /* v[i] and the calls of the other ranks with the same position */
    call *same[MAX_RANKS];
    int k = 0;
    for (int j = i; j < n && k < MAX_RANKS; j++)
      if (!p2p(v[j]) && !v[j]->done) {
        int dup = 0;
        for (int m = 0; m < k; m++) dup |= same[m]->comm == v[j]->comm;
        if (!dup) same[k++] = v[j];
      }
    if (k != v[i]->comm->nranks)
      return fail(ncclInvalidUsage, "a collective some ranks of the group "
                  "did not call");
    for (int m = 0; m < k; m++) ranks_stage_call(same[m], 0);
    for (int m = 0; m < k; m++) {
      ranks_finish_call(same[m], 0);
      same[m]->done = 1;
    }
  }
  return ncclSuccess;
}

/* Calls on a capturing stream become host nodes whatever the group; the
   others run here: one communicator's in order, several (all the ranks of
   one ncclCommInitAll) together. */
ncclResult_t ncclGroupEnd(void) {
  ENTRY(ncclGroupEnd);
  if (!group_depth) return fail(ncclInvalidUsage, "no group started");
  if (--group_depth) return ncclSuccess;
  call *v[256];
  int n = 0, comms = 0;
  ncclResult_t r = ncclSuccess;
  for (call *c = group; c && !r; c = c->next) {
    if (n == 256) r = fail(ncclInvalidUsage, "too many calls in a group");
    else if (capturing(c->stream)) r = issue(c);
    else {
      int seen = 0;
      for (int i = 0; i < n; i++) seen |= v[i]->comm == c->comm;
      comms += !seen;
      if (n && v[0]->comm->q != c->comm->q)
        r = fail(ncclInvalidUsage, "the double groups calls of one clique "
                 "only");
      v[n++] = c;
    }
  }
  if (!r && n && comms == 1 && v[0]->comm->local > 1) {
    r = fail(ncclInvalidUsage, "a group of one communicator of several that "
             "one thread drives would hang");
  } else if (!r && n && comms == 1) {
    for (int pass = 0; pass < 2 && !r; pass++) /* sends first */
      for (int i = 0; i < n && !r; i++)
        if ((v[i]->kind == C_SEND) == (pass == 0)) r = issue(v[i]);
  } else if (!r && n) {
    if (comms != v[0]->comm->nranks || v[0]->comm->local != comms)
      r = fail(ncclInvalidUsage, "a group of several communicators must "
               "hold all the ranks of one ncclCommInitAll in the double");
    else r = run_together(v, n);
  }
  for (call *c = group, *next; c; c = next) {
    next = c->next;
    free(c);
  }
  group = NULL;
  group_tail = NULL;
  return r;
}
