/* The cuda.* functions of devices: cuda.device, device_count, available,
   select, on, current_device, device_of, can_access_peer,
   enable_peer_access, synchronize, status; and core.add_method. */
#define _DEFAULT_SOURCE
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "graph/graph.h"

void devices_open(lua_State *L);

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
  cg_obj *o = cg_toany(L, cg_sentinel(L), 1);
  if (!o) return luaL_typeerror(L, 1, "cugraph object");
  lua_pushinteger(L, o->ctx->ordinal);
  return 1;
}

/* cuda.can_access_peer(a, b) -> whether kernels on device a can read and
   write memory of device b */
static int can_access_peer(lua_State *L) {
  int a = checkordinal(L, 1), b = checkordinal(L, 2);
  cg_ctx *ca = cg_device(L, a), *cb = cg_device(L, b);
  lua_pushboolean(L, ca == cb || cg_peer_state(L, ca, cb) != CG_PEER_NONE);
  return 1;
}

/* cuda.enable_peer_access(a, b): kernels on device a may use memory of
   device b from now on (launches also enable it on demand, outside
   captures) */
static int enable_peer_access(lua_State *L) {
  int a = checkordinal(L, 1), b = checkordinal(L, 2);
  cg_ctx *ca = cg_device(L, a), *cb = cg_device(L, b);
  if (ca == cb) return 0;
  cg_check_outside(L, ca, "cuda.enable_peer_access()", "enable it before capture");
  if (cg_peer_state(L, ca, cb) == CG_PEER_NONE)
    return luaL_error(L, "device %d cannot access memory of device %d (no "
                      "peer access between them)", a, b);
  cg_enable_peer(L, ca, cb);
  return 0;
}

/* cuda.synchronize([timeout_s]): waits for all work on the device, and
   then, briefly (CG_KEEP_SETTLE: the driver's own thread releases them
   once the work is over), for the frees of what graphs let go of while
   their launches ran (cg_keep_*) */
static int synchronize(lua_State *L) {
  double t = cg_opttimeout(L, 1);
  cg_ctx *ctx = cg_context(L);
  cg_check_outside(L, ctx, "cuda.synchronize()", "synchronize after the capture");
  cg_sync_for(L, ctx, t);
  cg_keep_settle(L, ctx, t > 0 && t < CG_KEEP_SETTLE ? t : CG_KEEP_SETTLE);
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
  size_t held = 0;
  int hung = 0;
  for (cg_ctx *d = ctx; d; d = d->next) {
    held += d->ndeferred;
    hung |= d->hung && !d->closed && cg_still_hung(d);
  }
  lua_pushboolean(L, hung);
  lua_setfield(L, -2, "hung");
  lua_pushinteger(L, (lua_Integer)held);
  lua_setfield(L, -2, "held_frees");
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

/* core.simulator_path() -> the PTX simulator's file, or nil */
static int simulator_path(lua_State *L) {
  char paths[CG_MAXPATHS][CG_PATHLEN];
  int n = cg_simulator_paths(paths, CG_MAXPATHS);
  for (int i = 0; i < n; i++)
    if (access(paths[i], R_OK) == 0) {
      char real[PATH_MAX];
      lua_pushstring(L, realpath(paths[i], real) ? real : paths[i]);
      return 1;
    }
  return 0;
}

void devices_open(lua_State *L) {
  static const luaL_Reg funcs[] = {
    {"device", device}, {"device_count", device_count},
    {"available", available}, {"add_method", add_method},
    {"select", select_device}, {"synchronize", synchronize},
    {"status", status}, {"on", on}, {"current_device", current_device},
    {"device_of", device_of}, {"can_access_peer", can_access_peer},
    {"enable_peer_access", enable_peer_access},
    {"simulator_path", simulator_path}, {"guard_methods", cg_guard_methods},
    {NULL, NULL}
  };
  luaL_setfuncs(L, funcs, 0);
}
