/* cugraph.Comm: an NCCL communicator (h.drv.comm; NCCL itself is reached
   through base/cg_nccl.h). A collective runs on a stream of the communicator's
   device, eager or recorded by a capture of that stream (NCCL 2.9 and
   later); the graph then pins the communicator. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "types/types.h"
#include "base/hash.h"
#include "base/nccl.h"
#include "base/rdzv.h"
#include "base/world.h"

static void need_nccl(lua_State *L) {
  const char *why = cg_nccl_load();
  if (why) luaL_error(L, "%s", why);
}

/* Raises an error object naming the NCCL call; NCCL's last error message
   (what was wrong, in its words) is added when it has one. */
static void check(lua_State *L, ncclComm_t c, const char *api,
                  ncclResult_t r) {
  if (r == ncclSuccess) return;
  char buf[32];
  const char *name = cg_nccl_result_name(r);
  if (!name) {
    snprintf(buf, sizeof buf, "ncclResult %d", r);
    name = buf;
  }
  const char *msg = cg_nccl.ncclGetErrorString(r);
  const char *last = cg_nccl.ncclGetLastError ? cg_nccl.ncclGetLastError(c) : NULL;
  if (last && *last)
    msg = lua_pushfstring(L, "%s (%s)", msg ? msg : "error", last);
  cg_pusherror(L, api, r, name, msg ? msg : "error");
  lua_error(L);
}

#define NCCL(L, c, fn, ...) check((L), (c), #fn, cg_nccl.fn(__VA_ARGS__))

typedef struct cg_comm {
  cg_obj h;             /* h.drv.comm: the ncclComm_t */
  int rank, size;
} cg_comm;

#define COMM(c) ((ncclComm_t)(c)->h.drv.comm)

/* Argument 1 of a method: the metatable compare of cg_checkself. */
static cg_comm *checkcomm(lua_State *L) { return cg_checkself(L, CG_COMM); }

/* The open object of kind at idx, its metatable compared by identity (the
   hot path: a collective of 8 bytes costs microseconds); anything else
   goes through cg_checkobj, which raises the usual error. */
static void *fastobj(lua_State *L, int idx, cg_kind kind, cg_ctx *ctx) {
  cg_obj *o = lua_touserdata(L, idx);
  if (o && lua_getmetatable(L, idx)) {
    int same = lua_topointer(L, -1) == ctx->mt[kind];
    lua_pop(L, 1);
    if (same && o->open) return o;
  }
  return cg_checkobj(L, idx, kind);
}

/* -- creation ------------------------------------------------------------- */

/* cuda.nccl_version() -> NCCL's version code (22809 for 2.28.9) */
static int nccl_version(lua_State *L) {
  need_nccl(L);
  int v = 0;
  NCCL(L, NULL, ncclGetVersion, &v);
  lua_pushinteger(L, v);
  return 1;
}

/* cuda.nccl_id() -> a new unique id (a string of 128 bytes): made by one
   rank, given to all before cuda.comm */
static int nccl_id(lua_State *L) {
  need_nccl(L);
  ncclUniqueId id;
  NCCL(L, NULL, ncclGetUniqueId, &id);
  lua_pushlstring(L, id.internal, sizeof id.internal);
  return 1;
}

static ncclUniqueId checkid(lua_State *L, int idx) {
  size_t n;
  const char *s = luaL_checklstring(L, idx, &n);
  ncclUniqueId id;
  if (n != sizeof id.internal)
    luaL_argerror(L, idx, lua_pushfstring(L, "an NCCL id is %d bytes, got %d "
                  "(make it with cuda.nccl_id())", (int)sizeof id.internal,
                  (int)n));
  memcpy(id.internal, s, n);
  return id;
}

/* cuda.comm(id, nranks, rank) -> Comm of rank `rank` among nranks, on the
   current device (one GPU per process: every rank calls it with the same
   id, at about the same time) */
static int comm_new(lua_State *L) {
  ncclUniqueId id = checkid(L, 1);
  lua_Integer n = luaL_checkinteger(L, 2), r = luaL_checkinteger(L, 3);
  luaL_argcheck(L, n >= 1 && n <= 1 << 20, 2, "nranks out of range");
  luaL_argcheck(L, r >= 0 && r < n, 3, "rank must be in 0 .. nranks-1");
  need_nccl(L);
  cg_ctx *ctx = cg_context(L);
  cg_check_outside(L, ctx, "cannot make a communicator",
           "make communicators before capture");
  cg_comm *c = cg_newobj(L, ctx, sizeof *c, CG_COMM);
  ncclComm_t nc = NULL;
  NCCL(L, NULL, ncclCommInitRank, &nc, (int)n, id, (int)r);
  c->h.drv.comm = nc;
  c->rank = (int)r;
  c->size = (int)n;
  c->h.open = 1;
  return 1;
}

/* cuda.comms({ordinal, ...}) -> {Comm, ...}: one communicator per listed
   device, ranks in list order, all in this process (ncclCommInitAll) */
static int comms_new(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer n = luaL_len(L, 1);
  luaL_argcheck(L, n >= 1 && n <= 1024, 1, "a list of 1 to 1024 devices");
  need_nccl(L);
  int *devs = lua_newuserdatauv(L, (size_t)n * sizeof *devs, 0);
  ncclComm_t *h = lua_newuserdatauv(L, (size_t)n * sizeof *h, 0);
  int top = lua_gettop(L);
  lua_createtable(L, (int)n, 0);
  for (lua_Integer i = 0; i < n; i++) {
    lua_geti(L, 1, i + 1);
    lua_Integer d = lua_tointeger(L, -1);
    if (!lua_isinteger(L, -1) || d < 0 || d > 1024)
      luaL_error(L, "cuda.comms: entry %d is not a device ordinal", (int)i + 1);
    lua_pop(L, 1);
    for (lua_Integer j = 0; j < i; j++)
      if (devs[j] == d)
        luaL_error(L, "cuda.comms: device %d is listed twice", (int)d);
    devs[i] = (int)d;
    cg_ctx *ctx = cg_device(L, (int)d);
    cg_check_outside(L, ctx, "cannot make a communicator",
             "make communicators before capture");
    cg_newobj(L, ctx, sizeof(cg_comm), CG_COMM);
    lua_rawseti(L, top + 1, i + 1);
  }
  cg_context(L); /* the current device's context current again */
  NCCL(L, NULL, ncclCommInitAll, h, (int)n, devs);
  for (lua_Integer i = 0; i < n; i++) {
    lua_rawgeti(L, top + 1, i + 1);
    cg_comm *c = lua_touserdata(L, -1);
    c->h.drv.comm = h[i];
    c->rank = (int)i;
    c->size = (int)n;
    c->h.open = 1;
    lua_pop(L, 1);
  }
  return 1;
}

static int comm_free(lua_State *L) { return cg_close(L, CG_COMM, 0); }
static int comm_gc(lua_State *L) { return cg_close(L, CG_COMM, 1); }

/* -- collectives ---------------------------------------------------------- */

static int nccl_type(lua_State *L, cg_type t) {
  static const signed char map[CG_NTYPES] = {
    ncclFloat32, ncclFloat64, ncclInt8, ncclUint8, -1, -1, ncclInt32,
    ncclUint32, ncclInt64, ncclUint64, ncclFloat16, ncclBfloat16
  };
  if (map[t] < 0)
    luaL_error(L, "NCCL has no %s type: use a buffer of i32, or a view of "
               "another type", cg_type_names[t]);
  return map[t];
}

/* A reduction at idx: "sum" (absent), "prod", "max", "min" or "avg". */
static int redop(lua_State *L, int idx) {
  static const char *const ops[] = {"sum", "prod", "max", "min", "avg", NULL};
  return luaL_checkoption(L, idx, "sum", ops);
}

/* The buffer at idx, on the communicator's device. */
static cg_buffer *buf(lua_State *L, cg_comm *c, int idx) {
  cg_buffer *b = fastobj(L, idx, CG_BUFFER, c->h.ctx);
  if (b->h.ctx != c->h.ctx) cg_error_devices(L, c->h.ctx, b->h.ctx, "cugraph.Comm");
  return b;
}

/* Where a call goes: its stream (at sidx, or the device's own), pinned in
   a capture. Without a stream the call follows all device work, and is
   waited for by done() (by the group's end inside cuda.nccl_group). */
static CUstream begin(lua_State *L, cg_comm *c, int sidx, const char *what) {
  cg_ctx *ctx = c->h.ctx;
  for (int i = 1; i <= sidx; i++) cg_pin(L, ctx, i);
  if (lua_isnoneornil(L, sidx)) {
    if (ctx->capture)
      luaL_error(L, "comm:%s() without a stream inside a graph capture: pass "
                 "the capture stream", what);
    cg_sync(L, ctx);
    return NULL;
  }
  cg_stream *so = fastobj(L, sidx, CG_STREAM, ctx);
  if (so->h.ctx != ctx) cg_error_devices(L, ctx, so->h.ctx, "stream argument");
  CUstream s = so->h.drv.stream;
  if (ctx->capture)
    cg_check_captured(L, ctx, s, lua_pushfstring(L, "comm:%s()", what));
  for (int i = 1; i < sidx; i++) /* a finalizer may have run meanwhile */
    if (lua_type(L, i) == LUA_TUSERDATA) cg_check_open(L, lua_touserdata(L, i));
  cg_current(L, ctx);
  return s;
}

static void done(lua_State *L, cg_comm *c, CUstream s) {
  if (!s && !c->h.ctx->root->nccl_group)
    cg_wait_stream(L, c->h.ctx, c->h.ctx->stream, c->h.ctx->root->timeout);
}

#define STREAM(c, s) ((s) ? (s) : (c)->h.ctx->stream)
#define DPTR(b) ((void *)(uintptr_t)(b)->h.drv.mem) /* a buffer's device address */

/* The rank at idx, a root of the communicator's ranks. */
static int checkroot(lua_State *L, cg_comm *c, int idx) {
  lua_Integer root = luaL_checkinteger(L, idx);
  luaL_argcheck(L, root >= 0 && root < c->size, idx, "root is not a rank");
  return (int)root;
}

/* Send a and receive b: of one type, their sizes as rule says (ok). */
static void same(lua_State *L, cg_buffer *a, cg_buffer *b, int ok,
                 const char *what, const char *rule) {
  if (a->type != b->type)
    luaL_error(L, "comm:%s(): send is %s, recv is %s; they must match", what,
               cg_type_names[a->type], cg_type_names[b->type]);
  if (!ok)
    luaL_error(L, "comm:%s(): send has %I elements, recv %I; %s", what,
               (LUAI_UACINT)a->n, (LUAI_UACINT)b->n, rule);
}

/* Optional reduction at idx: shifts the stream index when present. */
static int optop(lua_State *L, int idx, int *sidx) {
  if (lua_type(L, idx) == LUA_TSTRING) {
    *sidx = idx + 1;
    return redop(L, idx);
  }
  *sidx = idx;
  return 0;
}

/* c:all_reduce(send, recv [, op] [, stream]): recv = op over the ranks of
   send; send and recv may be the same buffer */
static int comm_all_reduce(lua_State *L) {
  cg_comm *c = checkcomm(L);
  cg_buffer *s = buf(L, c, 2), *r = buf(L, c, 3);
  int sidx, op = optop(L, 4, &sidx);
  same(L, s, r, s->n == r->n, "all_reduce", "they must be equal");
  int t = nccl_type(L, s->type);
  CUstream st = begin(L, c, sidx, "all_reduce");
  NCCL(L, COMM(c), ncclAllReduce, DPTR(s), DPTR(r), s->n, t, op, COMM(c),
       STREAM(c, st));
  done(L, c, st);
  return 0;
}

/* c:reduce(send, recv, root [, op] [, stream]): recv of rank root = op over
   the ranks of send */
static int comm_reduce(lua_State *L) {
  cg_comm *c = checkcomm(L);
  cg_buffer *s = buf(L, c, 2), *r = buf(L, c, 3);
  int root = checkroot(L, c, 4);
  int sidx, op = optop(L, 5, &sidx);
  same(L, s, r, s->n == r->n, "reduce", "they must be equal");
  int t = nccl_type(L, s->type);
  CUstream st = begin(L, c, sidx, "reduce");
  NCCL(L, COMM(c), ncclReduce, DPTR(s), DPTR(r), s->n, t, op, root, COMM(c),
       STREAM(c, st));
  done(L, c, st);
  return 0;
}

/* c:broadcast(send, recv, root [, stream]): recv = send of rank root */
static int comm_broadcast(lua_State *L) {
  cg_comm *c = checkcomm(L);
  cg_buffer *s = buf(L, c, 2), *r = buf(L, c, 3);
  int root = checkroot(L, c, 4);
  same(L, s, r, s->n == r->n, "broadcast", "they must be equal");
  int t = nccl_type(L, s->type);
  CUstream st = begin(L, c, 5, "broadcast");
  NCCL(L, COMM(c), ncclBroadcast, DPTR(s), DPTR(r), s->n, t, root, COMM(c),
       STREAM(c, st));
  done(L, c, st);
  return 0;
}

/* c:all_gather(send, recv [, stream]): recv holds every rank's send, in
   rank order (#recv = #send * size) */
static int comm_all_gather(lua_State *L) {
  cg_comm *c = checkcomm(L);
  cg_buffer *s = buf(L, c, 2), *r = buf(L, c, 3);
  same(L, s, r, r->n % (size_t)c->size == 0 && r->n / (size_t)c->size == s->n,
       "all_gather", "recv must have size() times send's");
  int t = nccl_type(L, s->type);
  CUstream st = begin(L, c, 4, "all_gather");
  NCCL(L, COMM(c), ncclAllGather, DPTR(s), DPTR(r), s->n, t, COMM(c),
       STREAM(c, st));
  done(L, c, st);
  return 0;
}

/* c:reduce_scatter(send, recv [, op] [, stream]): recv of rank i = op over
   the ranks of send's i-th block of #recv elements */
static int comm_reduce_scatter(lua_State *L) {
  cg_comm *c = checkcomm(L);
  cg_buffer *s = buf(L, c, 2), *r = buf(L, c, 3);
  int sidx, op = optop(L, 4, &sidx);
  same(L, s, r, s->n % (size_t)c->size == 0 && s->n / (size_t)c->size == r->n,
       "reduce_scatter", "send must have size() times recv's");
  int t = nccl_type(L, s->type);
  CUstream st = begin(L, c, sidx, "reduce_scatter");
  NCCL(L, COMM(c), ncclReduceScatter, DPTR(s), DPTR(r), r->n, t, op, COMM(c),
       STREAM(c, st));
  done(L, c, st);
  return 0;
}

static int point(lua_State *L, int send) {
  cg_comm *c = checkcomm(L);
  cg_buffer *b = buf(L, c, 2);
  lua_Integer peer = luaL_checkinteger(L, 3);
  luaL_argcheck(L, peer >= 0 && peer < c->size && peer != c->rank, 3,
                "peer must be another rank");
  int t = nccl_type(L, b->type);
  CUstream st = begin(L, c, 4, send ? "send" : "recv");
  if (send)
    NCCL(L, COMM(c), ncclSend, DPTR(b), b->n, t, (int)peer,
         COMM(c), STREAM(c, st));
  else
    NCCL(L, COMM(c), ncclRecv, DPTR(b), b->n, t, (int)peer,
         COMM(c), STREAM(c, st));
  done(L, c, st);
  return 0;
}

/* c:send(buf, peer [, stream]) and c:recv(buf, peer [, stream]): a pair
   of them, of the same size, on two ranks; both inside cuda.nccl_group
   when one thread drives both ranks, or when a rank sends and receives */
static int comm_send(lua_State *L) { return point(L, 1); }
static int comm_recv(lua_State *L) { return point(L, 0); }

/* cuda.nccl_group(fn, ...) -> fn(...): NCCL calls made by fn are one group
   (ncclGroupStart/End): several ranks driven by one thread, or sends and
   receives that pair up. The group ends however fn ends. */
static int nccl_group(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  need_nccl(L);
  cg_ctx *root = cg_sentinel(L);
  check(L, NULL, "ncclGroupStart", cg_nccl.ncclGroupStart());
  root->nccl_group++;
  int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
  root->nccl_group--;
  ncclResult_t r = cg_nccl.ncclGroupEnd();
  if (status != LUA_OK) return lua_error(L);
  check(L, NULL, "ncclGroupEnd", r);
  if (!root->nccl_group) /* calls without a stream: waited for here */
    for (cg_ctx *d = root; d; d = d->next)
      if (cg_alive(d) && !d->capture) {
        cg_current(L, d);
        cg_wait_stream(L, d, d->stream, d->root->timeout);
      }
  cg_context(L);
  return lua_gettop(L);
}

/* -- rendezvous through a file -------------------------------------------- */

/* A record: a magic line, "job <id>\n", the 128 bytes of the NCCL unique
   id, then the checksum of all before it as 16 hex digits and "\n". */
#define RDV_MAGIC "cugraph-lua rendezvous 1\n"
enum { JOBLEN = 64, RECORD = 32 + JOBLEN + 128 + 18 };

static size_t record(char *out, const char *job, const char *id) {
  int n = snprintf(out, RECORD, RDV_MAGIC "job %s\n", job);
  memcpy(out + n, id, sizeof(ncclUniqueId));
  n += (int)sizeof(ncclUniqueId);
  cg_hash h = CG_HASH_INIT;
  cg_hash_bytes(&h, out, (size_t)n);
  n += snprintf(out + n, (size_t)(RECORD - n), "\n%016llx\n",
                (unsigned long long)(h.a ^ h.b));
  return (size_t)n;
}

/* Reads the record at path into id: 1 when it is whole and of this job; 0
   when absent; else -1 with why in *why (a record of another job, or one
   that is short or does not check: tampered, or still being replaced). */
static int read_record(const char *path, const char *job, char *id,
                       const char **why) {
  char buf[RECORD + 1], want[RECORD];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  size_t head = strlen(RDV_MAGIC) + 4;
  const char *nl = n > (ssize_t)head ? memchr(buf + head, '\n',
                                              (size_t)n - head) : NULL;
  if (n <= (ssize_t)head || memcmp(buf, RDV_MAGIC "job ", head) || !nl) {
    *why = "not a whole rendezvous record (short, tampered, or not one)";
    return -1;
  }
  size_t joblen = (size_t)(nl - buf - (ptrdiff_t)head);
  if (joblen != strlen(job) || memcmp(buf + head, job, joblen)) {
    *why = "a rendezvous record of another job (a stale file, or one that "
           "another run shares)";
    return -1;
  }
  size_t at = head + joblen + 1;
  if ((size_t)n < at + sizeof(ncclUniqueId) ||
      (size_t)n != record(want, job, buf + at) ||
      memcmp(want, buf, (size_t)n)) {
    *why = "not a whole rendezvous record (short, tampered, or not one)";
    return -1;
  }
  memcpy(id, buf + at, sizeof(ncclUniqueId));
  return 1;
}

/* Rank 0 makes the id and writes its record whole (a rename). */
static int write_id(lua_State *L, const char *path, const char *job) {
  nccl_id(L);
  const char *id = lua_tostring(L, -1);
  char rec[RECORD];
  size_t n = record(rec, job, id);
  const char *tmp = lua_pushfstring(L, "%s.%d.tmp", path, (int)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return luaL_error(L, "cuda.nccl_rendezvous: %s: %s", tmp,
                                strerror(errno));
  ssize_t w = write(fd, rec, n);
  int failed = w != (ssize_t)n || fsync(fd) != 0;
  close(fd);
  if (failed || rename(tmp, path) != 0) {
    unlink(tmp);
    return luaL_error(L, "cuda.nccl_rendezvous: cannot write %s: %s", path,
                      strerror(errno));
  }
  lua_pop(L, 1);
  return 1;
}

/* cuda.nccl_rendezvous(path, rank [, timeout_s [, job]]) -> id: the unique
   id of a run, made by rank 0 and written to path (a file on storage every
   rank sees) with the run's job id (job, else CUGRAPH_JOB_ID, else none),
   read there by the others, who wait up to timeout_s (600) for a whole
   record of their job. */
static int nccl_rendezvous(lua_State *L) {
  size_t len;
  const char *path = luaL_checklstring(L, 1, &len);
  lua_Integer rank = luaL_checkinteger(L, 2);
  lua_Number timeout = luaL_optnumber(L, 3, 600);
  const char *env = getenv("CUGRAPH_JOB_ID");
  const char *job = luaL_optstring(L, 4, env ? env : "");
  luaL_argcheck(L, strlen(path) == len, 1, "the path contains a NUL byte");
  luaL_argcheck(L, rank >= 0, 2, "rank must not be negative");
  luaL_argcheck(L, timeout > 0, 3, "the timeout must be a positive number of "
                "seconds");
  luaL_argcheck(L, strlen(job) < JOBLEN && !strpbrk(job, "\n"), 4,
                "a job id is one line of fewer than 64 bytes");
  need_nccl(L);
  lua_settop(L, 4);
  if (rank == 0) return write_id(L, path, job);
  struct timespec t0, now, nap = {0, 10000000};
  const char *why = NULL;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    char id[sizeof(ncclUniqueId)];
    int got = read_record(path, job, id, &why);
    if (got > 0) {
      lua_pushlstring(L, id, sizeof id);
      return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((double)(now.tv_sec - t0.tv_sec) +
        (double)(now.tv_nsec - t0.tv_nsec) * 1e-9 > timeout)
      return luaL_error(L, "cuda.nccl_rendezvous: rank %d waited %f s for "
                        "rank 0 to write the NCCL id to %s (job '%s')%s%s",
                        (int)rank, (double)timeout, path, job,
                        got < 0 ? "; it holds " : "", got < 0 ? why : "");
    nanosleep(&nap, NULL);
  }
}

/* -- rendezvous through TCP, and the job's world --------------------------- */

/* cuda.nccl_rendezvous_tcp(addr, rank, size [, timeout_s [, job]]) -> id:
   the unique id of a run of size ranks, made by rank 0, which listens at
   addr ("host:port", "[v6]:port") and sends it to every other rank once
   all have come; the others connect there, retrying until rank 0 listens.
   Each waits up to timeout_s (600); job (else CUGRAPH_JOB_ID, else none)
   must be the same on every rank. */
static int nccl_rendezvous_tcp(lua_State *L) {
  size_t len;
  const char *addr = luaL_checklstring(L, 1, &len);
  lua_Integer rank = luaL_checkinteger(L, 2), size = luaL_checkinteger(L, 3);
  lua_Number timeout = luaL_optnumber(L, 4, 600);
  const char *env = getenv("CUGRAPH_JOB_ID");
  const char *job = luaL_optstring(L, 5, env ? env : "");
  luaL_argcheck(L, strlen(addr) == len, 1, "the address contains a NUL byte");
  luaL_argcheck(L, size >= 1 && size <= 1 << 24, 3, "size out of range");
  luaL_argcheck(L, rank >= 0 && rank < size, 2, "rank must be in 0 .. size-1");
  luaL_argcheck(L, timeout > 0 && timeout < 1e9, 4, "the timeout must be a "
                "positive number of seconds");
  luaL_argcheck(L, strlen(job) < CG_JOBLEN && !strpbrk(job, "\n"), 5,
                "a job id is one line of fewer than 64 bytes");
  char host[256], port[8], err[1024];
  if (cg_rdzv_parse(addr, host, sizeof host, port, sizeof port, err, sizeof err))
    return luaL_argerror(L, 1, err);
  need_nccl(L);
  char id[CG_RDZV_BLOB];
  memset(id, 0, sizeof id);
  if (rank == 0) {
    nccl_id(L);
    memcpy(id, lua_tostring(L, -1), sizeof id);
  }
  if (cg_rdzv_tcp(addr, job, (int)rank, (int)size, timeout, id, err, sizeof err))
    return luaL_error(L, "cuda.nccl_rendezvous_tcp: %s", err);
  lua_pushlstring(L, id, sizeof id);
  return 1;
}

static void world_error(lua_State *L, const char *fn, const char *err) {
  luaL_error(L, "cuda.%s: %s", fn, err);
}

/* cuda.world() -> {rank, size, local_rank, local_size, job, starter}: this
   process in its job, from its starter's variables (base/world.h);
   local_rank and local_size absent when unknown, starter when there is
   none (one process). */
static int world(lua_State *L) {
  cg_world w;
  char err[512];
  if (cg_world_read(&w, 1, err, sizeof err)) world_error(L, "world", err);
  lua_createtable(L, 0, 6);
  lua_pushinteger(L, w.rank);
  lua_setfield(L, -2, "rank");
  lua_pushinteger(L, w.size);
  lua_setfield(L, -2, "size");
  if (w.local_rank >= 0) {
    lua_pushinteger(L, w.local_rank);
    lua_setfield(L, -2, "local_rank");
  }
  if (w.local_size > 0) {
    lua_pushinteger(L, w.local_size);
    lua_setfield(L, -2, "local_size");
  }
  lua_pushstring(L, w.job);
  lua_setfield(L, -2, "job");
  if (w.starter) {
    lua_pushstring(L, w.starter);
    lua_setfield(L, -2, "starter");
  }
  return 1;
}

/* core.world_rendezvous() -> "tcp"|"file", where; nothing for one rank
   (internal: cuda.comm_world's) */
static int world_rendezvous(lua_State *L) {
  cg_world w;
  char err[1024], where[CG_WHERELEN];
  if (cg_world_read(&w, 1, err, sizeof err)) world_error(L, "comm_world", err);
  int kind = cg_world_rendezvous(&w, where, sizeof where, err, sizeof err);
  if (kind < 0) world_error(L, "comm_world", err);
  if (!kind) return 0;
  lua_pushstring(L, kind == 't' ? "tcp" : "file");
  lua_pushstring(L, where);
  return 2;
}

/* -- the rest of the object ------------------------------------------------ */

static int comm_rank(lua_State *L) {
  lua_pushinteger(L, checkcomm(L)->rank);
  return 1;
}

static int comm_size(lua_State *L) {
  lua_pushinteger(L, checkcomm(L)->size);
  return 1;
}

static int comm_tostring(lua_State *L) {
  cg_comm *c = cg_toobj(L, 1, CG_COMM);
  return cg_tostring(L, &c->h, " (rank %d of %d, device %d)", c->rank,
                     c->size, c->h.ctx->ordinal);
}

void comm_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"all_reduce", comm_all_reduce}, {"reduce", comm_reduce},
    {"broadcast", comm_broadcast}, {"all_gather", comm_all_gather},
    {"reduce_scatter", comm_reduce_scatter}, {"send", comm_send},
    {"recv", comm_recv}, {"rank", comm_rank}, {"size", comm_size},
    {"free", comm_free}, {"close", comm_free}, {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", comm_gc}, {"__close", comm_free},
    {"__tostring", comm_tostring}, {NULL, NULL}
  };
  static const luaL_Reg funcs[] = {
    {"nccl_version", nccl_version}, {"nccl_id", nccl_id},
    {"comm", comm_new}, {"comms", comms_new}, {"nccl_group", nccl_group},
    {"nccl_rendezvous", nccl_rendezvous},
    {"nccl_rendezvous_tcp", nccl_rendezvous_tcp}, {"world", world},
    {"world_rendezvous", world_rendezvous}, {NULL, NULL}
  };
  cg_newtype(L, CG_COMM, methods, meta, NULL);
  luaL_setfuncs(L, funcs, 0);
}
