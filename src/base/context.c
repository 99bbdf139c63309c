/* Device records and their primary contexts, the sentinel, the context
   current on each thread, and peer access (the waits: wait.c). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

void cg_fail(lua_State *L, cg_ctx *ctx, const char *api, CUresult r) {
  int why = cg_work_stopped(r);
  if (why) cg_error_stopped_busy(L, ctx, api, why, "");
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
  if (ctx->hung_wait) cg_drop_wait(ctx->hung_wait); /* the waiter keeps its own */
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
