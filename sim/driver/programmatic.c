/* Programmatic dependent launch, checked as it runs (strict mode). A
   kernel launched with programmatic stream serialization (eagerly, right
   after a kernel of its stream; in a graph, over a programmatic edge from
   a kernel node) may start while the kernel before it (its producer)
   still runs, once every block of that kernel has run
   griddepcontrol.launch_dependents or ended; its griddepcontrol.wait
   returns once the producer has completed and its writes are visible.
   The simulator runs grids one after the other, so the wait has nothing
   to wait for; what a GPU may do instead is checked:

   - an access of global memory by a thread of the consumer before its
     wait, of bytes that the producer writes (or, for a write, reads or
     writes), is a race (when it is found: sim_launch.early). So is one of
     bytes that the producer's own early start reached: a producer that
     was itself a programmatic launch and let its dependents start before
     it had waited (no block waited before its trigger) passes on what its
     own pre-wait accesses could meet (reach);
   - a programmatic launch in which no thread ran the wait may complete
     before its producer: every access of the work after it, in its
     stream (until the host waits for the stream) or graph (its
     dependents), that meets what it could meet is a race (leak, open).

   The producer's trigger gives no order of memory: everything it reads
   and writes counts, before its trigger or after. Accesses are the spans
   of each allocation a kernel read and wrote (sim_launch.touch), as for
   races between streams, and a consumer's pre-wait accesses are checked
   one by one against them. */
#include "double.h"
#include "queue.h"
#include "programmatic.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

enum { PSET_MAX = 64 }; /* entries of a set; past it, spans merge */

static _Thread_local dbl_pctx *now; /* the view of the op this thread runs */

dbl_pctx *dbl_pdl_now(void) { return now; }

/* -- sets of accesses ------------------------------------------------------ */

static void pset_free(pset *s) {
  free(s->v);
  memset(s, 0, sizeof *s);
}

static void pkernel_free(pkernel *k) {
  pset_free(&k->acc);
  pset_free(&k->reach);
  pset_free(&k->leak);
}

/* Adds the span to s, merged with an entry of the same allocation, kind
   and origin (or, once s is full, of the same allocation and kind). Out of
   memory, or full with none to merge with, the span is left out. */
static void pset_add(pset *s, uint64_t base, uint64_t lo, uint64_t hi,
                     int write, const char *who, const char *via) {
  pacc *same = NULL;
  for (size_t i = 0; i < s->n && !same; i++) {
    pacc *e = &s->v[i];
    if (e->base == base && e->write == write && e->who == who && e->via == via)
      same = e;
  }
  for (size_t i = 0; i < s->n && !same && s->n >= PSET_MAX; i++)
    if (s->v[i].base == base && s->v[i].write == write) same = &s->v[i];
  if (same) {
    if (lo < same->lo) same->lo = lo;
    if (hi > same->hi) same->hi = hi;
    return;
  }
  if (s->n >= PSET_MAX) return;
  if (s->n == s->cap) {
    size_t c = s->cap ? 2 * s->cap : 4;
    pacc *v = realloc(s->v, c * sizeof *v);
    if (!v) return;
    s->v = v;
    s->cap = c;
  }
  s->v[s->n++] = (pacc){base, lo, hi, write, who, via};
}

/* dst joined with src; via, when given, names the launch that passes it
   on (who and via are interned: compared as pointers). */
static void pset_join(pset *dst, const pset *src, const char *via) {
  for (size_t i = 0; src && i < src->n; i++) {
    const pacc *e = &src->v[i];
    pset_add(dst, e->base, e->lo, e->hi, e->write, e->who, via ? via : e->via);
  }
}

/* The entry of s that an access of [lo, hi) (write) races with, or NULL:
   they overlap and one of them writes. */
static const pacc *pset_meets(const pset *s, uint64_t lo, uint64_t hi,
                              int write) {
  for (size_t i = 0; s && i < s->n; i++) {
    const pacc *e = &s->v[i];
    if ((write || e->write) && lo < e->hi && e->lo < hi) return e;
  }
  return NULL;
}

/* "kernel 'k', sent at script.lua:5", or its node's capture and its
   graph's launch (graph). */
static const char *who_of(const op *o, const char *graph) {
  char what[200], buf[600];
  if (o->type == CU_GRAPH_NODE_TYPE_KERNEL)
    snprintf(what, sizeof what, "kernel '%s'", o->f->name);
  else
    snprintf(what, sizeof what, "%s", o->type == CU_GRAPH_NODE_TYPE_MEMCPY
             ? "a copy" : o->type == CU_GRAPH_NODE_TYPE_MEMSET ? "a fill"
             : "work");
  const char *at = o->where ? o->where : "(no Lua line)";
  if (graph)
    snprintf(buf, sizeof buf, "%s, its node captured at %s, in the graph "
             "launched at %s", what, at, graph);
  else
    snprintf(buf, sizeof buf, "%s, sent at %s", what, at);
  return dbl_intern(buf);
}

/* -- the checks ------------------------------------------------------------ */

void dbl_pdl_access(dbl_pctx *c, uint64_t base, uint64_t lo, uint64_t hi,
                    int write) {
  if (lo >= hi) return;
  if (c->out) pset_add(&c->out->acc, base, lo, hi, write, c->who, NULL);
  for (int i = 0; i < 2 && !c->hit.who; i++) {
    const pacc *e = pset_meets(c->open[i], lo, hi, write);
    if (!e) continue;
    c->hit = *e;
    c->hit_lo = lo > e->lo ? lo : e->lo;
    c->hit_hi = hi < e->hi ? hi : e->hi;
    c->hit_write = write;
  }
}

unsigned dbl_pdl_early(void *runner, uint64_t p, uint64_t n, int write) {
  const dbl_pctx *c = ((const dbl_runner *)runner)->pdl;
  const pacc *e = pset_meets(&c->before, p, p + n, write);
  return e ? (unsigned)(e - c->before.v) + 1 : 0;
}

static const char RULE[] = "CUDA_SIM_STRICT=0 turns this check off)";

void dbl_pdl_report_early(const dbl_pctx *c, unsigned hit, uint64_t p,
                          uint64_t n, int write, const char *at) {
  const pacc *e = &c->before.v[hit - 1];
  uint64_t a = p > e->lo ? p : e->lo, b = p + n < e->hi ? p + n : e->hi;
  char how[400] = "";
  if (e->via)
    snprintf(how, sizeof how, ", and %s, between them, let the kernels "
             "after it start before it had waited for the kernel before it "
             "(its griddepcontrol.launch_dependents came before its "
             "griddepcontrol.wait, or it had none)", e->via);
  dbl_report("a race with the kernel before a programmatic launch: %s, %s "
             "bytes %llu to %llu of the memory at 0x%llx before its "
             "griddepcontrol.wait, in thread %s, which %s%s %s%s: a "
             "programmatic launch may start while the kernel before it "
             "runs, and only griddepcontrol.wait waits for that kernel to "
             "complete and its memory to be visible (the programmatic "
             "launch rule: run griddepcontrol.wait before any access of "
             "global memory that the kernels before it may touch; %s",
             c->who, write ? "writes" : "reads",
             (unsigned long long)(a - e->base),
             (unsigned long long)(b - e->base), (unsigned long long)e->base,
             at, e->who, e->via ? "," : ", the kernel before it,",
             e->write ? "writes" : "reads", how, RULE);
}

/* The end of an op's run: its open hit reported, and a programmatic
   kernel's reach and leak from what its run showed (waited, wait_first). */
static void finish(dbl_pctx *c) {
  if (c->hit.who)
    dbl_report("a race after a programmatic launch: %s, %s bytes %llu to "
               "%llu of the memory at 0x%llx, which %s, %s, and nothing "
               "orders the two: %s, between them, was launched programmatic "
               "and ran no griddepcontrol.wait, so it may complete before "
               "the kernel before it, and the work after it start (the "
               "programmatic launch rule: a programmatic launch runs "
               "griddepcontrol.wait before it ends; %s", c->who,
               c->hit_write ? "writes" : "reads",
               (unsigned long long)(c->hit_lo - c->hit.base),
               (unsigned long long)(c->hit_hi - c->hit.base),
               (unsigned long long)c->hit.base, c->hit.who,
               c->hit.write ? "writes" : "reads", c->hit.via, RULE);
  if (c->out && c->prog) {
    if (!c->wait_first) pset_join(&c->out->reach, &c->before, c->who);
    if (!c->waited) pset_join(&c->out->leak, &c->before, c->who);
  }
  pset_free(&c->before);
  now = c->saved;
}

static void begin(dbl_pctx *c) {
  c->saved = now;
  now = c;
}

/* -- a stream's order ------------------------------------------------------ */

void dbl_pdl_begin(dbl_porder *po, dbl_pctx *c, const op *o, uint64_t seq,
                   uint64_t known) {
  memset(c, 0, sizeof *c);
  if (po->open.n && known >= po->open_seq) pset_free(&po->open);
  c->open[0] = po->open.n ? &po->open : NULL;
  if (o) c->who = who_of(o, NULL);
  if (o && o->type == CU_GRAPH_NODE_TYPE_KERNEL) {
    c->out = &c->rec;
    /* right after a kernel of its stream that the host did not wait for */
    if (o->prog && po->last_seq && po->last_seq + 1 == seq &&
        known < po->last_seq) {
      c->prog = 1;
      pset_join(&c->before, &po->last.acc, NULL);
      pset_join(&c->before, &po->last.reach, NULL);
    }
  }
  begin(c);
}

void dbl_pdl_end(dbl_porder *po, dbl_pctx *c, uint64_t seq) {
  finish(c);
  if (!c->out) return;
  if (c->rec.leak.n) {
    pset_join(&po->open, &c->rec.leak, NULL);
    po->open_seq = seq;
  }
  pkernel_free(&po->last);
  po->last = c->rec;
  po->last_seq = seq;
}

void dbl_porder_free(dbl_porder *po) {
  pkernel_free(&po->last);
  pset_free(&po->open);
  memset(po, 0, sizeof *po);
}

/* -- a graph's run --------------------------------------------------------- */

int dbl_pplan_begin(dbl_pplan *pp, size_t n, const size_t *start,
                    const size_t *dep) {
  memset(pp, 0, sizeof *pp);
  pp->saved = now;
  if (!now) return 0;
  pset_join(&pp->outer, now->open[0], NULL);
  pset_join(&pp->outer, now->open[1], NULL);
  int prog = 0;
  for (size_t i = 0; i < start[n] && !prog; i++) prog = dep[i] & 1;
  if ((prog || pp->outer.n) && (pp->k = calloc(n ? n : 1, sizeof *pp->k)) &&
      (pp->in = calloc(n ? n : 1, sizeof *pp->in))) {
    pp->n = n;
    return 1;
  }
  free(pp->k);
  pp->k = NULL;
  pset_free(&pp->outer);
  now = NULL; /* nothing to check in it */
  return 0;
}

void dbl_pplan_end(dbl_pplan *pp) {
  for (size_t i = 0; pp->k && i < pp->n; i++) {
    pkernel_free(&pp->k[i]);
    pset_free(&pp->in[i]);
  }
  free(pp->k);
  free(pp->in);
  pset_free(&pp->outer);
  now = pp->saved;
}

void dbl_pnode_begin(dbl_pplan *pp, dbl_pctx *c, size_t i, const op *o,
                     const size_t *start, const size_t *dep,
                     const char *graph) {
  memset(c, 0, sizeof *c);
  for (size_t j = start[i]; j < start[i + 1]; j++) {
    size_t d = dep[j] / 2;
    pset_join(&pp->in[i], &pp->in[d], NULL); /* left unordered before it */
    pset_join(&pp->in[i], &pp->k[d].leak, NULL);
    if (dep[j] & 1 && o->type == CU_GRAPH_NODE_TYPE_KERNEL) {
      c->prog = 1;
      pset_join(&c->before, &pp->k[d].acc, NULL);
      pset_join(&c->before, &pp->k[d].reach, NULL);
    }
  }
  c->open[0] = pp->outer.n ? &pp->outer : NULL;
  c->open[1] = pp->in[i].n ? &pp->in[i] : NULL;
  c->who = who_of(o, graph);
  if (o->type == CU_GRAPH_NODE_TYPE_KERNEL) c->out = &pp->k[i];
  begin(c);
}

void dbl_pnode_end(dbl_pctx *c) { finish(c); }
