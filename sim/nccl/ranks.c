/* The data of a call between the ranks of a clique: the clique's shared
   segment (staging areas, mailboxes, a barrier), waiting, staging and
   finishing a call, and the reductions. The caller holds the lock of
   nccl.c around opening and closing cliques. */
#define _GNU_SOURCE
#include "nccl_int.h"
#include "halfconv.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static clique *cliques;

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
int ranks_wait_for(atomic_uint *v, unsigned old, int differs, int wait_s) {
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
  return ranks_wait_for(&sh->generation, gen, 1, WAIT_S);
}

/* -- reduction ----------------------------------------------------------- */

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
int ranks_stage_call(const call *c, int wait_s) {
  ncclComm_t comm = c->comm;
  shared *sh = comm->q->sh;
  int me = comm->rank;
  size_t bytes = c->count * type_size[c->type];
  if (c->kind == C_RECV) return 0;
  if (c->kind == C_SEND) {
    atomic_uint *sent = &sh->sent[me][c->root], *taken = &sh->taken[me][c->root];
    if (ranks_wait_for(taken, atomic_load(sent), 0, wait_s)) /* free */
      return -1;
    memcpy(slot(comm, me, c->root), c->send, bytes);
    atomic_fetch_add(sent, 1);
    return 0;
  }
  size_t in = c->kind == C_REDUCESCATTER ? bytes * (size_t)comm->nranks : bytes;
  if (c->kind != C_BROADCAST || me == c->root)
    memcpy(stage(comm, me), c->send, in);
  return 0;
}

int ranks_finish_call(const call *c, int wait_s) {
  ncclComm_t comm = c->comm;
  shared *sh = comm->q->sh;
  int n = comm->nranks, me = comm->rank;
  size_t bytes = c->count * type_size[c->type];
  switch (c->kind) {
  case C_SEND: break;
  case C_RECV: {
    atomic_uint *sent = &sh->sent[c->root][me], *taken = &sh->taken[c->root][me];
    if (ranks_wait_for(sent, atomic_load(taken) + 1, 0, wait_s)) return -1;
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

/* Does one call of a rank that has a thread of its own; 0, or -1 when a
   rank never came. */
int ranks_run(const call *c) {
  if (p2p(c))
    return ranks_stage_call(c, WAIT_S) || ranks_finish_call(c, WAIT_S) ? -1 : 0;
  shared *sh = c->comm->q->sh;
  if (ranks_stage_call(c, WAIT_S) || barrier(sh, c->comm->nranks)) return -1;
  ranks_finish_call(c, WAIT_S);
  return barrier(sh, c->comm->nranks);
}

/* -- cliques -------------------------------------------------------------- */

static size_t staging_bytes(void) {
  const char *s = getenv("NCCL_DOUBLE_BYTES");
  unsigned long long v = s && *s ? strtoull(s, NULL, 10) : 0;
  return v >= 4096 ? (size_t)v : (size_t)32 << 20;
}

/* Maps the clique named by id (made for nranks), once per process. */
clique *ranks_open_clique(const ncclUniqueId *id, int nranks, int create) {
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

void ranks_close_clique(clique *q) {
  if (--q->refs) return;
  clique **p = &cliques;
  while (*p != q) p = &(*p)->next;
  *p = q->next;
  munmap(q->sh, q->size);
  free(q);
}
