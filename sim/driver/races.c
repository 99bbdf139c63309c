/* What the simulator's strict mode checks between streams (queue.c runs
   the work): accesses of the same memory by two streams' work, one of them
   a write, with nothing ordering them. Each block of memory (an
   allocation, a page-locked host block) keeps its last SHADOW_N accesses;
   an access that meets one of another queue's that its task does not
   follow is reported (dbl_report) with both Lua lines. And the names the
   reports keep: strings interned for the life of the process. */
#include "double.h"
#include "queue.h"
#include "programmatic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SHADOW_N = 8 };

/* -- names and Lua lines --------------------------------------------------- */

/* Strings kept for the life of the process (Lua lines, kernel names):
   few, and named by reports long after their calls. Open addressing. */
static char **names;
static size_t nnames, cnames;

static size_t hash(const char *s) {
  size_t h = 1469598103934665603u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
  return h;
}

const char *dbl_intern(const char *s) {
  if (!s) return NULL;
  if (2 * (nnames + 1) > cnames) {
    size_t c = cnames ? 2 * cnames : 256;
    char **v = calloc(c, sizeof *v);
    if (!v) return NULL;
    for (size_t i = 0; i < cnames; i++)
      if (names[i]) {
        size_t j = hash(names[i]) & (c - 1);
        while (v[j]) j = (j + 1) & (c - 1);
        v[j] = names[i];
      }
    free(names);
    names = v;
    cnames = c;
  }
  size_t j = hash(s) & (cnames - 1);
  for (; names[j]; j = (j + 1) & (cnames - 1))
    if (!strcmp(names[j], s)) return names[j];
  size_t n = strlen(s) + 1;
  if (!(names[j] = malloc(n))) return NULL;
  memcpy(names[j], s, n);
  nnames++;
  return names[j];
}

/* -- races between streams ------------------------------------------------- */

/* One access of a block of memory: its bytes, the task's queue and place,
   and what and where it was, for the report. */
typedef struct acc {
  uint64_t lo, hi, seq;
  unsigned q;
  int write;
  const char *where, *what;
} acc;

/* The last accesses of one allocation (or page-locked host block),
   sorted by base. */
typedef struct shadow {
  uint64_t base;
  acc a[SHADOW_N];
  unsigned n, next;
} shadow;

static shadow *shadows;
static size_t nshadows, cshadows;

static size_t shadow_upto(uint64_t base) {
  size_t lo = 0, hi = nshadows;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (shadows[mid].base < base) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static shadow *shadow_of(uint64_t base) {
  size_t i = shadow_upto(base);
  if (i < nshadows && shadows[i].base == base) return &shadows[i];
  if (nshadows == cshadows) {
    size_t c = cshadows ? 2 * cshadows : 64;
    shadow *v = realloc(shadows, c * sizeof *v);
    if (!v) return NULL;
    shadows = v;
    cshadows = c;
  }
  memmove(shadows + i + 1, shadows + i, (nshadows - i) * sizeof *shadows);
  nshadows++;
  memset(&shadows[i], 0, sizeof shadows[i]);
  shadows[i].base = base;
  return &shadows[i];
}

void dbl_forget_block(uint64_t base) {
  size_t i = shadow_upto(base);
  if (i >= nshadows || shadows[i].base != base) return;
  memmove(shadows + i, shadows + i + 1, (nshadows - i - 1) * sizeof *shadows);
  nshadows--;
  if (!nshadows) {
    free(shadows);
    shadows = NULL;
    cshadows = 0;
  }
}

/* What a task's op is, for a report: "kernel 'k'", "a copy", ... */
static const char *what_of(const op *o) {
  char buf[200];
  switch (o->type) {
  case CU_GRAPH_NODE_TYPE_KERNEL:
    snprintf(buf, sizeof buf, "kernel '%s'", o->f->name);
    return dbl_intern(buf);
  case CU_GRAPH_NODE_TYPE_MEMCPY: return "a copy";
  case CU_GRAPH_NODE_TYPE_MEMSET: return "a fill";
  default: return "work";
  }
}

/* Task t's (of queue q) access of [lo, hi) by its op o (in the block at
   base), checked against the block's last accesses by other queues. */
void dbl_race_check(const task *t, const queue *q, const op *o, uint64_t base,
                    uint64_t lo, uint64_t hi, int write) {
  shadow *sh = lo < hi ? shadow_of(base) : NULL;
  if (!sh) return;
  const char *what = what_of(o), *where = dbl_task_where(t, o);
  unsigned qid = dbl_queue_id(q);
  uint64_t seq = dbl_task_seq(t);
  for (unsigned i = 0; i < sh->n; i++) {
    const acc *e = &sh->a[i];
    if (e->q == qid || !(e->write || write) ||
        !dbl_meets(lo, hi - lo, e->lo, e->hi - e->lo) ||
        dbl_task_follows(t, e->q) >= e->seq)
      continue;
    uint64_t a = lo > e->lo ? lo : e->lo, b = hi < e->hi ? hi : e->hi;
    dbl_report("a race between streams: %s, sent at %s, %s bytes %llu to "
               "%llu of the memory at 0x%llx, which %s, sent at %s on "
               "another stream, %s, and nothing orders the two (no event "
               "recorded after one and waited for before the other, no "
               "synchronization between them): on a GPU they may run at "
               "once, and the data depends on the timing (the "
               "synchronization rule: record an event after the first and "
               "make the other stream wait on it, s2:wait(e), or "
               "synchronize between them; CUDA_SIM_STRICT=0 turns this "
               "check off)", what, where ? where : "(no Lua line)",
               write ? "writes" : "reads", (unsigned long long)(a - base),
               (unsigned long long)(b - base), (unsigned long long)base,
               e->what, e->where ? e->where : "(no Lua line)",
               e->write ? "writes" : "reads");
    break;
  }
  for (unsigned i = 0; i < sh->n; i++) { /* the same queue's again */
    acc *e = &sh->a[i];
    if (e->q == qid && e->write == write && e->lo == lo && e->hi == hi) {
      e->seq = seq;
      e->where = where;
      e->what = what;
      return;
    }
  }
  acc a = {lo, hi, seq, qid, write, where, what};
  if (sh->n < SHADOW_N) sh->a[sh->n++] = a;
  else sh->a[sh->next++ % SHADOW_N] = a; /* the oldest goes */
}

void dbl_track_kernel(void *runner, uint64_t base, uint64_t lo, uint64_t hi,
                      int write) {
  const dbl_runner *r = runner;
  dbl_race_check(r->task, r->queue, r->o, base, lo, hi, write);
  if (r->pdl) dbl_pdl_access(r->pdl, base, lo, hi, write);
}
