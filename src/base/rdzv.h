/* The TCP rendezvous (pure C): rank 0 of a job listens at host:port and,
   once every other rank of the job has said hello, sends each of them a
   blob (the NCCL unique id). Every message carries the job id; a peer of
   another job, of another world size, or a rank said twice is refused.
   Nothing blocks past the timeout; every socket is closed on every path. */
#ifndef CUGRAPH_RDZV_H
#define CUGRAPH_RDZV_H

#include <stddef.h>

enum { CG_RDZV_BLOB = 128 }; /* the bytes handed out: an ncclUniqueId */

/* Splits "host:port" or "[v6 address]:port" into host and port: 0, or -1
   with the reason in err. */
int cg_rdzv_parse(const char *addr, char *host, size_t hn, char *port,
                  size_t pn, char *err, size_t en);

/* The rendezvous of rank `rank` of `size` of job `job` at addr, within
   timeout_s seconds: rank 0 sends blob, the others receive it there. 0, or
   -1 with the message in err. */
int cg_rdzv_tcp(const char *addr, const char *job, int rank, int size,
                double timeout_s, char blob[CG_RDZV_BLOB], char *err,
                size_t en);

#endif
