/* How the ranks of a job find each other (the module functions beside
   cugraph.Comm): the job's world from its starter's variables
   (base/world.h), and the NCCL unique id of rank 0 handed to the others
   through a file or over TCP (base/rdzv.h). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
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
  cg_nccl_id(L);
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

/* The job id argument at idx, else CUGRAPH_JOB_ID, else "": one line of
   fewer than JOBLEN bytes; the variable is named when it
   is what is wrong. */
static const char *job_id(lua_State *L, int idx) {
  const char *env = getenv("CUGRAPH_JOB_ID");
  int given = !lua_isnoneornil(L, idx);
  const char *job = given ? cg_checkname(L, idx, NULL) : env ? env : "";
  if (strlen(job) < JOBLEN && !strchr(job, '\n')) return job;
  if (given)
    luaL_argerror(L, idx, "a job id is one line of fewer than 64 bytes");
  luaL_error(L, "CUGRAPH_JOB_ID is '%s', not one line of fewer than 64 bytes",
             job);
  return NULL;
}

/* cuda.nccl_rendezvous(path, rank [, timeout_s [, job]]) -> id: the unique
   id of a run, made by rank 0 and written to path (a file on storage every
   rank sees) with the run's job id (job, else CUGRAPH_JOB_ID, else none),
   read there by the others, who wait up to timeout_s (600) for a whole
   record of their job. */
static int nccl_rendezvous(lua_State *L) {
  const char *path = cg_checkname(L, 1, NULL);
  lua_Integer rank = luaL_checkinteger(L, 2);
  lua_Number timeout = luaL_optnumber(L, 3, 600);
  luaL_argcheck(L, rank >= 0, 2, "rank must not be negative");
  luaL_argcheck(L, timeout > 0, 3, "the timeout must be a positive number of "
                "seconds");
  const char *job = job_id(L, 4);
  cg_need_nccl(L);
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
  const char *addr = cg_checkname(L, 1, NULL);
  lua_Integer rank = luaL_checkinteger(L, 2), size = luaL_checkinteger(L, 3);
  lua_Number timeout = luaL_optnumber(L, 4, 600);
  luaL_argcheck(L, size >= 1 && size <= 1 << 24, 3, "size out of range");
  luaL_argcheck(L, rank >= 0 && rank < size, 2, "rank must be in 0 .. size-1");
  luaL_argcheck(L, timeout > 0 && timeout < 1e9, 4, "the timeout must be a "
                "positive number of seconds");
  const char *job = job_id(L, 5);
  char host[256], port[8], err[1024];
  if (cg_rdzv_parse(addr, host, sizeof host, port, sizeof port, err, sizeof err))
    return luaL_argerror(L, 1, err);
  cg_need_nccl(L);
  char id[CG_RDZV_BLOB];
  memset(id, 0, sizeof id);
  if (rank == 0) {
    cg_nccl_id(L);
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

void rendezvous_open(lua_State *L) {
  static const luaL_Reg funcs[] = {
    {"nccl_rendezvous", nccl_rendezvous},
    {"nccl_rendezvous_tcp", nccl_rendezvous_tcp}, {"world", world},
    {"world_rendezvous", world_rendezvous}, {NULL, NULL}
  };
  luaL_setfuncs(L, funcs, 0);
}
