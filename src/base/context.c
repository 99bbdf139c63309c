/* Device records and their primary contexts, the sentinel, the context
   current on each thread, peer access, and the gate between captures and
   whole-device waits. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "base/base.h"
#include "base/env.h"
#include "base/world.h"
#include "base/fft.h"

static const char sentinel_key = 'k';
static const char devices_key = 'd'; /* table: the other devices' records */

cg_ctx *cg_sentinel(lua_State *L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &sentinel_key);
  cg_ctx *ctx = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return ctx;
}

/* The guard is the sentinel, whose __close is cg_hold_end: made first in
   luaopen, so pushing it allocates nothing. */
void cg_hold(lua_State *L) {
  if (lua_gc(L, LUA_GCISRUNNING) != 1) {
    lua_pushnil(L);
    return;
  }
  lua_gc(L, LUA_GCSTOP);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &sentinel_key);
  lua_toclose(L, -1);
}

int cg_hold_end(lua_State *L) {
  lua_gc(L, LUA_GCRESTART);
  return 0;
}

int cg_error_poisoned(lua_State *L, cg_ctx *ctx) {
  char buf[CG_ERRNAME];
  cg_pusherror(L, ctx->poison_api, (int)ctx->poison,
               cg_driver_errname(ctx->poison, buf),
               "the CUDA context is unusable after an earlier error; "
               "the process must restart");
  return lua_error(L);
}

void cg_poison(cg_ctx *ctx, const char *api, CUresult r) {
  if (cg_sticky(r) && !ctx->poison) {
    ctx->poison = r;
    ctx->poison_api = api;
  }
}

void cg_lua_line(lua_State *L, char *buf, size_t size) {
  lua_Debug ar;
  buf[0] = 0;
  for (int lv = 1; lua_getstack(L, lv, &ar); lv++)
    if (lua_getinfo(L, "Sl", &ar) && ar.currentline > 0) {
      snprintf(buf, size, "%s:%d", ar.short_src, ar.currentline);
      return;
    }
}

/* The Lua line of the calls this thread last gave the simulator, hashed. */
static _Thread_local uint64_t sim_line_sent;

/* Whether a function's source is the Lua front end (cugraph/init.lua). */
static int front_end(const lua_Debug *ar) {
  const char *slash = strrchr(ar->source, '/');
  return ar->source[0] == '@' && slash && slash - ar->source >= 8 &&
         !strncmp(slash - 8, "/cugraph/", 9);
}

void cg_sim_line_(lua_State *L) {
  lua_Debug ar;
  char buf[300];
  buf[0] = 0;
  for (int lv = 1; lua_getstack(L, lv, &ar); lv++)
    if (lua_getinfo(L, "Sl", &ar) && ar.currentline > 0 && !front_end(&ar)) {
      snprintf(buf, sizeof buf, "%s:%d", ar.short_src, ar.currentline);
      break;
    }
  uint64_t h = 1469598103934665603u;
  for (const char *p = buf; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211u;
  if (h != sim_line_sent &&
      cg_drv.cuSimSetLuaLine(buf[0] ? buf : NULL) == CUDA_SUCCESS)
    sim_line_sent = h;
}

static int error_stopped(lua_State *L, cg_ctx *ctx, const char *api, int why,
                         const char *busy);

void cg_fail(lua_State *L, cg_ctx *ctx, const char *api, CUresult r) {
  int why = cg_work_stopped(r);
  if (why) error_stopped(L, ctx, api, why, "");
  cg_poison(ctx, api, r);
  /* a capture error: which call broke the capture first, when another */
  struct cg_broke *b = &ctx->root->broke;
  const char *fix;
  int capture = cg_capture_rule(r, &fix) &&
                (ctx->capture || !strcmp(api, "cuStreamEndCapture"));
  int first = capture && !b->api;
  if (first) { /* the call, and the line of Lua code nearest to it */
    b->api = api;
    b->code = r;
    cg_lua_line(L, b->where, sizeof b->where);
  }
  cg_trace_raised(ctx);
  cg_driver_pusherror(L, api, r);
  if (first && r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) {
    lua_pushliteral(L, "work the runtime did not issue (C code, or another "
                    "thread, on a stream of this context)");
    lua_setfield(L, -2, "first");
  } else if (capture && !first) {
    char buf[CG_ERRNAME];
    lua_pushfstring(L, "%s (%s)%s%s", b->api, cg_driver_errname(b->code, buf),
                    b->where[0] ? " at " : "", b->where);
    lua_setfield(L, -2, "first");
  }
  lua_error(L);
}

/* The context this core last made current on the calling thread. A state
   may move between threads, so every path to the driver compares its
   context with this one and makes it current only when they differ. */
_Thread_local CUcontext cg_bound;

CUresult cg_make_current(CUcontext cu) {
  if (cu == cg_bound) return CUDA_SUCCESS;
  CUresult r = cg_drv.cuCtxSetCurrent(cu);
  cg_bound = r == CUDA_SUCCESS ? cu : NULL;
  return r;
}

/* The same, raising: one compare on the hot path. A thread that takes the
   context gives the software driver the state's bound on its work. */
static void current(lua_State *L, cg_ctx *ctx) {
  if (ctx->cu != cg_bound) {
    cg_check(L, ctx, "cuCtxSetCurrent", cg_make_current(ctx->cu));
    cg_work_bound(ctx);
  }
}

void cg_current(lua_State *L, cg_ctx *ctx) { current(L, ctx); }

static int attr(lua_State *L, cg_ctx *ctx, CUdevice_attribute a) {
  int v = 0;
  CU(L, ctx, cuDeviceGetAttribute, &v, a, ctx->dev);
  return v;
}

static void start(lua_State *L, cg_ctx *ctx) {
  const char *why = cg_driver_load();
  if (why) luaL_error(L, "%s", why);
  int count = 0;
  CU(L, ctx, cuDeviceGetCount, &count);
  if (count == 0) luaL_error(L, "no CUDA device found");
  if (ctx->ordinal < 0 || ctx->ordinal >= count)
    luaL_error(L, "device %d does not exist (%d device%s)", ctx->ordinal,
               count, count == 1 ? "" : "s");
  CU(L, ctx, cuDeviceGet, &ctx->dev, ctx->ordinal);
  if (!ctx->retained) {
    CU(L, ctx, cuDevicePrimaryCtxRetain, &ctx->cu, ctx->dev);
    ctx->retained = 1; /* from here the sentinel releases the context */
  }
  current(L, ctx);
  cg_work_bound(ctx);
  ctx->max_threads = attr(L, ctx, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  for (int i = 0; i < 3; i++) {
    ctx->max_block[i] = attr(L, ctx, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X + i);
    ctx->max_grid[i] = attr(L, ctx, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X + i);
  }
  ctx->max_shared = attr(L, ctx, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  ctx->max_shared_optin =
      attr(L, ctx, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  if (!ctx->stream)
    CU(L, ctx, cuStreamCreate, &ctx->stream, CU_STREAM_NON_BLOCKING);
  ctx->ready = 1; /* only once all of the above succeeded */
}

static cg_ctx *ready(lua_State *L, cg_ctx *ctx) {
  if (ctx->poison) cg_error_poisoned(L, ctx);
  if (ctx->root->closed) luaL_error(L, "cugraph is closed");
  if (!ctx->ready) start(L, ctx);
  else current(L, ctx);
  cg_sim_line(L); /* after start: the driver's entry points are read once
                     it is loaded (another thread may be loading it) */
  return ctx;
}

cg_ctx *cg_context(lua_State *L) {
  cg_ctx *root = cg_sentinel(L);
  return ready(L, root->active ? root->active : root);
}

cg_ctx *cg_device_record(lua_State *L, int ordinal) {
  cg_ctx *root = cg_sentinel(L);
  if (ordinal == root->ordinal) return root;
  for (cg_ctx *d = root->next; d; d = d->next)
    if (d->ordinal == ordinal) return d;
  if (root->closed) luaL_error(L, "cugraph is closed");
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &devices_key) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &devices_key);
  }
  cg_ctx *d = lua_newuserdatauv(L, sizeof *d, 0);
  memset(d, 0, sizeof *d);
  lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  lua_pop(L, 1);
  memcpy(d->mt, root->mt, sizeof d->mt);
  memcpy(d->release, root->release, sizeof d->release);
  d->root = root;
  d->ordinal = ordinal;
  d->capture = root->capture;
  d->next = root->next;
  root->next = d;
  return d;
}

cg_ctx *cg_device(lua_State *L, int ordinal) {
  return ready(L, cg_device_record(L, ordinal));
}

void cg_set_capture(cg_ctx *ctx, cg_capture *c) {
  for (cg_ctx *d = ctx->root; d; d = d->next)
    d->capture = c;
}

int cg_alive(cg_ctx *ctx) {
  return ctx->ready && !ctx->root->closed && !ctx->closed && !ctx->poison;
}

void cg_check_outside(lua_State *L, cg_ctx *ctx, const char *what,
                      const char *fix) {
  if (ctx->capture)
    luaL_error(L, "%s inside a graph capture: %s", what, fix);
}

void cg_at_close(cg_ctx *root, cg_closer fn) {
  for (int i = 0; i < root->nclosers; i++)
    if (root->closers[i] == fn) return;
  if (root->nclosers < CG_MAXCLOSERS) root->closers[root->nclosers++] = fn;
}

int cg_error_devices(lua_State *L, cg_ctx *a, cg_ctx *b, const char *what) {
  return luaL_error(L, "%s: objects of device %d and device %d; work that "
                    "mixes devices is refused (copy between devices with "
                    "dst:copy(src), or make the objects on one device)",
                    what, a->ordinal, b->ordinal);
}

/* -- peers ----------------------------------------------------------------- */

int cg_peer_state(lua_State *L, cg_ctx *a, cg_ctx *b) {
  int cached = b->ordinal < CG_MAXPEER ? a->peer[b->ordinal] : 0;
  if (cached) return cached;
  int can = 0;
  if (!cg_drv.cuDeviceCanAccessPeer || !cg_drv.cuCtxEnablePeerAccess)
    luaL_error(L, "peer access needs cuDeviceCanAccessPeer and "
               "cuCtxEnablePeerAccess, which the driver lacks");
  CU(L, a, cuDeviceCanAccessPeer, &can, a->dev, b->dev);
  int st = can ? CG_PEER_UNKNOWN : CG_PEER_NONE;
  if (st && b->ordinal < CG_MAXPEER) a->peer[b->ordinal] = (unsigned char)st;
  return st;
}

void cg_enable_peer(lua_State *L, cg_ctx *a, cg_ctx *b) {
  if (b->ordinal < CG_MAXPEER && a->peer[b->ordinal] == CG_PEER_ON) return;
  current(L, a);
  CUresult r = cg_drv.cuCtxEnablePeerAccess(b->cu, 0);
  if (r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
    cg_check(L, a, "cuCtxEnablePeerAccess", r);
  if (b->ordinal < CG_MAXPEER) a->peer[b->ordinal] = CG_PEER_ON;
}

const char *cg_reach_why(lua_State *L, cg_ctx *ctx, cg_ctx *other) {
  if (ctx == other) return NULL;
  if (other->ordinal < CG_MAXPEER && ctx->peer[other->ordinal] == CG_PEER_ON)
    return NULL;
  if (ctx->capture)
    return lua_pushfstring(L, "device %d would read memory of device %d, and "
                           "peer access is enabled outside captures: call "
                           "cuda.enable_peer_access(%d, %d) before the "
                           "capture", ctx->ordinal, other->ordinal,
                           ctx->ordinal, other->ordinal);
  if (cg_peer_state(L, ctx, other) == CG_PEER_NONE)
    return lua_pushfstring(L, "device %d cannot access memory of device %d "
                           "(no peer access between them); copy the data "
                           "with dst:copy(src)", ctx->ordinal,
                           other->ordinal);
  cg_enable_peer(L, ctx, other);
  current(L, ctx);
  return NULL;
}

void cg_check_reach(lua_State *L, cg_ctx *ctx, cg_ctx *other,
                    const char *what) {
  const char *why = cg_reach_why(L, ctx, other);
  if (why) luaL_error(L, "%s: %s", what, why);
}

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
static int error_stopped(lua_State *L, cg_ctx *ctx, const char *api, int why,
                         const char *busy) {
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
  return error_stopped(L, ctx, api, why, lua_tostring(L, -1));
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
};

static void drop_wait(cg_ctxwait *w) {
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
  pthread_mutex_lock(&w->lock);
  w->r = r;
  w->why = why;
  w->done = 1;
  pthread_cond_signal(&w->done_cond);
  pthread_mutex_unlock(&w->lock);
  drop_wait(w);
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
  pthread_mutex_unlock(&w->lock);
  if (done) drop_wait(w);
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
  if (ctx->hung_wait) drop_wait(ctx->hung_wait);
  ctx->hung_wait = NULL;
  ctx->hung = 0;
  return 0;
}

static void hung_over(lua_State *L, cg_ctx *ctx, int over) {
  if (over && ctx->hung) { /* its waiter may not have seen its call return */
    if (ctx->hung_wait) drop_wait(ctx->hung_wait);
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
    if (ctx->hung_wait) drop_wait(ctx->hung_wait);
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

/* -- the sentinel --------------------------------------------------------- */

/* Lets go of one device: its held-back frees, stream, the graph memory
   and pooled memory its graphs and stream-ordered frees left unused, and
   its context. */
static void close_device(lua_State *L, cg_ctx *ctx) {
  if (cg_alive(ctx) && cg_make_current(ctx->cu) == CUDA_SUCCESS) {
    cg_flush_deferred(L, ctx);
    if (ctx->stream) cg_destroy(CG_H_STREAM, (cg_handle){ .stream = ctx->stream });
    CUmemoryPool pool;
    if (cg_still_hung(ctx)) {
      /* its work still runs: nothing more waits for it */
    } else if (cg_drv.cuDeviceGraphMemTrim) {
      cg_drv.cuDeviceGraphMemTrim(ctx->dev);
    }
    if (!ctx->hung && cg_drv.cuDeviceGetDefaultMemPool &&
        cg_drv.cuMemPoolTrimTo &&
        cg_drv.cuDeviceGetDefaultMemPool(&pool, ctx->dev) == CUDA_SUCCESS)
      cg_drv.cuMemPoolTrimTo(pool, 0);
  }
  int release = ctx->retained && !ctx->closed;
  if (cg_drop_deferred(ctx, release)) release = 0; /* a finisher's now */
  if (release && !cg_still_hung(ctx)) {
    cg_fft_unload(); /* with no plan left: cuFFT's own memory goes first */
    cg_destroy(CG_H_PRIMARY, (cg_handle){ .dev = ctx->dev });
  }
  if (ctx->hung_wait) drop_wait(ctx->hung_wait); /* the waiter keeps its own */
  ctx->hung_wait = NULL;
  ctx->closed = 1;
  free(ctx->deferred);
  ctx->deferred = NULL;
}

static int sentinel_gc(lua_State *L) {
  cg_ctx *ctx = lua_touserdata(L, 1);
  cg_keep_close(L, ctx);
  for (int i = 0; i < ctx->nclosers; i++) ctx->closers[i](L, ctx);
  for (cg_ctx *d = ctx->next; d; d = d->next) close_device(L, d);
  close_device(L, ctx);
  return 0;
}

cg_ctx *cg_sentinel_new(lua_State *L) {
  cg_ctx *ctx = cg_sentinel(L);
  if (ctx) return ctx;
  /* the variables the state keeps, read once: a malformed one is an error
     of loading the module, naming it */
  int ordinal = 0; /* CUGRAPH_LUA_DEVICE, else the local rank */
  double timeout = 0; /* CUGRAPH_LUA_TIMEOUT seconds; 0: none */
  char err[256];
  if (cg_world_device(&ordinal, err, sizeof err) < 0 ||
      cg_env_number("CUGRAPH_LUA_TIMEOUT", 0, HUGE_VAL, "seconds", &timeout,
                    err, sizeof err) < 0)
    luaL_error(L, "%s", err);
  ctx = lua_newuserdatauv(L, sizeof *ctx, 0);
  memset(ctx, 0, sizeof *ctx);
  ctx->root = ctx;
  ctx->ordinal = ordinal;
  ctx->timeout = timeout;
  cg_trace_open(ctx);
  lua_createtable(L, 0, 2);
  lua_pushcfunction(L, sentinel_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, cg_hold_end);
  lua_setfield(L, -2, "__close");
  lua_setmetatable(L, -2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &sentinel_key);
  return ctx;
}
