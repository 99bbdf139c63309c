/* User objects: a pointer and a destructor with a reference count, whose
   references the caller, graphs and instantiated graphs hold
   (cuUserObjectCreate, Retain, Release, cuGraphRetainUserObject,
   cuGraphReleaseUserObject). A graph's references go with it, and its
   copies (cuGraphClone, a child graph node's) hold references of their
   own; an instantiated graph holds those of its graph, bodies and child
   graphs included, takes the new graph's at an update, and lets go of
   what it held once its last launch is over: at once here (work runs when
   it is sent), or when the device stops being busy (CUDA_DOUBLE_BUSY),
   never while it runs for ever (CUDA_DOUBLE_HANG). As with the driver,
   the destructor runs on a thread of the driver's own (made on first use),
   never in the caller's thread, and may make no CUDA call there (the entry
   points refuse it, CUDA_ERROR_NOT_PERMITTED); a release due at once has
   it run before the call that made it returns (the driver promises no
   time: this one is the one a test can count on). Counts and the queue of
   releases change under a lock of their own, after the entry points'. */
#include "double.h"

#include <limits.h>
#include <stdlib.h>
#include <time.h>

struct CUuserObject_st {
  struct CUuserObject_st *prev, *next; /* the live ones (under th.lock): an
                           object a failed release leaves stays reachable */
  unsigned refs;
  void *ptr;
  CUhostFn destroy;
};

/* A release of n references of o, due at time at (CLOCK_MONOTONIC seconds;
   0: at once), on the queue of the destructors' thread. */
typedef struct release {
  struct release *next;
  CUuserObject o;
  unsigned n;
  double at;
  int *done;            /* a release due at once: set when it is over */
} release;

static struct {
  pthread_mutex_t lock;
  pthread_cond_t work, over;
  release *queue;
  int started;
  struct CUuserObject_st *live;
} th = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
         PTHREAD_COND_INITIALIZER, NULL, 0, NULL };

static double mono(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Takes the releases that are due from the queue, under th.lock: the
   objects whose count reached zero, chained through their release; and
   the time the next one falls due (0: none). */
static release *due(double *next) {
  double now = mono();
  release *dead = NULL, **p = &th.queue;
  *next = 0;
  while (*p) {
    release *r = *p;
    if (r->at > now) {
      if (!*next || r->at < *next) *next = r->at;
      p = &r->next;
      continue;
    }
    *p = r->next;
    r->o->refs -= r->n < r->o->refs ? r->n : r->o->refs;
    if (r->o->refs) {
      if (r->done) *r->done = 1;
      free(r);
      pthread_cond_broadcast(&th.over);
    } else {
      r->next = dead;
      dead = r;
    }
  }
  return dead;
}

static void *destructors(void *arg) {
  (void)arg;
  dbl_callback_thread();
  pthread_mutex_lock(&th.lock);
  for (;;) {
    double next;
    release *dead = due(&next);
    if (dead) {
      pthread_mutex_unlock(&th.lock);
      release *ran = dead;
      for (release *r = dead; r; r = r->next) r->o->destroy(r->o->ptr);
      pthread_mutex_lock(&th.lock);
      while (ran) {
        release *r = ran;
        ran = r->next;
        if (r->done) *r->done = 1;
        if (r->o->prev) r->o->prev->next = r->o->next;
        else th.live = r->o->next;
        if (r->o->next) r->o->next->prev = r->o->prev;
        free(r->o);
        free(r);
      }
      pthread_cond_broadcast(&th.over);
    } else if (next) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      double wait = next - mono(), s = (double)ts.tv_sec +
                    (double)ts.tv_nsec * 1e-9 + (wait > 0 ? wait : 0);
      ts.tv_sec = (time_t)s;
      ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
      pthread_cond_timedwait(&th.work, &th.lock, &ts);
    } else {
      pthread_cond_wait(&th.work, &th.lock);
    }
  }
  return NULL;
}

/* Queues the release of n references of o at time at, and waits for one
   due at once to be over; 0 when out of memory or no thread can be made
   (they stay held). */
static int queue_release(CUuserObject o, unsigned n, double at) {
  release *r = malloc(sizeof *r);
  if (!r) return 0;
  int done = 0;
  *r = (release){NULL, o, n, at, at > mono() ? NULL : &done};
  pthread_mutex_lock(&th.lock);
  if (!th.started) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    th.started = pthread_create(&t, &attr, destructors, NULL) == 0;
    pthread_attr_destroy(&attr);
  }
  int ok = th.started, wait = r->done != NULL;
  if (ok) {
    r->next = th.queue;
    th.queue = r;
    pthread_cond_signal(&th.work);
    while (wait && !done) pthread_cond_wait(&th.over, &th.lock);
  } else {
    free(r);
  }
  pthread_mutex_unlock(&th.lock);
  return ok;
}

int dbl_uo_copy(uorefs *to, const uorefs *from) {
  for (size_t i = 0; i < from->n; i++) {
    if (!from->v[i].n) continue; /* released: o may be gone */
    size_t j = 0;
    while (j < to->n && to->v[j].o != from->v[i].o) j++;
    if (j == to->n) {
      if (to->n == to->cap) {
        size_t c = to->cap ? 2 * to->cap : 4;
        uoref *v = realloc(to->v, c * sizeof *v);
        if (!v) return 1;
        to->v = v;
        to->cap = c;
      }
      to->v[to->n++] = (uoref){from->v[i].o, 0};
    }
    pthread_mutex_lock(&th.lock);
    from->v[i].o->refs += from->v[i].n;
    pthread_mutex_unlock(&th.lock);
    to->v[j].n += from->v[i].n;
  }
  return 0;
}

void dbl_uo_release(uorefs *r, double done) {
  for (size_t i = 0; i < r->n; i++)
    if (r->v[i].n) queue_release(r->v[i].o, r->v[i].n, done);
  free(r->v);
  *r = (uorefs){NULL, 0, 0};
}

double dbl_work_done(void) {
  if (dbl_hung) return 1e300; /* never */
  return dbl_busy() ? dbl_busy_until() : 0;
}

/* A live object of refs references whose destructor is fn(data); NULL
   when out of memory. */
static CUuserObject make_object(void *data, CUhostFn fn, unsigned refs) {
  CUuserObject o = malloc(sizeof *o);
  if (!o) return NULL;
  pthread_mutex_lock(&th.lock);
  *o = (struct CUuserObject_st){NULL, th.live, refs, data, fn};
  if (th.live) th.live->prev = o;
  th.live = o;
  pthread_mutex_unlock(&th.lock);
  return o;
}

/* One reference to an object of the runtime's own whose destructor is
   fn: released at at, it runs fn(data) there, on the thread and under the
   rules of destructors. */
CUresult dbl_host_later(CUhostFn fn, void *data, double at) {
  CUuserObject o = make_object(data, fn, 1);
  return o && queue_release(o, 1, at) ? CUDA_SUCCESS
                                      : CUDA_ERROR_OUT_OF_MEMORY;
}

static int count_ok(unsigned n) { return n && n <= INT_MAX; }

CUresult CUDAAPI cuUserObjectCreate(CUuserObject *object_out, void *ptr,
                                    CUhostFn destroy, unsigned int initialRefcount,
                                    unsigned int flags) {
  ENTRY(cuUserObjectCreate);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!object_out || !destroy || !count_ok(initialRefcount) ||
      flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)
    return CUDA_ERROR_INVALID_VALUE;
  CUuserObject o = make_object(ptr, destroy, initialRefcount);
  if (!o) return CUDA_ERROR_OUT_OF_MEMORY;
  *object_out = o;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuUserObjectRetain(CUuserObject object, unsigned int count) {
  ENTRY(cuUserObjectRetain);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!object || !count_ok(count)) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&th.lock);
  object->refs += count;
  pthread_mutex_unlock(&th.lock);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuUserObjectRelease(CUuserObject object, unsigned int count) {
  ENTRY(cuUserObjectRelease);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!object || !count_ok(count)) return CUDA_ERROR_INVALID_VALUE;
  return queue_release(object, count, 0) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* MOVE takes count of the caller's references; else new ones. */
CUresult CUDAAPI cuGraphRetainUserObject(CUgraph graph, CUuserObject object,
                                         unsigned int count, unsigned int flags) {
  ENTRY(cuGraphRetainUserObject);
  CUresult r = dbl_enter_graph();
  if (r) return r;
  if (!graph || !object || !count_ok(count) ||
      (flags & ~(unsigned)CU_GRAPH_USER_OBJECT_MOVE))
    return CUDA_ERROR_INVALID_VALUE;
  uoref one = {object, count};
  uorefs from = {&one, 1, 1};
  if (dbl_uo_copy(&graph->uos, &from)) return CUDA_ERROR_OUT_OF_MEMORY;
  if (flags & CU_GRAPH_USER_OBJECT_MOVE) { /* the copy counted them again */
    pthread_mutex_lock(&th.lock);
    object->refs -= count;
    pthread_mutex_unlock(&th.lock);
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphReleaseUserObject(CUgraph graph, CUuserObject object,
                                          unsigned int count) {
  ENTRY(cuGraphReleaseUserObject);
  CUresult r = dbl_enter_graph();
  if (r) return r;
  if (!graph || !object || !count_ok(count)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < graph->uos.n; i++)
    if (graph->uos.v[i].o == object && graph->uos.v[i].n >= count) {
      graph->uos.v[i].n -= count;
      return queue_release(object, count, 0) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
  return CUDA_ERROR_INVALID_VALUE;
}
