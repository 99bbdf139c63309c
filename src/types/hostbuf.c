/* cugraph.HostBuffer: typed page-locked host memory (cuMemHostAlloc), the
   host side of asynchronous copies (b:upload(h, s), b:download_into(h, s))
   and of copy nodes in graphs. Elements are indexed from 0, as element
   offsets into device memory are: h[0] .. h[#h - 1]. Reads and writes from
   Lua are not ordered with copies in flight: synchronize the stream first. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "types/types.h"

static cg_hostbuf *check(lua_State *L) { return cg_checkobj(L, 1, CG_HOSTBUF); }

/* Raises the simulator's error when count elements from at may not be
   read (or written) now: work still to run copies into (out of) them. */
static void check_settled(lua_State *L, cg_hostbuf *h, size_t at,
                          size_t count, int write) {
  char why[1200];
  size_t es = cg_type_size[h->type];
  if (cg_drv.cuSimHostAccess &&
      cg_drv.cuSimHostAccess((char *)h->h.drv.host + at * es, count * es,
                             write, why, sizeof why) != CUDA_SUCCESS)
    luaL_error(L, "%s", why);
}

/* h:set(table | string [, offset]): elements from offset (0-based) on. */
static int hostbuf_set(lua_State *L) {
  cg_hostbuf *h = check(L);
  size_t es = cg_type_size[h->type], count, len = 0;
  lua_Integer off = luaL_optinteger(L, 3, 0);
  if (lua_type(L, 2) == LUA_TSTRING) {
    lua_tolstring(L, 2, &len);
    if (len % es)
      luaL_error(L, "set: string of %I bytes is not a whole number of %s",
                 (LUAI_UACINT)len, cg_type_names[h->type]);
    count = len / es;
  } else {
    luaL_checktype(L, 2, LUA_TTABLE);
    count = lua_rawlen(L, 2);
  }
  if (off < 0 || (uint64_t)off > h->n || count > h->n - (size_t)off)
    luaL_error(L, "set: %I elements at offset %I do not fit in %s[%I] "
               "(offsets are 0-based)", (LUAI_UACINT)count, (LUAI_UACINT)off,
               cg_type_names[h->type], (LUAI_UACINT)h->n);
  check_settled(L, h, (size_t)off, count, 1);
  if (len) { /* no allocation between the check and the copy */
    memcpy((char *)h->h.drv.host + (size_t)off * es, lua_tostring(L, 2), len);
    lua_settop(L, 1);
    return 1;
  }
  char what[64];
  uint64_t v;
  for (size_t i = 0; i < count; i++) {
    if (lua_rawgeti(L, 2, (lua_Integer)i + 1) == LUA_TNIL)
      luaL_error(L, "set: element %I is nil (a table must be a sequence)",
                 (LUAI_UACINT)i + 1);
    snprintf(what, sizeof what, "set: element %llu",
             (unsigned long long)i + 1);
    cg_tobits(L, -1, h->type, &v, what);
    lua_pop(L, 1);
    cg_check_open(L, &h->h); /* a finalizer may have freed it */
    memcpy((char *)h->h.drv.host + ((size_t)off + i) * es, &v, es);
  }
  lua_settop(L, 1);
  return 1;
}

/* cuda.host_buffer(type, n | table | string) */
static int hostbuf_new(lua_State *L) {
  cg_type t = cg_checktype(L, 1);
  int init;
  size_t n = cg_checkinit(L, 2, t, &init, "no elements to copy");
  lua_settop(L, 2);
  cg_ctx *ctx = cg_context(L);
  cg_check_outside(L, ctx, "cannot allocate a host buffer",
           "allocate host buffers before capture");
  cg_hostbuf *h = cg_newobj(L, ctx, sizeof *h, CG_HOSTBUF);
  h->type = t;
  h->n = n;
  CU(L, ctx, cuMemHostAlloc, &h->h.drv.host, n * cg_type_size[t], 0);
  h->dev = (CUdeviceptr)(uintptr_t)h->h.drv.host;
  h->h.open = 1;
  if (!init) {
    memset(h->h.drv.host, 0, n * cg_type_size[t]);
    return 1;
  }
  lua_replace(L, 1);
  lua_settop(L, 2);
  hostbuf_set(L);
  return 1;
}

static int hostbuf_free(lua_State *L) { return cg_close(L, CG_HOSTBUF, 0); }
static int hostbuf_gc(lua_State *L) { return cg_close(L, CG_HOSTBUF, 1); }

/* The element index at 2, 0-based, checked against the bounds. */
static size_t checkindex(lua_State *L, cg_hostbuf *h) {
  int ok;
  lua_Integer i = lua_tointegerx(L, 2, &ok);
  if (!ok)
    luaL_error(L, "%s index must be an integer, got %s",
               cg_kind_names[CG_HOSTBUF], luaL_typename(L, 2));
  if (i < 0 || (uint64_t)i >= h->n)
    luaL_error(L, "index %I out of range: host buffer elements are 0-based, "
               "0..%I", (LUAI_UACINT)i, (LUAI_UACINT)h->n - 1);
  return (size_t)i;
}

/* h[i], or a method */
static int hostbuf_index(lua_State *L) {
  if (lua_type(L, 2) != LUA_TNUMBER) return cg_index(L);
  cg_hostbuf *h = check(L);
  size_t es = cg_type_size[h->type], i = checkindex(L, h);
  check_settled(L, h, i, 1, 0);
  cg_pushbits(L, h->type, (char *)h->h.drv.host + i * es);
  return 1;
}

/* h[i] = v */
static int hostbuf_newindex(lua_State *L) {
  cg_hostbuf *h = check(L);
  if (lua_type(L, 2) != LUA_TNUMBER)
    luaL_error(L, "%s has no field '%s' to set", cg_kind_names[CG_HOSTBUF],
               luaL_tolstring(L, 2, NULL));
  size_t i = checkindex(L, h), es = cg_type_size[h->type];
  uint64_t v;
  cg_tobits(L, 3, h->type, &v, NULL);
  check_settled(L, h, i, 1, 1);
  memcpy((char *)h->h.drv.host + i * es, &v, es);
  return 0;
}

static int hostbuf_len(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)check(L)->n);
  return 1;
}

/* h:totable(): a Lua sequence, h[0] at t[1] */
static int hostbuf_totable(lua_State *L) {
  cg_hostbuf *h = check(L);
  size_t es = cg_type_size[h->type];
  check_settled(L, h, 0, h->n, 0);
  lua_createtable(L, (int)(h->n < INT32_MAX ? h->n : INT32_MAX), 0);
  for (size_t i = 0; i < h->n; i++) {
    cg_check_open(L, &h->h); /* a finalizer may have freed it */
    cg_pushbits(L, h->type, (char *)h->h.drv.host + i * es);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

/* h:tostring(): the contents as a binary string */
static int hostbuf_contents(lua_State *L) {
  cg_hostbuf *h = check(L);
  check_settled(L, h, 0, h->n, 0);
  lua_pushlstring(L, h->h.drv.host, h->n * cg_type_size[h->type]);
  return 1;
}

static int hostbuf_type(lua_State *L) {
  lua_pushstring(L, cg_type_names[check(L)->type]);
  return 1;
}

/* h:bytes(): the size in bytes, as b:bytes() */
static int hostbuf_bytes(lua_State *L) {
  cg_hostbuf *h = check(L);
  lua_pushinteger(L, (lua_Integer)(h->n * cg_type_size[h->type]));
  return 1;
}

static int hostbuf_tostring(lua_State *L) {
  cg_hostbuf *h = cg_toobj(L, 1, CG_HOSTBUF);
  return cg_tostring(L, &h->h, " %s[%I] (%p, pinned%s)",
                     cg_type_names[h->type], (LUAI_UACINT)h->n, h->h.drv.host,
                     h->h.owned ? "" : ", borrowed");
}

void cg_push_hostbuf(lua_State *L, cg_ctx *ctx, void *p, cg_type t,
                     size_t n) {
  const char *what = "cugraph_pushhostbuffer";
  if (!p || !n) luaL_error(L, "%s: null pointer or size 0", what);
  if (n > SIZE_MAX / cg_type_size[t] || n > (size_t)INT64_MAX / 8)
    luaL_error(L, "%s: the size in bytes of the %s buffer overflows", what,
               cg_type_names[t]);
  if (!cg_drv.cuMemHostGetDevicePointer)
    luaL_error(L, "%s: this CUDA driver lacks cuMemHostGetDevicePointer", what);
  CUdeviceptr dev = 0;
  CUresult r = cg_drv.cuMemHostGetDevicePointer(&dev, p, 0);
  if (r != CUDA_SUCCESS) /* its device address says it is page-locked */
    luaL_error(L, "%s: %p is not mapped page-locked memory of device %d "
               "(cuMemHostGetDevicePointer: %s); allocate it with "
               "cuMemHostAlloc or register it with cuMemHostRegister, with "
               "the DEVICEMAP flag", what, p, ctx->ordinal,
               cg_driver_errname(r, (char[CG_ERRNAME]){0}));
  cg_hostbuf *h = cg_newobj(L, ctx, sizeof *h, CG_HOSTBUF);
  h->h.drv.host = p;
  h->type = t;
  h->n = n;
  h->dev = dev;
  h->h.owned = 0;
  h->h.open = 1;
}

void hostbuf_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"set", hostbuf_set}, {"totable", hostbuf_totable},
    {"tostring", hostbuf_contents}, {"bytes", hostbuf_bytes},
    {"type", hostbuf_type}, {"free", hostbuf_free},
    {"close", hostbuf_free}, {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__index", hostbuf_index}, {"__newindex", hostbuf_newindex},
    {"__gc", hostbuf_gc}, {"__close", hostbuf_free}, {"__len", hostbuf_len},
    {"__tostring", hostbuf_tostring}, {NULL, NULL}
  };
  cg_newtype(L, CG_HOSTBUF, methods, meta, NULL);
  lua_pushcfunction(L, hostbuf_new);
  lua_setfield(L, -2, "host_buffer");
}
