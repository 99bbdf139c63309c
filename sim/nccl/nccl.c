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
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
static clique *cliques;
static unsigned long ids;
static char last_error[256];   /* per process: the double is driven by one thread at a time */
static int group_depth;
static call *group, **group_tail; /* NULL: &group */

static ncclResult_t fail(ncclResult_t r, const char *msg) {
  snprintf(last_error, sizeof last_error, "%s", msg);
  return r;
}

static struct { const char *name; unsigned long calls; } counts[32];
static int tracing;

static void write_trace(void) {
  FILE *f = fopen(getenv("NCCL_DOUBLE_TRACE"), "w");
  if (!f) return;
  for (int i = 0; i < 32 && counts[i].name; i++)
    fprintf(f, "%s %lu\n", counts[i].name, counts[i].calls);
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
  int i = 0;
  while (i < 32 && counts[i].name && strcmp(counts[i].name, name)) i++;
  unsigned long n = 0;
  if (i < 32) {
    counts[i].name = name;
    n = ++counts[i].calls;
  }
  pthread_mutex_unlock(&lock);
  const char *spec = getenv("NCCL_DOUBLE_FAULT");
  if (!spec || !*spec) return ncclSuccess;
  size_t len = strlen(name);
  for (const char *p = spec; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
    unsigned long at;
    int code;
    if (!strncmp(p, name, len) && p[len] == ':' &&
        sscanf(p + len + 1, "%lu:%d", &at, &code) == 2 && at == n)
      return fail((ncclResult_t)code, "injected by NCCL_DOUBLE_FAULT");
  }
  return ncclSuccess;
}

#define ENTRY(name) do { \
    ncclResult_t r_ = injected(#name); \
    if (r_) return r_; \
  } while (0)

/* -- the driver double's capture --------------------------------------- */

typedef CUresult (*is_capturing_fn)(CUstream, CUstreamCaptureStatus *);
typedef CUresult (*host_func_fn)(CUstream, CUhostFn, void *);
static is_capturing_fn is_capturing;
static host_func_fn launch_host;

static void find_driver(void) {
  const char *name = getenv("CUGRAPH_LUA_LIBCUDA");
  void *lib = dlopen(name && *name ? name : "libcuda.so.1",
                     RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (!lib) return;
  void *p = dlsym(lib, "cuStreamIsCapturing");
  memcpy(&is_capturing, &p, sizeof p);
  p = dlsym(lib, "cuLaunchHostFunc");
  memcpy(&launch_host, &p, sizeof p);
}

/* -- waiting ------------------------------------------------------------- */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void nap(void) {
  struct timespec t = {0, 20000};
  nanosleep(&t, NULL);
}

/* Waits until *v != old (differs) or *v >= old (!differs); -1 after
   wait_s seconds. */
static int wait_for(atomic_uint *v, unsigned old, int differs, int wait_s) {
  double t0 = now();
  for (;;) {
    unsigned x = atomic_load(v);
    if (differs ? x != old : x >= old) return 0;
    if (now() - t0 >= wait_s) return -1;
    nap();
  }
}

static int barrier(shared *sh, int n) {
  unsigned gen = atomic_load(&sh->generation);
  if (atomic_fetch_add(&sh->arrived, 1) == (unsigned)n - 1) {
    atomic_store(&sh->arrived, 0);
    atomic_fetch_add(&sh->generation, 1);
    return 0;
  }
  return wait_for(&sh->generation, gen, 1, WAIT_S);
}

/* -- reduction ----------------------------------------------------------- */

static float half_to_float(uint16_t h, int bf) {
  if (bf) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  unsigned e = (h >> 10) & 31, m = h & 1023;
  float v = e == 31 ? (m ? NAN : INFINITY)
          : e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m + 1024), (int)e - 25);
  return h & 0x8000 ? -v : v;
}

static uint16_t float_to_half(float f, int bf) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if (bf) { /* round to nearest even */
    if (isnan(f)) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
  }
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  float a = fabsf(f);
  if (isnan(f)) return sign | 0x7e00;
  if (a >= 65520.0f) return sign | 0x7c00;
  if (a < ldexpf(1, -14)) return sign | (uint16_t)nearbyintf(a * ldexpf(1, 24));
  int e;
  float m = frexpf(a, &e); /* a = m 2^e, m in [0.5, 1) */
  unsigned r = (unsigned)nearbyintf(ldexpf(m, 11)); /* 11 bits */
  if (r == 2048) { r = 1024; e++; }
  return sign | (uint16_t)((unsigned)(e + 14) << 10 | (r - 1024));
}

#define REDUCE(T) { \
    T a, b; memcpy(&a, acc, sizeof a); memcpy(&b, x, sizeof b); \
    T r = op == PROD ? a * b : op == MAX ? (a > b ? a : b) \
        : op == MIN ? (a < b ? a : b) : a + b; \
    memcpy(acc, &r, sizeof r); break; }

/* acc = acc op x, one element */
static void combine(int type, int op, unsigned char *acc,
                    const unsigned char *x) {
  switch (type) {
  case I8: REDUCE(int8_t)
  case U8: REDUCE(uint8_t)
  case I32: REDUCE(int32_t)
  case U32: REDUCE(uint32_t)
  case I64: REDUCE(int64_t)
  case U64: REDUCE(uint64_t)
  case F32: REDUCE(float)
  case F64: REDUCE(double)
  default: { /* F16, BF16 through float */
    uint16_t ha, hb;
    memcpy(&ha, acc, 2);
    memcpy(&hb, x, 2);
    float a = half_to_float(ha, type == BF16), b = half_to_float(hb, type == BF16);
    float r = op == PROD ? a * b : op == MAX ? (a > b ? a : b)
            : op == MIN ? (a < b ? a : b) : a + b;
    ha = float_to_half(r, type == BF16);
    memcpy(acc, &ha, 2);
  }
  }
}

#define DIVIDE(T) { T a; memcpy(&a, p, sizeof a); a = (T)(a / (T)n); \
    memcpy(p, &a, sizeof a); break; }

static void divide(int type, unsigned char *p, int n) {
  switch (type) {
  case I8: DIVIDE(int8_t)
  case U8: DIVIDE(uint8_t)
  case I32: DIVIDE(int32_t)
  case U32: DIVIDE(uint32_t)
  case I64: DIVIDE(int64_t)
  case U64: DIVIDE(uint64_t)
  case F32: DIVIDE(float)
  case F64: DIVIDE(double)
  default: {
    uint16_t h;
    memcpy(&h, p, 2);
    h = float_to_half(half_to_float(h, type == BF16) / (float)n, type == BF16);
    memcpy(p, &h, 2);
  }
  }
}

/* out[i] = op over ranks r of stage(r)[off + i] */
static void reduce_into(const call *c, unsigned char *out, size_t off,
                        size_t count) {
  shared *sh = c->comm->q->sh;
  size_t es = type_size[c->type];
  unsigned char *base = (unsigned char *)(sh + 1);
  unsigned char *tmp = malloc(count ? count * es : 1);
  if (!tmp) abort();
  memcpy(tmp, base + off * es, count * es);
  for (int r = 1; r < c->comm->nranks; r++)
    for (size_t i = 0; i < count; i++)
      combine(c->type, c->op == AVG ? SUM : c->op, tmp + i * es,
              base + (size_t)r * sh->cap + (off + i) * es);
  if (c->op == AVG)
    for (size_t i = 0; i < count; i++)
      divide(c->type, tmp + i * es, c->comm->nranks);
  memcpy(out, tmp, count * es);
  free(tmp);
}

static unsigned char *stage(ncclComm_t comm, int rank) {
  return (unsigned char *)(comm->q->sh + 1) + (size_t)rank * comm->q->sh->cap;
}

/* The mailbox slot of sends from src to dst. */
static unsigned char *slot(ncclComm_t comm, int src, int dst) {
  shared *sh = comm->q->sh;
  size_t per = sh->cap / MAX_RANKS;
  return (unsigned char *)(sh + 1) + (size_t)(comm->nranks + src) * sh->cap +
         (size_t)dst * per;
}

/* A call in two halves around the barrier: stage puts this rank's part
   where the others read it (a send: in the mailbox, once it is free),
   finish makes this rank's result (a receive: from the mailbox, once it
   is full). wait_s bounds the mailbox waits; 0 or -1 when a rank never
   came. */
static int stage_call(const call *c, int wait_s) {
  ncclComm_t comm = c->comm;
  shared *sh = comm->q->sh;
  int me = comm->rank;
  size_t bytes = c->count * type_size[c->type];
  if (c->kind == C_RECV) return 0;
  if (c->kind == C_SEND) {
    atomic_uint *sent = &sh->sent[me][c->root], *taken = &sh->taken[me][c->root];
    if (wait_for(taken, atomic_load(sent), 0, wait_s)) return -1; /* free */
    memcpy(slot(comm, me, c->root), c->send, bytes);
    atomic_fetch_add(sent, 1);
    return 0;
  }
  size_t in = c->kind == C_REDUCESCATTER ? bytes * (size_t)comm->nranks : bytes;
  if (c->kind != C_BROADCAST || me == c->root)
    memcpy(stage(comm, me), c->send, in);
  return 0;
}

static int finish_call(const call *c, int wait_s) {
  ncclComm_t comm = c->comm;
  shared *sh = comm->q->sh;
  int n = comm->nranks, me = comm->rank;
  size_t bytes = c->count * type_size[c->type];
  switch (c->kind) {
  case C_SEND: break;
  case C_RECV: {
    atomic_uint *sent = &sh->sent[c->root][me], *taken = &sh->taken[c->root][me];
    if (wait_for(sent, atomic_load(taken) + 1, 0, wait_s)) return -1;
    memcpy(c->recv, slot(comm, c->root, me), bytes);
    atomic_fetch_add(taken, 1);
    break;
  }
  case C_ALLREDUCE: reduce_into(c, c->recv, 0, c->count); break;
  case C_REDUCE:
    if (me == c->root) reduce_into(c, c->recv, 0, c->count);
    break;
  case C_BROADCAST: memcpy(c->recv, stage(comm, c->root), bytes); break;
  case C_ALLGATHER:
    for (int r = 0; r < n; r++)
      memcpy((unsigned char *)c->recv + (size_t)r * bytes, stage(comm, r), bytes);
    break;
  default: reduce_into(c, c->recv, (size_t)me * c->count, c->count); break;
  }
  return 0;
}

static int p2p(const call *c) { return c->kind == C_SEND || c->kind == C_RECV; }

/* Does one call of a rank that has a thread of its own; 0, or -1 when a
   rank never came. */
static int run(const call *c) {
  if (p2p(c)) return stage_call(c, WAIT_S) || finish_call(c, WAIT_S) ? -1 : 0;
  shared *sh = c->comm->q->sh;
  if (stage_call(c, WAIT_S) || barrier(sh, c->comm->nranks)) return -1;
  finish_call(c, WAIT_S);
  return barrier(sh, c->comm->nranks);
}

static void host_node(void *p) {
  if (run(p))
    fprintf(stderr, "nccl double: a captured collective timed out waiting "
            "for the other ranks\n");
}

/* -- communicators -------------------------------------------------------- */

static size_t staging_bytes(void) {
  const char *s = getenv("NCCL_DOUBLE_BYTES");
  unsigned long long v = s && *s ? strtoull(s, NULL, 10) : 0;
  return v >= 4096 ? (size_t)v : (size_t)32 << 20;
}

/* Maps the clique named by id (made for nranks), once per process. */
static clique *open_clique(const ncclUniqueId *id, int nranks, int create) {
  const char *name = id->internal + 7; /* after "cgnccl:" */
  for (clique *q = cliques; q; q = q->next)
    if (!strcmp(q->name, name)) {
      q->refs++;
      return q;
    }
  size_t cap = staging_bytes();
  size_t size = sizeof(shared) + 2 * (size_t)nranks * cap;
  int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
  if (fd < 0) return NULL;
  struct stat st;
  if (fstat(fd, &st) || ((size_t)st.st_size < size && ftruncate(fd, (off_t)size))) {
    close(fd);
    return NULL;
  }
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return NULL;
  clique *q = calloc(1, sizeof *q);
  if (!q) {
    munmap(p, size);
    return NULL;
  }
  snprintf(q->name, sizeof q->name, "%s", name);
  q->nranks = nranks;
  q->refs = 1;
  q->sh = p;
  q->size = size;
  q->sh->cap = cap; /* the same in every rank's process */
  if (create) shm_unlink(name); /* one process: mapped, the name can go */
  q->next = cliques;
  cliques = q;
  return q;
}

static void close_clique(clique *q) {
  if (--q->refs) return;
  clique **p = &cliques;
  while (*p != q) p = &(*p)->next;
  *p = q->next;
  munmap(q->sh, q->size);
  free(q);
}

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
  clique *q = open_clique(&id, nranks, 0);
  pthread_mutex_unlock(&lock);
  if (!q) return fail(ncclSystemError, "cannot map the shared segment");
  atomic_fetch_add(&q->sh->joined, 1);
  if (wait_for(&q->sh->joined, (unsigned)nranks, 0, WAIT_S)) {
    pthread_mutex_lock(&lock);
    close_clique(q);
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
  clique *q = open_clique(&id, ndev, 1);
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
  close_clique(comm->q);
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
  return run(c) ? fail(ncclSystemError, "timed out waiting for the other "
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
          (pass ? finish_call(v[i], 0) : stage_call(v[i], 0)))
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
    for (int m = 0; m < k; m++) stage_call(same[m], 0);
    for (int m = 0; m < k; m++) {
      finish_call(same[m], 0);
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
