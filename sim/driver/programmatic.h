/* The programmatic dependent launch check of the simulator
   (programmatic.c): what the files that feed it and run it share. */
#ifndef DOUBLE_PROGRAMMATIC_H
#define DOUBLE_PROGRAMMATIC_H
#include "queue.h"

#pragma GCC visibility push(hidden)

/* Accesses of work, as spans of an allocation (base) read or written:
   by whom ("kernel 'k', sent at script.lua:5") and, where the span
   reaches past its kernel's end, the programmatic launch that let it
   (via; NULL). Both interned. */
typedef struct pacc {
  uint64_t base, lo, hi;
  int write;
  const char *who, *via;
} pacc;
typedef struct pset { pacc *v; size_t n, cap; } pset;

/* What a kernel's run leaves to the work after it: its accesses; and,
   when it was a programmatic launch that let its dependents start before
   it waited (reach), or that never waited (leak), the accesses it was not
   ordered after, which are then not ordered before those either. */
typedef struct pkernel { pset acc, reach, leak; } pkernel;

/* The check's view of the op running (dbl_pdl_now): for a programmatic
   launch (prog), what its accesses before griddepcontrol.wait may meet
   (before: its producer's accesses and reach); what any of its accesses
   may meet (open: what programmatic launches that never waited left
   unordered before it); its record (out: a kernel's), whose run sets
   waited and wait_first (sim_launch's); the first access that met open
   (hit, its bytes and kind), reported when it ends. */
typedef struct dbl_pctx {
  pset before;
  int prog;
  const pset *open[2];
  pkernel *out, rec;
  const char *who;
  int waited, wait_first;
  pacc hit;
  uint64_t hit_lo, hit_hi;
  int hit_write;
  struct dbl_pctx *saved; /* the view before this one */
} dbl_pctx;

/* A queue's order: its last kernel's record (last_seq: its task's
   place), and the accesses left unordered since (open), until the host
   knows the queue done past open_seq. */
typedef struct dbl_porder {
  pkernel last;
  uint64_t last_seq;
  pset open;
  uint64_t open_seq;
} dbl_porder;

dbl_pctx *dbl_pdl_now(void);
/* Task seq of a queue (its order po) runs op o (NULL: a graph's launch);
   known: the queue's tasks the host knew done when it was sent. begin
   makes *c the thread's view until end. */
void dbl_pdl_begin(dbl_porder *po, dbl_pctx *c, const op *o, uint64_t seq,
                   uint64_t known);
void dbl_pdl_end(dbl_porder *po, dbl_pctx *c, uint64_t seq);
void dbl_porder_free(dbl_porder *po);
/* A run of a graph's plan: each node's record and what it found left
   unordered before it (in), for the nodes after it; outer: what the
   view of the work running the plan left unordered. */
typedef struct dbl_pplan {
  size_t n;
  pkernel *k;
  pset *in;
  pset outer;
  dbl_pctx *saved;
} dbl_pplan;
/* Nonzero when the plan's nodes are checked (the view of the work
   running it has programmatic edges to follow in it, dep[start[i] ..
   start[i + 1]) each node's dependencies as index * 2, + 1 for a
   programmatic edge, or something unordered): each node is then run
   between dbl_pnode_begin (graph: its graph's launch line) and
   dbl_pnode_end. Else nothing is checked until dbl_pplan_end. */
int dbl_pplan_begin(dbl_pplan *pp, size_t n, const size_t *start,
                    const size_t *dep);
void dbl_pplan_end(dbl_pplan *pp);
void dbl_pnode_begin(dbl_pplan *pp, dbl_pctx *c, size_t i, const op *o,
                     const size_t *start, const size_t *dep,
                     const char *graph);
void dbl_pnode_end(dbl_pctx *c);
/* An access of [lo, hi) in the block at base by the op of view c:
   recorded for the work after it and checked against open. */
void dbl_pdl_access(dbl_pctx *c, uint64_t base, uint64_t lo, uint64_t hi,
                    int write);
/* sim_launch.early for a programmatic kernel (its runner's view), and the
   report of the race it found. */
unsigned dbl_pdl_early(void *runner, uint64_t p, uint64_t n, int write);
void dbl_pdl_report_early(const dbl_pctx *c, unsigned hit, uint64_t p,
                          uint64_t n, int write, const char *at);

#pragma GCC visibility pop

#endif
