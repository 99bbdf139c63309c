/* The rank, size and local rank of this process, and its job, from the
   variables of its starter; the rendezvous of its job (base/world.h). */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/hash.h"
#include "base/world.h"

enum { MAX_RANKS = 1 << 24 };

int cg_failf(char *err, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
  return -1;
}

static const char *env(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

/* The integer of variable name, lo to hi: 1; 0 when unset; -1 with a
   message when it is not one. */
static int number_long(const char *name, long lo, long hi, long *out,
                       char *err, size_t n) {
  long long v = 0;
  int got = cg_env_integer(name, lo, hi, &v, err, n);
  if (got > 0) *out = (long)v;
  return got;
}

static int number(const char *name, long lo, long hi, int *out, char *err,
                  size_t n) {
  long v = 0;
  int got = number_long(name, lo, hi, &v, err, n);
  if (got > 0) *out = (int)v;
  return got;
}

/* Variable name, which `by` needs: as number(), but unset is an error. */
static int needed(const char *by, const char *name, long lo, long hi,
                  int *out, char *err, size_t n) {
  int got = number(name, lo, hi, out, err, n);
  if (got == 0)
    return cg_failf(err, n, "%s is set but %s is not", by, name);
  return got;
}

static void set_job(cg_world *w, const char *job) {
  size_t len = job ? strlen(job) : 0;
  if (len < CG_JOBLEN && (!job || !strchr(job, '\n'))) {
    snprintf(w->job, sizeof w->job, "%s", job ? job : "");
    return;
  }
  cg_hash h = CG_HASH_INIT; /* too long for a record: its hash stands in */
  cg_hash_bytes(&h, job, len);
  snprintf(w->job, sizeof w->job, "h%016llx%016llx", (unsigned long long)h.a,
           (unsigned long long)h.b);
}

/* The checks every starter's numbers get. */
static int consistent(const cg_world *w, const char *size_var,
                      const char *local_var, const char *lsize_var, char *err,
                      size_t n) {
  if (w->rank >= w->size)
    return cg_failf(err, n, "%s is %d, not below %s (%d)", w->rank_var, w->rank,
                size_var, w->size);
  if (w->local_rank >= w->size)
    return cg_failf(err, n, "%s is %d, not below %s (%d)", local_var,
                w->local_rank, size_var, w->size);
  if (w->local_size > w->size)
    return cg_failf(err, n, "%s is %d, more than %s (%d)", lsize_var,
                w->local_size, size_var, w->size);
  if (w->local_size > 0 && w->local_rank >= w->local_size)
    return cg_failf(err, n, "%s is %d, not below %s (%d)", local_var,
                w->local_rank, lsize_var, w->local_size);
  return 1;
}

/* cugraph-lua --nproc N: CUGRAPH_RANK and CUGRAPH_WORLD_SIZE together,
   CUGRAPH_LOCAL_RANK and CUGRAPH_LOCAL_WORLD_SIZE when set. */
static int from_launcher(cg_world *w, char *err, size_t n) {
  int r = number("CUGRAPH_RANK", 0, MAX_RANKS - 1, &w->rank, err, n);
  int s = number("CUGRAPH_WORLD_SIZE", 1, MAX_RANKS, &w->size, err, n);
  if (r < 0 || s < 0) return -1;
  if (!r && !s) return 0;
  if (!r) return cg_failf(err, n, "CUGRAPH_WORLD_SIZE is set but CUGRAPH_RANK is not");
  if (!s) return cg_failf(err, n, "CUGRAPH_RANK is set but CUGRAPH_WORLD_SIZE is not");
  w->starter = "cugraph-lua";
  w->rank_var = "CUGRAPH_RANK";
  if (number("CUGRAPH_LOCAL_RANK", 0, MAX_RANKS - 1, &w->local_rank, err, n) < 0 ||
      number("CUGRAPH_LOCAL_WORLD_SIZE", 1, MAX_RANKS, &w->local_size, err, n) < 0)
    return -1;
  return consistent(w, "CUGRAPH_WORLD_SIZE", "CUGRAPH_LOCAL_RANK",
                    "CUGRAPH_LOCAL_WORLD_SIZE", err, n);
}

/* srun's tasks: inside a job step (SLURM_STEP_ID; the batch script's own
   shell, and the batch and extern steps, are one process). */
static int from_slurm(cg_world *w, char *err, size_t n) {
  long step;
  int got = number_long("SLURM_STEP_ID", 0, 0xffffffffL, &step, err, n);
  if (got <= 0) return got;
  if (step >= 0xfffffff0L) return 0; /* batch, extern, ... */
  const char *by = "SLURM_STEP_ID";
  if (needed(by, "SLURM_PROCID", 0, MAX_RANKS - 1, &w->rank, err, n) < 0 ||
      needed(by, "SLURM_NTASKS", 1, MAX_RANKS, &w->size, err, n) < 0 ||
      needed(by, "SLURM_LOCALID", 0, MAX_RANKS - 1, &w->local_rank, err, n) < 0)
    return -1;
  const char *job = env("SLURM_JOB_ID");
  if (!job) return cg_failf(err, n, "%s is set but SLURM_JOB_ID is not", by);
  int nodes = 0;
  if (number("SLURM_STEP_NUM_NODES", 1, MAX_RANKS, &nodes, err, n) < 0) return -1;
  if (nodes == 1) w->local_size = w->size;
  char id[2 * CG_JOBLEN + 16];
  snprintf(id, sizeof id, "%.100s.%ld", job, step);
  set_job(w, id);
  w->starter = "Slurm";
  w->rank_var = "SLURM_PROCID";
  return consistent(w, "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_STEP_NUM_NODES",
                    err, n);
}

/* mpirun of Open MPI (4 and 5). */
static int from_openmpi(cg_world *w, char *err, size_t n) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"};
  const char *by = NULL;
  for (int i = 0; i < 3 && !by; i++)
    if (env(vars[i])) by = vars[i];
  if (!by) return 0;
  if (needed(by, vars[0], 0, MAX_RANKS - 1, &w->rank, err, n) < 0 ||
      needed(by, vars[1], 1, MAX_RANKS, &w->size, err, n) < 0 ||
      needed(by, vars[2], 0, MAX_RANKS - 1, &w->local_rank, err, n) < 0 ||
      number("OMPI_COMM_WORLD_LOCAL_SIZE", 1, MAX_RANKS, &w->local_size, err,
             n) < 0)
    return -1;
  const char *job = env("OMPI_MCA_ess_base_jobid");
  set_job(w, job ? job : env("PMIX_NAMESPACE"));
  w->starter = "Open MPI";
  w->rank_var = vars[0];
  return consistent(w, vars[1], vars[2], "OMPI_COMM_WORLD_LOCAL_SIZE", err, n);
}

/* PMI starters (MPICH's Hydra, Cray's PALS, ...): PMI_RANK or PMIX_RANK,
   PMI_SIZE (PMIx alone leaves the size to PMIx_Get), and the local rank
   (MPI_LOCALRANKID of Hydra, else PMI_LOCAL_RANK). */
static int from_pmi(cg_world *w, char *err, size_t n) {
  const char *rank = env("PMI_RANK") ? "PMI_RANK"
                   : env("PMIX_RANK") ? "PMIX_RANK" : NULL;
  const char *by = rank ? rank : env("PMI_SIZE") ? "PMI_SIZE" : NULL;
  if (!by) return 0;
  if (!rank) return cg_failf(err, n, "PMI_SIZE is set but PMI_RANK is not");
  if (needed(by, rank, 0, MAX_RANKS - 1, &w->rank, err, n) < 0) return -1;
  int s = number("PMI_SIZE", 1, MAX_RANKS, &w->size, err, n);
  if (s < 0) return -1;
  if (!s)
    return cg_failf(err, n, "%s is set but PMI_SIZE is not%s", rank,
                rank[3] == 'X' ? " (PMIx does not export the world size: set "
                "PMI_SIZE, or CUGRAPH_RANK and CUGRAPH_WORLD_SIZE)" : "");
  const char *local = env("MPI_LOCALRANKID") ? "MPI_LOCALRANKID"
                    : env("PMI_LOCAL_RANK") ? "PMI_LOCAL_RANK" : NULL;
  if (!local)
    return cg_failf(err, n, "%s is set but neither MPI_LOCALRANKID nor "
                "PMI_LOCAL_RANK is (the local rank, which picks the device)",
                rank);
  const char *lsize = local[0] == 'M' ? "MPI_LOCALNRANKS" : "PMI_LOCAL_SIZE";
  if (number(local, 0, MAX_RANKS - 1, &w->local_rank, err, n) < 0 ||
      number(lsize, 1, MAX_RANKS, &w->local_size, err, n) < 0)
    return -1;
  const char *job = env("PMIX_NAMESPACE");
  set_job(w, job ? job : env("PMI_JOBID"));
  w->starter = "PMI";
  w->rank_var = rank;
  return consistent(w, "PMI_SIZE", local, lsize, err, n);
}

int cg_world_read(cg_world *w, int own, char *err, size_t n) {
  memset(w, 0, sizeof *w);
  w->size = 1;
  w->local_rank = w->local_size = -1;
  int (*const from[])(cg_world *, char *, size_t) = {
    from_launcher, from_slurm, from_openmpi, from_pmi
  };
  int got = 0;
  for (size_t i = own ? 0 : 1; i < sizeof from / sizeof *from && !got; i++) {
    got = from[i](w, err, n);
    if (got < 0) return -1;
  }
  if (!got) { /* one process of its own */
    memset(w, 0, sizeof *w);
    w->size = 1;
    w->local_rank = 0;
    w->local_size = 1;
  }
  const char *job = env("CUGRAPH_JOB_ID");
  if (job) set_job(w, job);
  return 0;
}

int cg_world_port(const char *job) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (const unsigned char *p = (const unsigned char *)job; *p; p++)
    h = (h ^ *p) * 16777619u;
  return 20000 + (int)(h % 10000);
}

/* The first host of a Slurm node list ("gpu[03-04,07],cpu1" -> "gpu03"):
   1, or 0 when it is empty or too long. */
static int first_host(const char *list, char *out, size_t n) {
  size_t o = 0;
  const char *p = list;
  while (*p && *p != ',') {
    if (*p == '[') { /* a range: its first number, zeros kept */
      for (p++; *p && !strchr("-,]", *p); p++)
        if (o + 1 < n) out[o++] = *p;
      while (*p && *p != ']') p++;
      if (*p) p++;
    } else if (o + 1 < n) {
      out[o++] = *p++;
    } else {
      return 0;
    }
  }
  out[o] = '\0';
  return o > 0;
}

int cg_world_rendezvous(const cg_world *w, char *where, size_t n, char *err,
                        size_t en) {
  if (w->size == 1) return 0;
  const char *tcp = env("CUGRAPH_RDZV"), *file = env("CUGRAPH_RENDEZVOUS");
  if (tcp || file) {
    if (strlen(tcp ? tcp : file) >= n)
      return cg_failf(err, en, "%s is longer than %d bytes",
                  tcp ? "CUGRAPH_RDZV" : "CUGRAPH_RENDEZVOUS", (int)n - 1);
    snprintf(where, n, "%s", tcp ? tcp : file);
    return tcp ? 't' : 'f';
  }
  const char *size_var = !strcmp(w->starter, "Slurm") ? "SLURM_NTASKS"
                       : !strcmp(w->starter, "Open MPI") ? "OMPI_COMM_WORLD_SIZE"
                       : !strcmp(w->starter, "PMI") ? "PMI_SIZE"
                       : "CUGRAPH_WORLD_SIZE";
  if (!strcmp(w->starter, "Slurm")) {
    static const char *const lists[] = {"SLURM_STEP_NODELIST",
      "SLURM_JOB_NODELIST", "SLURM_NODELIST"};
    char host[256];
    for (int i = 0; i < 3; i++)
      if (env(lists[i])) {
        if (!first_host(env(lists[i]), host, sizeof host))
          return cg_failf(err, en, "%s is '%s', not a Slurm node list", lists[i],
                      env(lists[i]));
        snprintf(where, n, "%s:%d", host, cg_world_port(w->job));
        return 't';
      }
    return cg_failf(err, en, "SLURM_NTASKS is %d but neither SLURM_STEP_NODELIST "
                "nor SLURM_JOB_NODELIST is set, which name rank 0's node: set "
                "CUGRAPH_RDZV=host:port (rank 0's machine and a free port)",
                w->size);
  }
  if (w->local_size == w->size && w->job[0]) { /* all on this machine */
    snprintf(where, n, "127.0.0.1:%d", cg_world_port(w->job));
    return 't';
  }
  if (!strcmp(w->starter, "cugraph-lua"))
    return cg_failf(err, en, "CUGRAPH_WORLD_SIZE is %d but neither CUGRAPH_RDZV "
                "nor CUGRAPH_RENDEZVOUS is set; start the script with "
                "cugraph-lua --nproc N, or set one of them", w->size);
  return cg_failf(err, en, "%s is %d but no rendezvous is set%s: set "
              "CUGRAPH_RDZV=host:port (rank 0's machine and a free port) or "
              "CUGRAPH_RENDEZVOUS=PATH (a file every rank sees)", size_var,
              w->size, w->local_size == w->size
                       ? " and the starter gives no job id" : "");
}

int cg_world_device(int *out, char *err, size_t n) {
  long long dev = 0;
  int got = cg_env_integer("CUGRAPH_LUA_DEVICE", 0, INT32_MAX, &dev, err, n);
  *out = (int)dev;
  if (got) return got < 0 ? -1 : 0;
  cg_world w;
  char why[256];
  if (cg_world_read(&w, 1, why, sizeof why) || !w.starter || w.local_rank < 0)
    return 0;
  const char *vis = env("CUDA_VISIBLE_DEVICES");
  if (vis && !strchr(vis, ',')) return 0; /* the one GPU the starter gave it */
  *out = w.local_rank;
  return 0;
}
