/* Device selection, the primary context, the sentinel, and what every object
   shares: creation marked closed, the two checkers, guards, release. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "base/core.h"

const char *const cg_kind_names[] = {
  "cugraph.Stream", "cugraph.Buffer", "cugraph.Scalar", "cugraph.Event",
  "cugraph.Module", "cugraph.Kernel", "cugraph.Graph", "cugraph.GLResource",
  "cugraph.Condition", "cugraph.HostBuffer", "cugraph.Node", "cugraph.Comm"
};

static const char sentinel_key = 'k';
static const char devices_key = 'd'; /* table: the other devices' records */

cg_ctx *cg_sentinel(lua_State *L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &sentinel_key);
  cg_ctx *ctx = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return ctx;
}

static int poisoned(lua_State *L, cg_ctx *ctx) {
  char buf[CG_ERRNAME];
  cg_pusherror(L, ctx->poison_api, (int)ctx->poison,
               cg_driver_errname(ctx->poison, buf),
               "the CUDA context is unusable after an earlier error; "
               "the process must restart");
  return lua_error(L);
}

void cg_poison(cg_ctx *ctx, const char *api, CUresult r) {
  if (cg_driver_sticky(r) && !ctx->poison) {
    ctx->poison = r;
    ctx->poison_api = api;
  }
}

void cg_fail(lua_State *L, cg_ctx *ctx, const char *api, CUresult r) {
  cg_poison(ctx, api, r);
  cg_driver_error(L, api, r);
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

/* Makes ctx's context current on this thread unless it is known to be. */
static CUresult make_current(cg_ctx *ctx) { return cg_make_current(ctx->cu); }

/* The same, raising: one compare on the hot path. */
static void current(lua_State *L, cg_ctx *ctx) {
  if (ctx->cu != cg_bound) cg_check(L, ctx, "cuCtxSetCurrent", make_current(ctx));
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
  if (ctx->poison) poisoned(L, ctx);
  if (ctx->root->closed) luaL_error(L, "cugraph is closed");
  if (!ctx->ready) start(L, ctx);
  else current(L, ctx);
  return ctx;
}

cg_ctx *cg_context(lua_State *L) {
  cg_ctx *root = cg_sentinel(L);
  return ready(L, root->active ? root->active : root);
}

/* The record of device ordinal, made (not started) when new. */
static cg_ctx *device_record(lua_State *L, cg_ctx *root, int ordinal) {
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
  return ready(L, device_record(L, cg_sentinel(L), ordinal));
}

void cg_set_capture(cg_ctx *ctx, cg_capture *c) {
  for (cg_ctx *d = ctx->root; d; d = d->next)
    d->capture = c;
}

int cg_mixed(lua_State *L, cg_ctx *a, cg_ctx *b, const char *what) {
  return luaL_error(L, "%s: objects of device %d and device %d; work that "
                    "mixes devices is refused (copy between devices with "
                    "dst:copy(src), or make the objects on one device)",
                    what, a->ordinal, b->ordinal);
}

/* Whether device a may access memory of device b, known or asked once. */
static int peer_state(lua_State *L, cg_ctx *a, cg_ctx *b) {
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

/* Enables access from a (made current) to b's memory; a no-op when on. */
static void enable_peer(lua_State *L, cg_ctx *a, cg_ctx *b) {
  if (b->ordinal < CG_MAXPEER && a->peer[b->ordinal] == CG_PEER_ON) return;
  current(L, a);
  CUresult r = cg_drv.cuCtxEnablePeerAccess(b->cu, 0);
  if (r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
    cg_check(L, a, "cuCtxEnablePeerAccess", r);
  if (b->ordinal < CG_MAXPEER) a->peer[b->ordinal] = CG_PEER_ON;
}

void cg_reach(lua_State *L, cg_ctx *ctx, cg_ctx *other, const char *what) {
  if (ctx == other) return;
  if (other->ordinal < CG_MAXPEER && ctx->peer[other->ordinal] == CG_PEER_ON)
    return;
  if (ctx->capture)
    luaL_error(L, "%s: device %d would read memory of device %d, and peer "
               "access is enabled outside captures: call "
               "cuda.enable_peer_access(%d, %d) before the capture", what,
               ctx->ordinal, other->ordinal, ctx->ordinal, other->ordinal);
  if (peer_state(L, ctx, other) == CG_PEER_NONE)
    luaL_error(L, "%s: device %d cannot access memory of device %d (no peer "
               "access between them); copy the data with dst:copy(src)", what,
               ctx->ordinal, other->ordinal);
  enable_peer(L, ctx, other);
  current(L, ctx);
}

int cg_alive(cg_ctx *ctx) {
  return ctx->ready && !ctx->root->closed && !ctx->closed && !ctx->poison;
}

void *cg_newobj(lua_State *L, cg_ctx *ctx, size_t size, cg_kind kind) {
  cg_obj *o = lua_newuserdatauv(L, size, 2);
  memset(o, 0, size);
  o->ctx = ctx;
  o->kind = (unsigned char)kind;
  o->owned = 1;
  lua_rawgeti(L, LUA_REGISTRYINDEX, ctx->root->mtref[kind]);
  lua_setmetatable(L, -2);
  return o; /* open stays 0 until the driver call that fills it succeeds */
}

void *cg_toobj(lua_State *L, int idx, cg_kind kind) {
  void *o = cg_testobj(L, idx, kind);
  return o ? o : luaL_checkudata(L, idx, cg_kind_names[kind]); /* raises */
}

void *cg_testobj(lua_State *L, int idx, cg_kind kind) {
  cg_ctx *ctx = cg_sentinel(L);
  if (!lua_getmetatable(L, idx)) return NULL;
  const void *mt = lua_topointer(L, -1);
  lua_pop(L, 1);
  return mt == ctx->mt[kind] ? lua_touserdata(L, idx) : NULL;
}

void cg_isopen(lua_State *L, const cg_obj *o) {
  if (!o->open)
    luaL_error(L, "attempt to use a freed %s", cg_kind_names[o->kind]);
}

void *cg_checkobj(lua_State *L, int idx, cg_kind kind) {
  cg_obj *o = luaL_checkudata(L, idx, cg_kind_names[kind]);
  cg_isopen(L, o);
  if (o->ctx->poison) poisoned(L, o->ctx);
  current(L, o->ctx);
  return o;
}

void cg_ready_slow(lua_State *L, cg_obj *o) {
  cg_isopen(L, o);
  if (o->ctx->poison) poisoned(L, o->ctx);
  current(L, o->ctx);
}

atomic_uint cg_epoch;

void cg_collected(void) {
  atomic_fetch_add_explicit(&cg_epoch, 1, memory_order_relaxed);
}

void *cg_checkself_keep(lua_State *L, cg_kind kind) {
  cg_obj *o = lua_touserdata(L, 1);
  if (!o || !lua_getmetatable(L, 1) || /* topointer: cheaper than rawequal */
      lua_topointer(L, -1) != lua_topointer(L, lua_upvalueindex(1))) {
    o = cg_checkobj(L, 1, kind); /* not ours: raises the usual error */
    lua_pushnil(L);
    return o;
  }
  if (!o->open) luaL_error(L, "attempt to use a freed %s", cg_kind_names[kind]);
  if (o->ctx->poison) poisoned(L, o->ctx);
  current(L, o->ctx);
  return o;
}

void *cg_checkself(lua_State *L, cg_kind kind) {
  void *o = cg_checkself_keep(L, kind);
  lua_pop(L, 1);
  return o;
}

void cg_guard(lua_State *L, cg_ctx *ctx, const char *what, const char *fix) {
  if (ctx->capture)
    luaL_error(L, "%s inside a graph capture: %s", what, fix);
}

void cg_canfree(lua_State *L, cg_obj *o) {
  if (!o->uses) return;
  if (o->graph)
    luaL_error(L, "cannot free %s: it is used by live cugraph.Graph #%d%s; "
               "free the graph first", cg_kind_names[o->kind], (int)o->graph,
               o->uses > 1 ? " and others" : "");
  luaL_error(L, "cannot free %s: it is used by %d live cugraph.Graph%s; "
             "free them first", cg_kind_names[o->kind], (int)o->uses,
             o->uses > 1 ? "s" : "");
}

void cg_sync(lua_State *L, cg_ctx *ctx) {
  cg_check(L, ctx, "cuCtxSynchronize", cg_drv.cuCtxSynchronize());
}

CUstream cg_optstream(lua_State *L, int idx, cg_ctx *ctx) {
  if (lua_isnoneornil(L, idx)) return ctx->stream;
  cg_stream *s = cg_checkobj(L, idx, CG_STREAM);
  if (s->h.ctx != ctx) cg_mixed(L, ctx, s->h.ctx, "stream argument");
  return s->s;
}

int cg_method(lua_State *L) {
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  return 0;
}

int cg_tostring(lua_State *L, cg_obj *o, const char *fmt, ...) {
  if (!o->open) {
    lua_pushfstring(L, "%s (freed)", cg_kind_names[o->kind]);
    return 1;
  }
  va_list ap;
  va_start(ap, fmt);
  lua_pushstring(L, cg_kind_names[o->kind]);
  lua_pushvfstring(L, fmt, ap);
  lua_concat(L, 2);
  va_end(ap);
  return 1;
}

int cg_close(lua_State *L, cg_kind kind, int collected) {
  cg_obj *o = cg_toobj(L, 1, kind);
  if (collected) cg_collected(); /* its address may now be reused */
  if (!o->open) return 0;
  if (o->uses) {
    if (collected) {
      o->zombie = 1;
      return 0;
    }
    cg_canfree(L, o);
  }
  o->open = 0;
  if (o->share) cg_share_drop_lua(L, o);
  else o->ctx->release[kind](L, o);
  return 0;
}

void cg_unpinned(lua_State *L, cg_obj *o) {
  if (!o->zombie) return;
  o->zombie = 0;
  o->open = 0;
  if (o->share) cg_share_drop_lua(L, o);
  else o->ctx->release[o->kind](L, o);
}

void cg_newtype(lua_State *L, cg_kind kind, const luaL_Reg *methods,
                const luaL_Reg *meta, cg_releaser release) {
  cg_ctx *ctx = cg_sentinel(L);
  ctx->release[kind] = release;
  luaL_newmetatable(L, cg_kind_names[kind]);
  ctx->mt[kind] = lua_topointer(L, -1);
  lua_pushvalue(L, -1);
  ctx->mtref[kind] = luaL_ref(L, LUA_REGISTRYINDEX);
  luaL_setfuncs(L, meta, 0);
  lua_pushstring(L, cg_kind_names[kind]);
  lua_setfield(L, -2, "__metatable");
  if (methods) { /* methods have the metatable as upvalue (cg_checkself); */
    lua_newtable(L); /* an __index function has them as its upvalue */
    lua_pushvalue(L, -2);
    luaL_setfuncs(L, methods, 1);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "methods"); /* for graph.c to add capture */
    if (lua_getfield(L, -2, "__index") == LUA_TFUNCTION) {
      lua_CFunction f = lua_tocfunction(L, -1);
      lua_pop(L, 1);
      lua_pushcclosure(L, f, 1);
    } else {
      lua_pop(L, 1);
    }
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);
}

/* -- release ------------------------------------------------------------ */

static CUresult destroy(int what, void *h) {
  switch (what) {
  case CG_FREE_MEM: return cg_drv.cuMemFree((CUdeviceptr)(uintptr_t)h);
  case CG_FREE_MODULE: return cg_drv.cuModuleUnload(h);
  case CG_FREE_STREAM: return cg_drv.cuStreamDestroy(h);
  case CG_FREE_EVENT: return cg_drv.cuEventDestroy(h);
  case CG_FREE_EXEC: return cg_drv.cuGraphExecDestroy(h);
  case CG_FREE_HOST: return cg_drv.cuMemFreeHost(h);
  default: return cg_drv.cuGraphDestroy(h);
  }
}

static const char *const destroy_api[] = {
  "cuMemFree", "cuModuleUnload", "cuStreamDestroy", "cuEventDestroy",
  "cuGraphExecDestroy", "cuGraphDestroy", "cuMemFreeHost"
};

void cg_record(lua_State *L, cg_ctx *ctx, const char *api, const char *name) {
  ctx = ctx->root;
  ctx->gc_errors++;
  snprintf(ctx->gc_error, sizeof ctx->gc_error, "%s: %s", api, name);
  lua_warning(L, "cugraph: ", 1);
  lua_warning(L, ctx->gc_error, 0);
}

static void record(lua_State *L, cg_ctx *ctx, const char *api, CUresult r) {
  char buf[CG_ERRNAME];
  if (r == CUDA_SUCCESS || r == CUDA_ERROR_DEINITIALIZED) return;
  cg_poison(ctx, api, r);
  cg_record(L, ctx, api, cg_driver_errname(r, buf));
}

void cg_release(lua_State *L, cg_ctx *ctx, int what, void *h) {
  if (!h || !cg_alive(ctx)) return;
  if (ctx->capture) {
    if (ctx->ndeferred == ctx->cdeferred) {
      size_t c = ctx->cdeferred ? 2 * ctx->cdeferred : 16;
      void *p = realloc(ctx->deferred, c * sizeof *ctx->deferred);
      if (!p) return; /* out of host memory: leak rather than break */
      ctx->deferred = p;
      ctx->cdeferred = c;
    }
    ctx->deferred[ctx->ndeferred].kind = what;
    ctx->deferred[ctx->ndeferred++].h = h;
    return;
  }
  /* a finalizer may run on any thread */
  CUresult r = make_current(ctx);
  if (r != CUDA_SUCCESS) record(L, ctx, "cuCtxSetCurrent", r);
  else record(L, ctx, destroy_api[what], destroy(what, h));
}

/* Called with ctx's context current on this thread, and left so; the
   other devices' frees are made with theirs. */
void cg_flush_deferred(lua_State *L, cg_ctx *ctx) {
  for (cg_ctx *d = ctx->root; d; d = d->next) {
    if (!d->ndeferred) continue;
    if (d != ctx && make_current(d) != CUDA_SUCCESS) continue;
    for (size_t i = 0; i < d->ndeferred; i++)
      if (cg_alive(d))
        record(L, d, destroy_api[d->deferred[i].kind],
               destroy(d->deferred[i].kind, d->deferred[i].h));
    d->ndeferred = 0;
  }
  make_current(ctx);
}

/* -- the sentinel --------------------------------------------------------- */

/* Lets go of one device: its held-back frees, stream and context. */
static void close_device(lua_State *L, cg_ctx *ctx) {
  if (cg_alive(ctx) && make_current(ctx) == CUDA_SUCCESS) {
    cg_flush_deferred(L, ctx);
    if (ctx->stream) cg_drv.cuStreamDestroy(ctx->stream);
  }
  if (ctx->retained && !ctx->closed) cg_drv.cuDevicePrimaryCtxRelease(ctx->dev);
  ctx->closed = 1;
  free(ctx->deferred);
  ctx->deferred = NULL;
}

static int sentinel_gc(lua_State *L) {
  cg_ctx *ctx = lua_touserdata(L, 1);
  for (cg_ctx *d = ctx->next; d; d = d->next) close_device(L, d);
  close_device(L, ctx);
  cg_recs_free(ctx->spare_recs);
  ctx->spare_recs = NULL;
  return 0;
}

static void setint(lua_State *L, const char *field, lua_Integer v) {
  lua_pushinteger(L, v);
  lua_setfield(L, -2, field);
}

/* cuda.device([ordinal]) -> table */
static int device(lua_State *L) {
  static const struct { const char *field; CUdevice_attribute a; } attrs[] = {
    {"major", CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR},
    {"minor", CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
    {"multiprocessors", CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
    {"max_threads_per_block", CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK},
    {"max_shared_memory", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN},
    {"warp_size", CU_DEVICE_ATTRIBUTE_WARP_SIZE},
  };
  cg_ctx *ctx = cg_context(L);
  CUdevice dev = ctx->dev;
  int ordinal = ctx->ordinal, v;
  if (!lua_isnoneornil(L, 1)) {
    lua_Integer i = luaL_checkinteger(L, 1);
    CU(L, ctx, cuDeviceGetCount, &v);
    luaL_argcheck(L, i >= 0 && i < v, 1, "no such device");
    CU(L, ctx, cuDeviceGet, &dev, (int)i);
    ordinal = (int)i;
  }
  char name[256];
  size_t total, freemem, tmp;
  CU(L, ctx, cuDeviceGetName, name, (int)sizeof name, dev);
  lua_createtable(L, 0, 12);
  lua_pushstring(L, name);
  lua_setfield(L, -2, "name");
  setint(L, "ordinal", ordinal);
  for (size_t i = 0; i < sizeof attrs / sizeof *attrs; i++) {
    CU(L, ctx, cuDeviceGetAttribute, &v, attrs[i].a, dev);
    setint(L, attrs[i].field, v);
  }
  lua_getfield(L, -1, "major");
  lua_getfield(L, -2, "minor");
  lua_pushfstring(L, "%d.%d", (int)lua_tointeger(L, -2),
                  (int)lua_tointeger(L, -1));
  lua_setfield(L, -4, "compute_capability");
  lua_pop(L, 2);
  CU(L, ctx, cuDeviceTotalMem, &total, dev);
  setint(L, "memory", (lua_Integer)total);
  if (dev == ctx->dev) { /* free memory is known for the current device */
    CU(L, ctx, cuMemGetInfo, &freemem, &tmp);
    setint(L, "free_memory", (lua_Integer)freemem);
  }
  CU(L, ctx, cuDriverGetVersion, &v);
  setint(L, "driver_version", v);
  return 1;
}

/* Why there is no usable device, or NULL; *n gets the device count. */
static const char *probe(lua_State *L, int *n) {
  const char *why = cg_driver_load();
  *n = 0;
  if (why) return why;
  CUresult r = cg_drv.cuDeviceGetCount(n);
  if (r != CUDA_SUCCESS) {
    char buf[CG_ERRNAME];
    *n = 0;
    return lua_pushfstring(L, "cuDeviceGetCount: %s", cg_driver_errname(r, buf));
  }
  return *n ? NULL : "no CUDA device found";
}

/* cuda.device_count() -> n: 0 when there is no driver (libcuda cannot be
   opened) or cuInit finds no device; a driver that fails raises. */
static int device_count(lua_State *L) {
  const char *why = cg_driver_load();
  int n = 0;
  if (why && strncmp(why, "no CUDA driver found", 20) &&
      !strstr(why, "CUDA_ERROR_NO_DEVICE"))
    return luaL_error(L, "%s", why);
  if (!why) CU(L, cg_sentinel(L), cuDeviceGetCount, &n);
  lua_pushinteger(L, n);
  return 1;
}

/* cuda.available() -> true | false, why: never raises */
static int available(lua_State *L) {
  int n;
  const char *why = probe(L, &n);
  lua_pushboolean(L, why == NULL);
  if (!why) return 1;
  lua_pushstring(L, why);
  return 2;
}

/* core.add_method(type, name, fn): a method of a cugraph type written in
   Lua (the front end's); never replaces one of the core's */
static int add_method(lua_State *L) {
  const char *type = luaL_checkstring(L, 1);
  luaL_checkstring(L, 2);
  luaL_checktype(L, 3, LUA_TFUNCTION);
  luaL_argcheck(L, !strncmp(type, "cugraph.", 8) &&
                luaL_getmetatable(L, type) == LUA_TTABLE &&
                lua_getfield(L, -1, "methods") == LUA_TTABLE, 1,
                "not a cugraph type");
  lua_pushvalue(L, 2);
  if (lua_rawget(L, -2) != LUA_TNIL)
    return luaL_error(L, "%s already has a method '%s'", type,
                      lua_tostring(L, 2));
  lua_pop(L, 1);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 3);
  lua_rawset(L, -3);
  return 0;
}

static int checkordinal(lua_State *L, int idx) {
  lua_Integer i = luaL_checkinteger(L, idx);
  luaL_argcheck(L, i >= 0 && i <= 1024, idx, "device ordinal out of range");
  return (int)i;
}

/* cuda.select(ordinal): the device to use, before the first GPU call */
static int select_device(lua_State *L) {
  cg_ctx *ctx = cg_sentinel(L);
  int i = checkordinal(L, 1);
  if ((ctx->retained || ctx->next) && i != ctx->ordinal)
    return luaL_error(L, "device %d is already in use; select a device "
                      "before the first GPU call", ctx->ordinal);
  ctx->ordinal = i;
  return 0;
}

/* cuda.on(ordinal, fn, ...) -> fn(...): objects made while fn runs belong
   to that device (its primary context); the device before is restored
   however fn ends. Methods of an object always run on the object's own
   device. */
static int on(lua_State *L) {
  int i = checkordinal(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  cg_ctx *root = cg_sentinel(L);
  cg_ctx *d = cg_device(L, i), *prev = root->active;
  root->active = d;
  int status = lua_pcall(L, lua_gettop(L) - 2, LUA_MULTRET, 0);
  root->active = prev;
  if (status != LUA_OK) return lua_error(L);
  return lua_gettop(L) - 1;
}

/* cuda.current_device() -> the ordinal objects made now belong to */
static int current_device(lua_State *L) {
  cg_ctx *root = cg_sentinel(L);
  lua_pushinteger(L, (root->active ? root->active : root)->ordinal);
  return 1;
}

/* cuda.device_of(object) -> the ordinal of the device it belongs to */
static int device_of(lua_State *L) {
  cg_obj *o = NULL;
  for (int k = 0; k < CG_NKINDS && !o; k++) o = cg_testobj(L, 1, (cg_kind)k);
  if (!o) return luaL_typeerror(L, 1, "cugraph object");
  lua_pushinteger(L, o->ctx->ordinal);
  return 1;
}

/* cuda.can_access_peer(a, b) -> whether kernels on device a can read and
   write memory of device b */
static int can_access_peer(lua_State *L) {
  int a = checkordinal(L, 1), b = checkordinal(L, 2);
  cg_ctx *ca = cg_device(L, a), *cb = cg_device(L, b);
  lua_pushboolean(L, ca == cb || peer_state(L, ca, cb) != CG_PEER_NONE);
  return 1;
}

/* cuda.enable_peer_access(a, b): kernels on device a may use memory of
   device b from now on (launches also enable it on demand, outside
   captures) */
static int enable_peer_access(lua_State *L) {
  int a = checkordinal(L, 1), b = checkordinal(L, 2);
  cg_ctx *ca = cg_device(L, a), *cb = cg_device(L, b);
  if (ca == cb) return 0;
  cg_guard(L, ca, "cuda.enable_peer_access()", "enable it before capture");
  if (peer_state(L, ca, cb) == CG_PEER_NONE)
    return luaL_error(L, "device %d cannot access memory of device %d (no "
                      "peer access between them)", a, b);
  enable_peer(L, ca, cb);
  return 0;
}

/* cuda.synchronize(): waits for all work on the device */
static int synchronize(lua_State *L) {
  cg_ctx *ctx = cg_context(L);
  cg_guard(L, ctx, "cuda.synchronize()", "synchronize after the capture");
  cg_sync(L, ctx);
  return 0;
}

/* cuda.status() -> {poisoned=name|nil, finalizer_errors=n, last_finalizer_error} */
static int status(lua_State *L) {
  cg_ctx *ctx = cg_sentinel(L);
  lua_createtable(L, 0, 4);
  lua_pushboolean(L, ctx->ready);
  lua_setfield(L, -2, "initialized");
  for (cg_ctx *d = ctx; d; d = d->next)
    if (d->poison) { /* the first device found poisoned */
      char buf[CG_ERRNAME];
      lua_pushstring(L, cg_driver_errname(d->poison, buf));
      lua_setfield(L, -2, "poisoned");
      break;
    }
  lua_pushinteger(L, ctx->gc_errors);
  lua_setfield(L, -2, "finalizer_errors");
  if (ctx->gc_errors) {
    lua_pushstring(L, ctx->gc_error);
    lua_setfield(L, -2, "last_finalizer_error");
  }
  lua_pushboolean(L, ctx->capture != NULL);
  lua_setfield(L, -2, "capturing");
  return 1;
}

static const luaL_Reg funcs[] = {
  {"device", device}, {"device_count", device_count},
  {"available", available}, {"add_method", add_method},
  {"select", select_device}, {"synchronize", synchronize},
  {"status", status}, {"on", on}, {"current_device", current_device},
  {"device_of", device_of}, {"can_access_peer", can_access_peer},
  {"enable_peer_access", enable_peer_access}, {NULL, NULL}
};

/* Creates the sentinel (first, so it is finalized last) and the functions
   of this file into the module table on top of the stack. */
void context_open(lua_State *L) {
  luaL_setfuncs(L, funcs, 0);
  if (cg_sentinel(L)) return; /* opened before in this state */
  cg_ctx *ctx = lua_newuserdatauv(L, sizeof *ctx, 0);
  memset(ctx, 0, sizeof *ctx);
  ctx->root = ctx;
  const char *dev = getenv("CUGRAPH_LUA_DEVICE");
  ctx->ordinal = dev && *dev ? atoi(dev) : 0;
  lua_createtable(L, 0, 2);
  lua_pushcfunction(L, sentinel_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &sentinel_key);
}
