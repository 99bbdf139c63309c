/* Deferred work: the simulator's strict mode (dbl_strict: CUDA_SIM_STRICT,
   on unless it is 0; the test double never). Work sent to a stream is not
   done when the call returns, as on a GPU: it waits in the stream's queue
   until something waits for it (a stream, event or device synchronize, a
   query, a blocking copy, a free), and then runs in each stream's order,
   a stream's wait on an event running the other stream's work up to the
   event's record first. Meanwhile the simulator checks the rules the GPU
   punishes with wrong data rather than an error:

   - host memory that work still to run writes (the host side of a copy
     from the device), or reads (the source of a copy to it), is pending:
     the runtime asks before touching it (cuSimHostAccess);
   - two streams' accesses of the same device (or page-locked host)
     memory, one of them a write, with nothing ordering them (an event
     recorded after one and waited for before the other, a host wait
     between them): the wait that runs the second returns
     CUDA_ERROR_NOT_PERMITTED, with a report (cuSimTakeReport; the check
     is races.c's).

   Order is followed with vector clocks: each queue's next task knows the
   tasks of other queues that its queue waited for (by an event, or by
   the host: a task sent after a host wait knows what the wait saw done).
   Every report names the Lua lines the runtime gave for the calls
   (cuSimSetLuaLine). Work that others outside the process see (external
   semaphores) and copies with pageable host memory run when they are
   sent, as they complete on a GPU; a stream holds at most QUEUE_MAX
   pending calls, past which its oldest run, as a full queue makes a
   GPU's launches wait. */
#include "double.h"
#include "queue.h"
#include "programmatic.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dbl_strict;

enum { QUEUE_MAX = 1024 };

/* The simulator's own entry points take the lock as every entry point
   does, but are neither counted nor failed on purpose (CUDA_DOUBLE_TRACE,
   CUDA_DOUBLE_FAULT): they check the work, and are no part of it. */
#define LOCKED()                                                            \
  pthread_mutex_t *held_ __attribute__((cleanup(dbl_drop_lock), unused)) =  \
    dbl_take_lock()

static _Thread_local const char *lua_line; /* of the calls this thread sends */

const char *dbl_lua_line(void) { return lua_line; }

#ifdef CUDA_SIM
CUresult CUDAAPI cuSimSetLuaLine(const char *where) {
  LOCKED();
  lua_line = where && *where ? dbl_intern(where) : NULL;
  return CUDA_SUCCESS;
}
#endif

/* -- vector clocks --------------------------------------------------------- */

/* What a task follows: for each queue, the last of its tasks ordered
   before it (sorted by queue). Shared, never changed once made; NULL is
   the clock that knows nothing. */
typedef struct tick { unsigned q; uint64_t seq; } tick;
typedef struct vclock { unsigned refs, n; tick t[]; } vclock;

static vclock *vc_ref(vclock *c) {
  if (c) c->refs++;
  return c;
}

static void vc_drop(vclock *c) {
  if (c && !--c->refs) free(c);
}

static uint64_t vc_get(const vclock *c, unsigned q) {
  for (unsigned i = 0; c && i < c->n; i++)
    if (c->t[i].q == q) return c->t[i].seq;
  return 0;
}

/* a joined with b and with (q, seq) when q: a new reference (a itself
   when it knew all of it already). Out of memory: a, unjoined (a check may
   then report a race that was ordered). */
static vclock *vc_join(vclock *a, const vclock *b, unsigned q, uint64_t seq) {
  int news = q && vc_get(a, q) < seq;
  for (unsigned i = 0; !news && b && i < b->n; i++)
    news = vc_get(a, b->t[i].q) < b->t[i].seq;
  if (!news) return vc_ref(a);
  unsigned na = a ? a->n : 0, nb = b ? b->n : 0, i = 0, j = 0;
  vclock *c = malloc(sizeof *c + (na + nb + 1) * sizeof(tick));
  if (!c) return vc_ref(a);
  c->refs = 1;
  c->n = 0;
  while (i < na || j < nb) { /* both sorted by queue */
    tick x;
    if (j >= nb || (i < na && a->t[i].q < b->t[j].q)) {
      x = a->t[i++];
    } else if (i >= na || b->t[j].q < a->t[i].q) {
      x = b->t[j++];
    } else {
      x = a->t[i++];
      if (b->t[j].seq > x.seq) x.seq = b->t[j].seq;
      j++;
    }
    c->t[c->n++] = x;
  }
  if (q) { /* (q, seq) into its place */
    unsigned k = 0;
    while (k < c->n && c->t[k].q < q) k++;
    if (k < c->n && c->t[k].q == q) {
      if (c->t[k].seq < seq) c->t[k].seq = seq;
    } else {
      memmove(c->t + k + 1, c->t + k, (c->n - k) * sizeof(tick));
      c->t[k] = (tick){q, seq};
      c->n++;
    }
  }
  return c;
}

/* Replaces *slot with its join (above). */
static void vc_merge(vclock **slot, const vclock *b, unsigned q,
                     uint64_t seq) {
  vclock *c = vc_join(*slot, b, q, seq);
  vc_drop(*slot);
  *slot = c;
}

/* What the host knows done: joined by every wait that returns. Tasks sent
   after a wait know it (a queue joins it when sent to). */
static vclock *host;
static unsigned host_version;

/* -- queues and tasks ------------------------------------------------------ */

enum { T_OP, T_GRAPH, T_WAIT, T_RECORD };

struct task {
  struct task *next;
  int kind;
  op o;                 /* T_OP: the work, owning its args */
  CUgraphExec x;        /* T_GRAPH */
  queue *wq;            /* T_WAIT: until wq has run wseq (NULL: nothing) */
  uint64_t wseq;
  CUevent e;            /* T_RECORD (NULL once the event is gone) */
  uint64_t seq;         /* its place in its queue, from 1 */
  int host;             /* touches host memory: counted in host_tasks */
  vclock *vc;           /* what it follows */
  const char *where;    /* the Lua line of the call that sent it */
};

struct queue {
  unsigned id;          /* in clocks; never 0 */
  int dev;
  int blocking;         /* a blocking stream: the legacy stream's waits */
  int legacy;
  task *head, *tail;
  size_t n;
  uint64_t sent, done;  /* tasks sent and run */
  vclock *vc;           /* what its next task follows */
  vclock *done_vc;      /* what its last task run followed, and that task */
  unsigned host_seen;   /* host_version last joined */
  int busy;             /* a task of it runs (a semaphore wait naps) */
  int orphan;           /* its stream is destroyed */
  dbl_porder po;        /* its kernels, for programmatic launches */
  struct queue *prev, *next; /* every queue, for the device's waits */
};

static queue all = {.prev = &all, .next = &all};
static queue legacy[MAX_DEVICES];
static unsigned queue_ids;
static size_t host_tasks; /* pending tasks with host memory */

static void link_queue(queue *q, int dev, int blocking) {
  q->id = ++queue_ids;
  q->dev = dev;
  q->blocking = blocking;
  q->prev = all.prev;
  q->next = &all;
  all.prev->next = q;
  all.prev = q;
}

queue *dbl_queue_new(int dev, int blocking) {
  queue *q = calloc(1, sizeof *q);
  if (q) link_queue(q, dev, blocking);
  return q;
}

static queue *legacy_of(int dev) {
  queue *q = &legacy[dev];
  if (!q->id) {
    link_queue(q, dev, 0);
    q->legacy = 1;
  }
  return q;
}

/* The queue of s (NULL: the legacy stream of the current device). */
static queue *queue_of(CUstream s) {
  return s ? s->q : legacy_of(dbl_cur_dev());
}

/* Whether o reads (or writes) host memory when it runs. */
static int host_side(const op *o) {
  return o->type == CU_GRAPH_NODE_TYPE_MEMCPY && (o->hdst || o->hsrc);
}

static void free_task(task *t) {
  if (t->kind == T_OP) free(t->o.args);
  host_tasks -= (size_t)t->host;
  vc_drop(t->vc);
  free(t);
}

/* -- running --------------------------------------------------------------- */

static _Thread_local task *running; /* the task this thread runs */
static _Thread_local queue *running_q;

const char *dbl_running_where(void) {
  return running && running->kind == T_GRAPH ? running->where : NULL;
}

/* The first failed check since a wait last told one; what this thread's
   next cuSimTakeReport gives (malloc'd: a library opened late has little
   static TLS). */
static char report[1600];
static int reported;
static _Thread_local char *told;

void dbl_report(const char *fmt, ...) {
  if (reported) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(report, sizeof report, fmt, ap);
  va_end(ap);
  reported = 1;
}

void dbl_tell(const char *text) {
  free(told);
  size_t n = strlen(text) + 1;
  if ((told = malloc(n))) memcpy(told, text, n);
}

#ifdef CUDA_SIM
CUresult CUDAAPI cuSimTakeReport(char *text, size_t size) {
  LOCKED();
  if (!text || !size) return CUDA_ERROR_INVALID_VALUE;
  if (!told) return CUDA_ERROR_NOT_FOUND;
  snprintf(text, size, "%s", told);
  free(told);
  told = NULL;
  return CUDA_SUCCESS;
}
#endif

static CUresult run_upto(queue *q, uint64_t seq);

static CUresult run_task(queue *q, task *t) {
  CUresult r = CUDA_SUCCESS;
  task *outer = running;
  queue *outer_q = running_q;
  running = t;
  running_q = q;
  switch (t->kind) {
  case T_WAIT:
    if (t->wq) r = run_upto(t->wq, t->wseq);
    break;
  case T_RECORD:
    if (t->e) dbl_event_done(t->e);
    break;
  case T_OP: case T_GRAPH: {
    dbl_pctx c;
    dbl_pdl_begin(&q->po, &c, t->kind == T_OP ? &t->o : NULL, t->seq,
                  vc_get(t->vc, q->id));
    r = t->kind == T_OP ? dbl_run_op(&t->o, 0) : dbl_graph_run(t->x);
    dbl_pdl_end(&q->po, &c, t->seq);
    break;
  }
  }
  running = outer;
  running_q = outer_q;
  return r;
}

/* Runs q's tasks up to seq (those of other queues it waits for first): the
   first error, a stop (CUDA_ERROR_TIMEOUT: the task stopped is over, the
   rest stay) or a sticky one. */
static CUresult run_upto(queue *q, uint64_t seq) {
  while (q->done < seq && !dbl_sticky) {
    if (q->busy) { /* another thread's task of q naps: it goes first */
      dbl_nap(50);
      continue;
    }
    task *t = q->head;
    q->head = t->next;
    if (!q->head) q->tail = NULL;
    q->n--;
    q->busy = 1;
    CUresult r = run_task(q, t);
    q->busy = 0;
    q->done = t->seq;
    vc_drop(q->done_vc);
    q->done_vc = vc_join(t->vc, NULL, q->id, t->seq);
    free_task(t);
    if (r) return r;
  }
  return dbl_sticky;
}

/* The host knows q done up to where it ran. */
static void host_knows(const queue *q) {
  vclock *c = vc_join(host, q->done_vc, 0, 0);
  if (c != host) host_version++;
  vc_drop(host);
  host = c;
}

/* The end of a wait: a check that failed meanwhile is its error
   (CUDA_ERROR_NOT_PERMITTED, the report told to this thread), unless a
   worse one came. */
static CUresult waited(CUresult r) {
  dbl_flush_output();
  if (r || !reported) return r;
  reported = 0;
  dbl_tell(report);
  return CUDA_ERROR_NOT_PERMITTED;
}

CUresult dbl_wait_stream(CUstream s) {
  queue *q = queue_of(s);
  dbl_work_begin();
  CUresult r = run_upto(q, q->sent);
  host_knows(q);
  return waited(r);
}

CUresult dbl_wait_event(CUevent e) {
  dbl_work_begin();
  CUresult r = e->rq ? run_upto(e->rq, e->rseq) : dbl_sticky;
  if (!r) {
    vclock *c = vc_join(host, e->vc, 0, 0);
    if (c != host) host_version++;
    vc_drop(host);
    host = c;
  }
  return waited(r);
}

/* Runs every queue of device dev (all devices: -1) to its end. */
static CUresult run_device(int dev) {
  CUresult r = CUDA_SUCCESS;
  for (queue *q = all.next; q != &all && !r; q = q->next)
    if (dev < 0 || q->dev == dev) {
      r = run_upto(q, q->sent);
      host_knows(q);
    }
  return r;
}

/* The queues of destroyed streams whose work has all run go. */
static void sweep(void) {
  for (queue *q = all.next, *next; q != &all; q = next) {
    next = q->next;
    if (q->orphan && q->done == q->sent) dbl_queue_free(q);
  }
}

CUresult dbl_wait_device(void) {
  dbl_work_begin();
  CUresult r = run_device(dbl_cur_dev());
  sweep();
  return waited(r);
}

#ifdef CUDA_SIM
/* A library stand-in's call computes at once on the host: the work sent
   to s before it runs first (a failed check is kept for the next wait). */
CUresult CUDAAPI cuSimRunStream(CUstream s) {
  LOCKED();
  CUresult r = dbl_enter();
  if (r || !dbl_strict) return r;
  queue *q = queue_of(dbl_stream_of(s));
  dbl_work_begin();
  r = run_upto(q, q->sent);
  return r == CUDA_ERROR_TIMEOUT ? CUDA_SUCCESS : r;
}
#endif

CUresult dbl_settle(void) {
  if (!dbl_strict) return dbl_sticky;
  dbl_work_begin();
  if (run_device(-1) == CUDA_SUCCESS) dbl_flush_output();
  sweep();
  return dbl_sticky;
}

/* -- sending --------------------------------------------------------------- */

/* A new task at the end of q, following what q and the host know. */
static task *push(queue *q, int kind) {
  task *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  if (q->host_seen != host_version) {
    vc_merge(&q->vc, host, 0, 0);
    q->host_seen = host_version;
  }
  t->kind = kind;
  t->seq = ++q->sent;
  t->vc = vc_ref(q->vc);
  t->where = lua_line;
  if (q->tail) q->tail->next = t;
  else q->head = t;
  q->tail = t;
  q->n++;
  return t;
}

/* q waits for what wq has been sent so far. */
static CUresult push_wait(queue *q, queue *wq, const vclock *vc) {
  if (wq->done >= wq->sent && !vc) return CUDA_SUCCESS;
  task *t = push(q, T_WAIT);
  if (!t) return CUDA_ERROR_OUT_OF_MEMORY;
  t->wq = wq->done < wq->sent ? wq : NULL;
  t->wseq = wq->sent;
  vc_merge(&q->vc, vc ? vc : wq->vc, wq->id, wq->sent);
  return CUDA_SUCCESS;
}

/* The legacy stream and the blocking streams wait for each other. */
static CUresult implicit_waits(queue *q) {
  CUresult r = CUDA_SUCCESS;
  if (q->legacy) {
    for (queue *b = all.next; b != &all && !r; b = b->next)
      if (b->blocking && b->dev == q->dev && b->done < b->sent)
        r = push_wait(q, b, NULL);
  } else if (q->blocking) {
    queue *l = legacy_of(q->dev);
    if (l->done < l->sent) r = push_wait(q, l, NULL);
  }
  return r;
}

/* The end of a send: a full queue runs its oldest. */
static CUresult sent(queue *q) {
  if (q->n <= QUEUE_MAX) return CUDA_SUCCESS;
  CUresult r = run_upto(q, q->done + 1);
  return r == CUDA_ERROR_TIMEOUT ? CUDA_SUCCESS : r;
}

/* Whether the host memory [p, p + n) is page-locked (cuMemHostAlloc). */
static int pinned_range(const void *p, size_t n) {
  uint64_t base, size;
  return !p || (dbl_host_block((uint64_t)(uintptr_t)p, &base, &size) &&
                (uint64_t)(uintptr_t)p + n <= base + size);
}

/* The bytes of a copy's host side (at p, rows and slices as o lays them
   out). */
static size_t host_extent(const op *o, int dst) {
  if (!o->height) return o->bytes;
  size_t pitch = dst ? o->dpitch : o->spitch, slice = dst ? o->dslice
                                                           : o->sslice;
  return (o->depth - 1) * slice + (o->height - 1) * pitch + o->bytes;
}

/* Work that runs when it is sent: seen outside the process (external
   semaphores), or a copy with pageable host memory (a GPU completes a
   copy to it before the call returns, and reads one from it then). */
static int at_once(const op *o) {
  if (o->type == CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL ||
      o->type == CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT)
    return 1;
  return host_side(o) && (!pinned_range(o->hdst, host_extent(o, 1)) ||
                          !pinned_range(o->hsrc, host_extent(o, 0)));
}

CUresult dbl_enqueue(CUstream s, op *o) {
  queue *q = queue_of(s);
  CUresult r = implicit_waits(q);
  task *t = r ? NULL : push(q, T_OP);
  if (!t) {
    free(o->args);
    return r ? r : CUDA_ERROR_OUT_OF_MEMORY;
  }
  t->o = *o;
  t->o.where = t->where;
  if (at_once(o)) {
    dbl_work_begin();
    r = run_upto(q, t->seq);
    if (host_side(o)) host_knows(q); /* a copy the call completed */
    return r;
  }
  t->host = host_side(o);
  host_tasks += (size_t)t->host;
  return sent(q);
}

CUresult dbl_enqueue_graph(CUstream s, CUgraphExec x) {
  queue *q = queue_of(s);
  CUresult r = implicit_waits(q);
  task *t = r ? NULL : push(q, T_GRAPH);
  if (!t) return r ? r : CUDA_ERROR_OUT_OF_MEMORY;
  t->x = x;
  if (dbl_exec_semas(x)) { /* seen outside: at once */
    dbl_work_begin();
    return run_upto(q, t->seq);
  }
  t->host = dbl_exec_host_side(x);
  host_tasks += (size_t)t->host;
  return sent(q);
}

CUresult dbl_enqueue_record(CUstream s, CUevent e) {
  queue *q = queue_of(s);
  task *t = push(q, T_RECORD);
  if (!t) return CUDA_ERROR_OUT_OF_MEMORY;
  t->e = e;
  e->rq = q;
  e->rseq = t->seq;
  vc_drop(e->vc);
  e->vc = vc_join(q->vc, NULL, q->id, t->seq);
  return sent(q);
}

CUresult dbl_enqueue_wait(CUstream s, CUevent e) {
  queue *q = queue_of(s), *eq = e->rq;
  if (!e->vc || eq == q) return CUDA_SUCCESS;
  task *t = push(q, T_WAIT);
  if (!t) return CUDA_ERROR_OUT_OF_MEMORY;
  t->wq = eq && eq->done < e->rseq ? eq : NULL;
  t->wseq = e->rseq;
  vc_merge(&q->vc, e->vc, 0, 0);
  return sent(q);
}

void dbl_event_ran(CUevent e) {
  vc_drop(e->vc);
  e->vc = running ? vc_join(running->vc, NULL, running_q->id, running->seq)
                  : NULL;
  e->rq = NULL;
}

/* An event gone: its pending record records nothing. */
void dbl_forget_event(CUevent e) {
  for (queue *q = all.next; q != &all; q = q->next)
    for (task *t = q->head; t; t = t->next)
      if (t->kind == T_RECORD && t->e == e) t->e = NULL;
  vc_drop(e->vc);
  e->vc = NULL;
  e->rq = NULL;
}

/* A queue gone (its stream destroyed, after its work ran): waits on it are
   waits on nothing. */
void dbl_queue_free(queue *q) {
  if (!q) return;
  for (queue *o = all.next; o != &all; o = o->next)
    for (task *t = o->head; t; t = t->next)
      if (t->kind == T_WAIT && t->wq == q) t->wq = NULL;
  for (obj *o = dbl_live.next; o != &dbl_live; o = o->next)
    if (o->kind == O_EVENT && ((CUevent)o)->rq == q) ((CUevent)o)->rq = NULL;
  while (q->head) {
    task *t = q->head;
    q->head = t->next;
    free_task(t);
  }
  vc_drop(q->vc);
  vc_drop(q->done_vc);
  dbl_porder_free(&q->po);
  q->prev->next = q->next;
  q->next->prev = q->prev;
  if (q->legacy) memset(q, 0, sizeof *q);
  else free(q);
}

/* A queue whose stream is destroyed: its work still to run stays, for the
   device's waits, until its context goes. */
void dbl_queue_drop(queue *q) {
  if (q && q->done < q->sent) q->orphan = 1;
  else dbl_queue_free(q);
}

/* The queues of device dev go with its context, work still to run too. */
void dbl_queues_end(int dev) {
  for (queue *q = all.next, *next; q != &all; q = next) {
    next = q->next;
    if (q->dev == dev) dbl_queue_free(q);
  }
}

/* -- host memory ----------------------------------------------------------- */

#ifdef CUDA_SIM
/* The pending copy whose host side the access [p, p + n) breaks the rules
   of (write: the access writes), or NULL; *into: it writes that memory. */
static const task *host_conflict(uint64_t p, uint64_t n, int write,
                                 int *into) {
  for (queue *q = all.next; q != &all; q = q->next)
    for (const task *t = q->head; t; t = t->next) {
      if (t->kind == T_GRAPH) {
        int w = dbl_exec_host_meets(t->x, p, n, write);
        if (w) {
          *into = w > 1;
          return t;
        }
        continue;
      }
      if (t->kind != T_OP || !host_side(&t->o)) continue;
      const op *o = &t->o;
      if (o->hdst && dbl_meets(p, n, (uint64_t)(uintptr_t)o->hdst,
                               host_extent(o, 1))) {
        *into = 1;
        return t;
      }
      if (write && o->hsrc && dbl_meets(p, n, (uint64_t)(uintptr_t)o->hsrc,
                                        host_extent(o, 0))) {
        *into = 0;
        return t;
      }
    }
  return NULL;
}

CUresult CUDAAPI cuSimHostAccess(const void *p, size_t n, int write,
                                 char *text, size_t size) {
  LOCKED();
  if (!dbl_strict || !host_tasks || !n) return CUDA_SUCCESS;
  int into = 0;
  const task *t = host_conflict((uint64_t)(uintptr_t)p, n, write, &into);
  if (!t) return CUDA_SUCCESS;
  const char *what = t->kind == T_GRAPH ? "a graph whose copy node" : "a copy";
  const char *at = t->where ? t->where : "(no Lua line)";
  if (text && size)
    snprintf(text, size, "host memory %s while %s %s it, sent at %s, has "
             "not been waited for: the work runs after the call that sends "
             "it returns, and on a GPU the %s %s (the synchronization rule: "
             "synchronize the stream, or wait on an event recorded after "
             "the copy, before touching the memory; CUDA_SIM_STRICT=0 turns "
             "this check off)", write ? "written" : "read", what,
             into ? "into" : "out of", at, write ? "copy" : "read",
             into ? (write ? "may overwrite what is written"
                           : "may see the data before the copy (stale)")
                  : "may read the new values, or the old");
  return CUDA_ERROR_NOT_PERMITTED;
}
#endif

/* -- what the race check (races.c) reads -------------------------------- */

unsigned dbl_queue_id(const queue *q) { return q->id; }
uint64_t dbl_task_seq(const task *t) { return t->seq; }
uint64_t dbl_task_follows(const task *t, unsigned q) { return vc_get(t->vc, q); }
const char *dbl_task_where(const task *t, const op *o) {
  return t->kind == T_GRAPH || !o->where ? t->where : o->where;
}

/* An access of [p, p + n) by the running op o, where memory is followed. */
static void access_at(const op *o, uint64_t p, uint64_t n, int write) {
  uint64_t base, size;
  if (!n || (!dbl_device_block(p, &base, &size) &&
             !dbl_host_block(p, &base, &size)))
    return;
  dbl_race_check(running, running_q, o, base, p, p + n, write);
  if (dbl_pdl_now()) dbl_pdl_access(dbl_pdl_now(), base, p, p + n, write);
}

void dbl_track_op(const op *o) {
  if (!running || !dbl_strict) return;
  if (o->type == CU_GRAPH_NODE_TYPE_MEMSET) {
    access_at(o, o->dst, o->height > 1 ? (o->height - 1) * o->pitch +
              o->width * o->elem : o->width * o->elem, 1);
  } else if (o->type == CU_GRAPH_NODE_TYPE_MEMCPY) {
    uint64_t s = o->hsrc ? (uint64_t)(uintptr_t)o->hsrc : o->src;
    uint64_t d = o->hdst ? (uint64_t)(uintptr_t)o->hdst : o->dst;
    access_at(o, s, host_extent(o, 0), 0);
    access_at(o, d, host_extent(o, 1), 1);
  }
}

int dbl_runner_now(dbl_runner *r, const op *o) {
  r->task = running;
  r->queue = running_q;
  r->o = o;
  r->pdl = dbl_pdl_now();
  return running && dbl_strict;
}
