/* Managed memory: Buffers over memory the host and the device both reach
   (cuMemAllocManaged), migrated on demand, or ahead of use by b:prefetch,
   and placed by the advice of b:advise. Their other methods are the
   Buffer's. */
#include <string.h>
#include "types/types.h"

/* cuda.managed(type, n | table | string) */
static int managed_new(lua_State *L) {
  cg_type t = cg_checktype(L, 1);
  int init;
  size_t n = cg_checkinit(L, 2, t, &init, "no elements to upload");
  lua_settop(L, 2);
  cg_ctx *ctx = cg_context(L);
  cg_check_outside(L, ctx, "cannot allocate managed memory",
                   "allocate buffers before capture");
  if (!cg_drv.cuMemAllocManaged)
    return luaL_error(L, "cuda.managed: this CUDA driver has no managed "
                      "memory");
  int ok = 0;
  CU(L, ctx, cuDeviceGetAttribute, &ok, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY,
     ctx->dev);
  if (!ok)
    return luaL_error(L, "cuda.managed: device %d has no managed memory",
                      ctx->ordinal);
  cg_buffer *b = cg_newobj(L, ctx, sizeof *b, CG_BUFFER); /* 3 */
  b->type = t;
  b->n = n;
  b->managed = 1;
  CU(L, ctx, cuMemAllocManaged, &b->h.drv.mem, n * cg_type_size[t],
     CU_MEM_ATTACH_GLOBAL);
  b->h.open = 1;
  if (init) { /* b:upload(data) */
    lua_getfield(L, 3, "upload");
    lua_pushvalue(L, 3);
    lua_pushvalue(L, 2);
    lua_call(L, 2, 0);
  }
  lua_settop(L, 3);
  return 1;
}

/* The managed buffer at 1, checked. */
static cg_buffer *checkmanaged(lua_State *L, const char *what) {
  cg_buffer *b = cg_checkobj(L, 1, CG_BUFFER);
  if (!b->managed)
    luaL_error(L, "%s: the buffer is not managed memory (cuda.managed)",
               what);
  return b;
}

/* A location: "device" (the buffer's, the default), "host" or a device
   ordinal. */
static CUmemLocation location(lua_State *L, int idx, cg_buffer *b,
                              const char *what) {
  CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, b->h.ctx->ordinal };
  lua_Integer d;
  if (lua_isnoneornil(L, idx)) return loc;
  if (lua_type(L, idx) == LUA_TSTRING) {
    const char *s = cg_checkname(L, idx, what);
    if (!strcmp(s, "host")) {
      loc.type = CU_MEM_LOCATION_TYPE_HOST;
      loc.id = 0;
      return loc;
    }
    if (!strcmp(s, "device")) return loc;
  } else if (cg_tointeger(L, idx, &d)) {
    int count = 0;
    CU(L, b->h.ctx, cuDeviceGetCount, &count);
    if (d >= 0 && d < count) {
      loc.id = (int)d;
      return loc;
    }
  }
  luaL_argerror(L, idx, lua_pushfstring(L, "%s: expected \"device\", "
                "\"host\" or a device ordinal", what));
  return loc;
}

/* b:prefetch([where [, stream]]): migrates the memory to where ahead of
   use, on stream (absent: done on return) */
static int managed_prefetch(lua_State *L) {
  cg_buffer *b = checkmanaged(L, "b:prefetch");
  cg_ctx *ctx = b->h.ctx;
  cg_check_outside(L, ctx, "b:prefetch()", "prefetch before the capture "
                   "(graphs record no prefetch)");
  CUmemLocation loc = location(L, 2, b, "b:prefetch");
  CUstream st = ctx->stream;
  if (!lua_isnoneornil(L, 3)) {
    cg_stream *s = cg_checkobj(L, 3, CG_STREAM);
    if (s->h.ctx != ctx) cg_error_devices(L, ctx, s->h.ctx, "b:prefetch");
    st = s->h.drv.stream;
  }
  if (!cg_drv.cuMemPrefetchAsync)
    return luaL_error(L, "b:prefetch: this CUDA driver has no prefetch");
  if (loc.type == CU_MEM_LOCATION_TYPE_DEVICE) {
    int ok = 0;
    CUdevice dev;
    CU(L, ctx, cuDeviceGet, &dev, loc.id);
    CU(L, ctx, cuDeviceGetAttribute, &ok,
       CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, dev);
    if (!ok)
      return luaL_error(L, "b:prefetch: device %d cannot prefetch managed "
                        "memory (no concurrent managed access)", loc.id);
  }
  cg_check_open(L, &b->h);
  CU(L, ctx, cuMemPrefetchAsync, b->h.drv.mem, b->n * cg_type_size[b->type],
     loc, 0, st);
  if (lua_isnoneornil(L, 3)) cg_wait_stream(L, ctx, st, cg_opttimeout(L, 4));
  lua_settop(L, 1);
  return 1;
}

/* b:advise(advice [, where]) */
static int managed_advise(lua_State *L) {
  static const char *const names[] = {
    "read_mostly", "unset_read_mostly", "preferred_location",
    "unset_preferred_location", "accessed_by", "unset_accessed_by", NULL
  };
  static const CUmem_advise advice[] = {
    CU_MEM_ADVISE_SET_READ_MOSTLY, CU_MEM_ADVISE_UNSET_READ_MOSTLY,
    CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
    CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, CU_MEM_ADVISE_SET_ACCESSED_BY,
    CU_MEM_ADVISE_UNSET_ACCESSED_BY
  };
  cg_buffer *b = checkmanaged(L, "b:advise");
  int a = cg_checkoption(L, 2, NULL, names);
  CUmemLocation loc = location(L, 3, b, "b:advise");
  if (!cg_drv.cuMemAdvise)
    return luaL_error(L, "b:advise: this CUDA driver has no memory advice");
  cg_check_open(L, &b->h);
  CU(L, b->h.ctx, cuMemAdvise, b->h.drv.mem, b->n * cg_type_size[b->type],
     advice[a], loc);
  lua_settop(L, 1);
  return 1;
}

/* b:managed() -> whether the buffer is managed memory */
static int buffer_managed(lua_State *L) {
  lua_pushboolean(L, ((cg_buffer *)cg_checkobj(L, 1, CG_BUFFER))->managed);
  return 1;
}

void managed_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"prefetch", managed_prefetch}, {"advise", managed_advise},
    {"managed", buffer_managed}, {NULL, NULL}
  };
  luaL_getmetatable(L, cg_kind_names[CG_BUFFER]);
  lua_getfield(L, -1, "methods");
  luaL_setfuncs(L, methods, 0);
  lua_pop(L, 2);
  lua_pushcfunction(L, managed_new);
  lua_setfield(L, -2, "managed");
}
