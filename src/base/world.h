/* Who this process is in a multi-process job, from the environment its
   starter left (pure C): cugraph-lua's launcher (CUGRAPH_*), Slurm's srun,
   Open MPI's mpirun, a PMI or PMIx starter (MPICH's Hydra, Cray's PALS),
   in that order; and where its ranks meet to share the NCCL unique id. */
#ifndef CUGRAPH_WORLD_H
#define CUGRAPH_WORLD_H

#include <stddef.h>

enum { CG_JOBLEN = 64, CG_WHERELEN = 512 };

typedef struct cg_world {
  int rank, size;
  int local_rank, local_size; /* -1: not known */
  const char *starter;        /* "cugraph-lua", "Slurm", "Open MPI", "PMI"; NULL: none */
  const char *rank_var;       /* the variable the rank came from */
  char job[CG_JOBLEN];        /* the job id; "" when the starter gives none */
} cg_world;

/* Fills w from the environment (one process of one rank when no starter
   left variables; with own 0 the launcher's CUGRAPH_* are skipped). 0, or
   -1 with a message naming the variable that is missing or wrong in err. */
int cg_world_read(cg_world *w, int own, char *err, size_t n);

/* Where w's ranks meet: 't' for TCP ("host:port" in where), 'f' for a
   file (a path), 0 for one rank (no rendezvous); -1 with the message in
   err when no rendezvous is given and none can be derived. In order:
   CUGRAPH_RDZV, CUGRAPH_RENDEZVOUS; under Slurm the first node of the
   step at a port of the job; all ranks on this machine: 127.0.0.1 at a
   port of the job. */
int cg_world_rendezvous(const cg_world *w, char *where, size_t n, char *err,
                        size_t en);

/* The default port of a job: 20000 to 29999, from its id. */
int cg_world_port(const char *job);

/* The device a rank uses by default, into *out: CUGRAPH_LUA_DEVICE when
   set, else its local rank (0 when only one device is visible,
   CUDA_VISIBLE_DEVICES), else 0 (a starter's variables that do not add up
   are cuda.world's to report). 0, or -1 with the message in err when
   CUGRAPH_LUA_DEVICE is not an ordinal. */
int cg_world_device(int *out, char *err, size_t n);

/* Writes the message into err (n bytes, printf's format); returns -1. */
int cg_failf(char *err, size_t n, const char *fmt, ...);

#endif
