/* Waits: the gate between captures and whole-device waits, bounded
   waits on a stream, an event or a whole device (a waiter thread for
   one that outlasts its bound), and simulated work's stops. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "base/base.h"

/* -- the gate between captures and whole-device waits -------------------- */

/* Process-wide, as the primary context is: every state of the process that
   uses device d shares it. A wait for the whole device first stops new
   captures (waiting), then waits until none is open; captures open only
   while no such wait runs. Contexts are told apart by their handle. */
enum { GATES = 64 };
static struct gate {
  CUcontext cu;
  unsigned open;        /* captures in progress */
  unsigned waiting;     /* whole-device waits that want in, or run */
} gates[GATES];
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static _Thread_local unsigned held; /* captures this thread holds open */

/* The gate of cu, under gate_lock; NULL when the table is full (the gate
   then does not hold: past 64 contexts, as before it existed). */
static struct gate *gate_of(CUcontext cu) {
  struct gate *free_slot = NULL;
  for (int i = 0; i < GATES; i++) {
    if (gates[i].cu == cu) return &gates[i];
    if (!free_slot && !gates[i].open && !gates[i].waiting) free_slot = &gates[i];
  }
  if (free_slot) free_slot->cu = cu;
  return free_slot;
}

/* The CLOCK_REALTIME time t seconds from now, for a timed wait. */
static void deadline(struct timespec *ts, double t);

/* Waits on gate_cond, which gate_lock holds, until *end (NULL: for ever):
   0 once it passed. */
static int gate_wait(const struct timespec *end) {
  if (!end) return pthread_cond_wait(&gate_cond, &gate_lock), 1;
  return pthread_cond_timedwait(&gate_cond, &gate_lock, end) != ETIMEDOUT;
}

int cg_gate_enter(cg_ctx *ctx) {
  double t = ctx->root->timeout;
  struct timespec end;
  if (t > 0) deadline(&end, t);
  pthread_mutex_lock(&gate_lock);
  struct gate *g = gate_of(ctx->cu);
  int in = 1;
  while (in && g && g->waiting && !held) in = gate_wait(t > 0 ? &end : NULL);
  in = in || !g->waiting; /* the last wait may have left as time ran out */
  if (in) {
    if (g) g->open++;
    held++;
  }
  pthread_mutex_unlock(&gate_lock);
  return in;
}

void cg_gate_leave(cg_ctx *ctx) {
  pthread_mutex_lock(&gate_lock);
  struct gate *g = gate_of(ctx->cu);
  if (g && g->open) g->open--;
  if (held) held--;
  pthread_cond_broadcast(&gate_cond);
  pthread_mutex_unlock(&gate_lock);
}

void cg_gate_shut(CUcontext cu) {
  pthread_mutex_lock(&gate_lock);
  struct gate *g = gate_of(cu);
  if (g) {
    g->waiting++;
    while (g->open) gate_wait(NULL);
  }
  pthread_mutex_unlock(&gate_lock);
}

void cg_gate_open(CUcontext cu) {
  pthread_mutex_lock(&gate_lock);
  struct gate *g = gate_of(cu);
  if (g && g->waiting) g->waiting--;
  pthread_cond_broadcast(&gate_cond);
  pthread_mutex_unlock(&gate_lock);
}

int cg_gate_capturing(CUcontext cu) {
  pthread_mutex_lock(&gate_lock);
  struct gate *g = gate_of(cu);
  int open = !g || g->open; /* past 64 contexts: not known */
  pthread_mutex_unlock(&gate_lock);
  return open;
}

/* -- bounded waits --------------------------------------------------------- */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void deadline(struct timespec *ts, double t) {
  clock_gettime(CLOCK_REALTIME, ts);
  double s = (double)ts->tv_sec + ts->tv_nsec * 1e-9 + t;
  ts->tv_sec = (time_t)s;
  ts->tv_nsec = (long)((s - (double)ts->tv_sec) * 1e9);
}

/* Raises CUDA_ERROR_TIMEOUT for api after t seconds: what runs on s. */
static int timed_out(lua_State *L, cg_ctx *ctx, const char *api, CUstream s,
                     double t) {
  cg_ctx *root = ctx->root;
  int base = lua_gettop(L);
  ctx->hung = 1;
  if (root->busy) root->busy(L, ctx, s);
  else lua_pushliteral(L, "");
  lua_pushfstring(L, "the wait ended after %f s with work still running%s; "
                  "the device goes on running it (later waits wait for it "
                  "too; frees of this device are held back until a wait "
                  "sees the work done, and the process ends the work when it "
                  "exits)", t,
                  lua_tostring(L, base + 1));
  cg_pusherror(L, api, (int)CUDA_ERROR_TIMEOUT, "CUDA_ERROR_TIMEOUT",
               lua_tostring(L, -1));
  return lua_error(L);
}

/* Raises CUDA_ERROR_TIMEOUT for api after t seconds at the gate: msg says
   what could not begin, and for what it waited. */
static int error_gate(lua_State *L, const char *api, double t,
                      const char *msg) {
  lua_pushfstring(L, "the wait ended after %f s: %s", t, msg);
  cg_pusherror(L, api, (int)CUDA_ERROR_TIMEOUT, "CUDA_ERROR_TIMEOUT",
               lua_tostring(L, -1));
  return lua_error(L);
}

int cg_error_gate(lua_State *L, cg_ctx *ctx) {
  return error_gate(L, "cuStreamBeginCapture", ctx->root->timeout,
                    "another thread's wait for the whole device (a "
                    "cuda.synchronize, or a call that waits for the device) "
                    "was still running, and holds new captures of the device "
                    "back until it ends; the capture did not begin");
}

/* -- simulated work ---------------------------------------------------------- */

_Thread_local double cg_work_limit;

void cg_work_limit_set(cg_ctx *ctx) {
  if (cg_drv.cuSimSetWorkLimit(ctx->root->timeout) == CUDA_SUCCESS)
    cg_work_limit = ctx->root->timeout;
}

void cg_interrupt(void) {
  if (cg_drv.cuSimInterrupt) cg_drv.cuSimInterrupt();
}

int cg_work_stopped(CUresult r) {
  int why = 0;
  if (r != CUDA_ERROR_TIMEOUT || !cg_drv.cuSimStopReason ||
      cg_drv.cuSimStopReason(&why) != CUDA_SUCCESS)
    return 0;
  return why;
}

/* Raises the error of api, whose work the software driver stopped for why;
   busy: what ran (a string after ": ", or ""). A bound that passed is a
   timed-out wait's error object; an interrupt, lua's "interrupted!". */
int cg_error_stopped_busy(lua_State *L, cg_ctx *ctx, const char *api,
                          int why, const char *busy) {
  cg_trace_raised(ctx);
  if (why == CU_SIM_STOP_INTERRUPT)
    return luaL_error(L, "interrupted! (the software driver stopped the "
                      "work of %s%s)", api, busy);
  lua_pushfstring(L, "the work ran %f s inside the call (the software "
                  "driver runs work inside the call that launches it or, in "
                  "the simulator's strict mode, that waits for it), past the "
                  "bound of every wait (CUGRAPH_LUA_TIMEOUT), and was "
                  "stopped%s; the device stays usable, its memory as the "
                  "work left it", cg_work_limit, busy);
  cg_pusherror(L, api, (int)CUDA_ERROR_TIMEOUT, "CUDA_ERROR_TIMEOUT",
               lua_tostring(L, -1));
  return lua_error(L);
}

int cg_error_stopped(lua_State *L, cg_ctx *ctx, const char *api, int why,
                     CUstream s) {
  if (ctx->root->busy) ctx->root->busy(L, ctx, s);
  else lua_pushliteral(L, "");
  return cg_error_stopped_busy(L, ctx, api, why, lua_tostring(L, -1));
}

/* Polls query (a stream's or an event's) until it is not NOT_READY or t
   seconds passed: the result, or NOT_READY. The simulator's strict mode
   runs the work inside the query: bounded by t (and stopped there). */
static CUresult poll(CUresult (*query)(void *), void *h, double t) {
  if (cg_drv.cuSimSetWorkLimit && cg_drv.cuSimSetWorkLimit(t) == CUDA_SUCCESS) {
    CUresult r = query(h);
    cg_drv.cuSimSetWorkLimit(cg_work_limit);
    if (r != CUDA_ERROR_NOT_READY) return r;
  }
  double end = now() + t;
  struct timespec nap = { 0, 20000 };
  for (int i = 0;; i++) {
    CUresult r = query(h);
    if (r != CUDA_ERROR_NOT_READY || now() > end) return r;
    if (i > 100) { /* spin a little, then sleep up to a millisecond */
      nanosleep(&nap, NULL);
      if (nap.tv_nsec < 1000000) nap.tv_nsec *= 2;
    }
  }
}

/* After a wait that completed: once the work a timed-out wait left behind
   has ended (all of it, when over is set: the whole device was waited
   for), the frees held back meanwhile are made. */
static void hung_over(lua_State *L, cg_ctx *ctx, int over);

static CUresult stream_query(void *h) { return cg_drv.cuStreamQuery(h); }
static CUresult event_query(void *h) { return cg_drv.cuEventQuery(h); }

/* A wait whose work the software driver ran and stopped (the simulator's
   strict mode): its error, naming what ran on s (NULL: the device). */
static void check_stopped(lua_State *L, cg_ctx *ctx, const char *api,
                          CUresult r, CUstream s) {
  int why = cg_work_stopped(r);
  if (why) cg_error_stopped(L, ctx, api, why, s);
}

void cg_wait_stream(lua_State *L, cg_ctx *ctx, CUstream s, double t) {
  if (t <= 0) {
    CUresult r = cg_drv.cuStreamSynchronize(s);
    check_stopped(L, ctx, "cuStreamSynchronize", r, s);
    cg_check(L, ctx, "cuStreamSynchronize", r);
    return;
  }
  CUresult r = poll(stream_query, s, t);
  check_stopped(L, ctx, "cuStreamSynchronize", r, s);
  if (r == CUDA_ERROR_NOT_READY) {
    ctx->hung_stream = s;
    ctx->hung_event = NULL;
    timed_out(L, ctx, "cuStreamSynchronize", s, t);
  }
  cg_check(L, ctx, "cuStreamSynchronize", r);
  hung_over(L, ctx, 0);
}

void cg_wait_event(lua_State *L, cg_ctx *ctx, CUevent e, double t) {
  if (t <= 0) {
    CUresult r = cg_drv.cuEventSynchronize(e);
    check_stopped(L, ctx, "cuEventSynchronize", r, NULL);
    cg_check(L, ctx, "cuEventSynchronize", r);
    return;
  }
  CUresult r = poll(event_query, e, t);
  check_stopped(L, ctx, "cuEventSynchronize", r, NULL);
  if (r == CUDA_ERROR_NOT_READY) {
    ctx->hung_event = e;
    timed_out(L, ctx, "cuEventSynchronize", NULL, t);
  }
  cg_check(L, ctx, "cuEventSynchronize", r);
  hung_over(L, ctx, 0);
}

double cg_opttimeout(lua_State *L, int idx) {
  if (lua_isnoneornil(L, idx)) return cg_sentinel(L)->timeout;
  lua_Number t = luaL_checknumber(L, idx);
  luaL_argcheck(L, t > 0, idx, "a timeout is a positive number of seconds");
  return t == HUGE_VAL ? 0 : t;
}

/* cuCtxSynchronize has no query: a waiter thread makes the call and the
   caller waits for it at most t seconds. The wait is shared by the two
   (refs): a caller that gave up keeps its reference in the context, which
   asks it later whether the work ended. */
struct cg_ctxwait {
  pthread_mutex_t lock;
  pthread_cond_t done_cond;
  CUcontext cu;
  CUresult r;
  int done, refs;
  double limit;  /* the simulator runs the work in the waiter: its bound */
  int why;       /* and why it stopped it (cuSimStopReason) */
  char report[CG_REPORT]; /* and its report of an error ("": none) */
};

void cg_drop_wait(cg_ctxwait *w) {
  pthread_mutex_lock(&w->lock);
  int last = --w->refs == 0;
  pthread_mutex_unlock(&w->lock);
  if (!last) return;
  pthread_mutex_destroy(&w->lock);
  pthread_cond_destroy(&w->done_cond);
  free(w);
}

static void *waiter(void *arg) {
  cg_ctxwait *w = arg;
  CUresult r = cg_make_current(w->cu);
  if (cg_drv.cuSimSetWorkLimit) cg_drv.cuSimSetWorkLimit(w->limit);
  if (r == CUDA_SUCCESS) r = cg_drv.cuCtxSynchronize();
  int why = cg_work_stopped(r);
  char report[CG_REPORT] = ""; /* this thread's: taken for the caller */
  if (cg_drv.cuSimTakeReport &&
      cg_drv.cuSimTakeReport(report, sizeof report) != CUDA_SUCCESS)
    report[0] = '\0';
  pthread_mutex_lock(&w->lock);
  w->r = r;
  w->why = why;
  memcpy(w->report, report, sizeof report);
  w->done = 1;
  pthread_cond_signal(&w->done_cond);
  pthread_mutex_unlock(&w->lock);
  cg_drop_wait(w);
  return NULL;
}

/* cuCtxSynchronize, bounded: NOT_READY after t seconds, the wait then in
   *left (the caller's reference); *why: why the software driver stopped
   its work (0: it did not). */
static CUresult ctx_synchronize(cg_ctx *ctx, double t, cg_ctxwait **left,
                                int *why) {
  if (t <= 0) {
    CUresult r = cg_drv.cuCtxSynchronize();
    *why = cg_work_stopped(r);
    return r;
  }
  cg_ctxwait *w = calloc(1, sizeof *w);
  pthread_t th;
  pthread_attr_t attr;
  if (!w) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->done_cond, NULL);
  w->cu = ctx->cu;
  w->refs = 2;
  w->limit = ctx->root->timeout; /* the work goes on past t, as on a GPU */
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int bad = pthread_create(&th, &attr, waiter, w);
  pthread_attr_destroy(&attr);
  if (bad) {
    free(w);
    return cg_drv.cuCtxSynchronize();
  }
  struct timespec end;
  deadline(&end, t);
  pthread_mutex_lock(&w->lock);
  while (!w->done &&
         pthread_cond_timedwait(&w->done_cond, &w->lock, &end) == 0) {}
  int done = w->done;
  CUresult r = done ? w->r : CUDA_ERROR_NOT_READY;
  *why = done ? w->why : 0;
  if (done && r != CUDA_SUCCESS && !w->why && w->report[0])
    cg_driver_hand_report(w->report); /* for the error cg_check raises */
  pthread_mutex_unlock(&w->lock);
  if (done) cg_drop_wait(w);
  else *left = w;
  return r;
}

/* Whether the work a timed-out wait left behind still runs; once it ended,
   the context frees again. */
int cg_still_hung(cg_ctx *ctx) {
  if (!ctx->hung) return 0;
  int running = 1;
  if (ctx->hung_wait) {
    pthread_mutex_lock(&ctx->hung_wait->lock);
    running = !ctx->hung_wait->done;
    pthread_mutex_unlock(&ctx->hung_wait->lock);
  } else if (cg_make_current(ctx->cu) == CUDA_SUCCESS) {
    running = (ctx->hung_event ? cg_drv.cuEventQuery(ctx->hung_event)
               : cg_drv.cuStreamQuery(ctx->hung_stream)) == CUDA_ERROR_NOT_READY;
  }
  if (running) return 1;
  if (ctx->hung_wait) cg_drop_wait(ctx->hung_wait);
  ctx->hung_wait = NULL;
  ctx->hung = 0;
  return 0;
}

static void hung_over(lua_State *L, cg_ctx *ctx, int over) {
  if (over && ctx->hung) { /* its waiter may not have seen its call return */
    if (ctx->hung_wait) cg_drop_wait(ctx->hung_wait);
    ctx->hung_wait = NULL;
    ctx->hung = 0;
  }
  if (!cg_still_hung(ctx) && ctx->ndeferred && !ctx->capture)
    cg_flush_deferred(L, ctx);
}

void cg_sync_for(lua_State *L, cg_ctx *ctx, double t) {
  if (held)
    luaL_error(L, "waiting for the whole device while this thread captures "
               "a graph (in another lua_State): the driver refuses it and "
               "would break the capture; wait after the capture ends");
  double t0 = now();
  struct timespec end;
  if (t > 0) deadline(&end, t);
  pthread_mutex_lock(&gate_lock);
  struct gate *g = gate_of(ctx->cu);
  int in = 1;
  if (g) {
    g->waiting++;
    while (in && g->open) in = gate_wait(t > 0 ? &end : NULL);
    in = in || !g->open;
    if (!in) {
      g->waiting--; /* captures held back meanwhile go on */
      pthread_cond_broadcast(&gate_cond);
    }
  }
  pthread_mutex_unlock(&gate_lock);
  if (!in) error_gate(L, "cuCtxSynchronize", t, "another thread's graph "
                      "capture on this device was still open, and a wait for "
                      "the whole device begins only once no capture of it is "
                      "open (the driver would refuse it and break the "
                      "capture); wait after that capture ends, or for a "
                      "stream (s:synchronize)");
  cg_ctxwait *left = NULL;
  double rest = t > 0 ? t - (now() - t0) : 0; /* what the gate left of t */
  int why = 0;
  CUresult r = ctx_synchronize(ctx, t > 0 && rest < 1e-6 ? 1e-6 : rest, &left,
                               &why);
  pthread_mutex_lock(&gate_lock);
  if (g) g->waiting--;
  pthread_cond_broadcast(&gate_cond);
  pthread_mutex_unlock(&gate_lock);
  if (r == CUDA_ERROR_NOT_READY) {
    if (ctx->hung_wait) cg_drop_wait(ctx->hung_wait);
    ctx->hung_wait = left;
    timed_out(L, ctx, "cuCtxSynchronize", NULL, t);
  }
  if (why) cg_error_stopped(L, ctx, "cuCtxSynchronize", why, NULL);
  cg_check(L, ctx, "cuCtxSynchronize", r);
  hung_over(L, ctx, 1);
}

void cg_sync(lua_State *L, cg_ctx *ctx) {
  cg_sync_for(L, ctx, ctx->root->timeout);
}
