/* cugraph.ExternalMemory: memory another API allocated and exported (a
   Vulkan or OpenGL allocation's opaque file descriptor), imported with
   cuImportExternalMemory, so that kernels read and write what a renderer
   draws from with no copy. Buffers over ranges of it (mem:buffer) and Arrays
   over images in it (mem:array) are its views: it is destroyed after all of
   them, and a graph that uses one of them keeps it (pins walk up). */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include "types/types.h"

/* CUexternalMemoryHandleType's names, from 1; Linux has the first. */
static const char *const kinds[] = {
  "opaque_fd", "opaque_win32", "opaque_win32_kmt", "d3d12_heap",
  "d3d12_resource", "d3d11_resource", "d3d11_resource_kmt", "nvscibuf", NULL
};

/* Raises unless the driver has what external memory needs. */
static void check_driver(lua_State *L, const char *what) {
  if (!cg_drv.cuImportExternalMemory || !cg_drv.cuDestroyExternalMemory ||
      !cg_drv.cuExternalMemoryGetMappedBuffer ||
      !cg_drv.cuExternalMemoryGetMappedMipmappedArray ||
      !cg_drv.cuMipmappedArrayGetLevel || !cg_drv.cuMipmappedArrayDestroy)
    luaL_error(L, "%s: this CUDA driver has no external memory", what);
}

/* An open file descriptor at idx: CUDA takes it on a successful import. */
int cg_check_fd(lua_State *L, int idx, const char *what) {
  int ok;
  lua_Integer fd = lua_tointegerx(L, idx, &ok);
  if (!ok || fd < 0 || fd > 0x7fffffff)
    luaL_error(L, "%s: the handle must be a file descriptor (an integer >= "
               "0), got %s", what, luaL_tolstring(L, idx, NULL));
  if (fcntl((int)fd, F_GETFD) == -1)
    luaL_error(L, "%s: %d is not an open file descriptor", what, (int)fd);
  return (int)fd;
}

static cg_extmem *push(lua_State *L, cg_ctx *ctx, size_t size, int kind) {
  cg_extmem *e = cg_newobj(L, ctx, sizeof *e, CG_EXTMEM);
  e->size = size;
  e->kind = kind;
  e->h.drv.extmem = calloc(1, sizeof *e->h.drv.extmem);
  if (!e->h.drv.extmem) luaL_error(L, "out of host memory");
  return e;
}

/* cuda.external_memory(handle, size [, opts]): opts {kind = "opaque_fd",
   dedicated = true (a dedicated allocation: Vulkan images)} */
static int extmem_new(lua_State *L) {
  static const char *const keys[] = { "kind", "dedicated", NULL };
  const char *what = "cuda.external_memory";
  lua_Integer size = luaL_checkinteger(L, 2);
  luaL_argcheck(L, size > 0, 2, "the size must be a positive number of bytes");
  int kind = 0, dedicated = 0;
  if (!lua_isnoneornil(L, 3)) {
    luaL_checktype(L, 3, LUA_TTABLE);
    cg_check_options(L, 3, what, keys);
    lua_getfield(L, 3, "kind");
    kind = cg_checkoption(L, -1, "opaque_fd", kinds);
    lua_getfield(L, 3, "dedicated");
    dedicated = lua_toboolean(L, -1);
  }
  if (kind != 0)
    return luaL_error(L, "%s: handle kind \"%s\" is not one of this "
                      "platform's: on Linux the handle is an opaque file "
                      "descriptor (kind \"opaque_fd\")", what, kinds[kind]);
  int fd = cg_check_fd(L, 1, what);
  cg_ctx *ctx = cg_context(L);
  cg_check_outside(L, ctx, "cannot import external memory",
                   "import before capture");
  check_driver(L, what);
  lua_settop(L, 0);
  cg_extmem *e = push(L, ctx, (size_t)size, kind + 1);
  CUDA_EXTERNAL_MEMORY_HANDLE_DESC d;
  memset(&d, 0, sizeof d);
  d.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD;
  d.handle.fd = fd;
  d.size = (unsigned long long)size;
  d.flags = dedicated ? CUDA_EXTERNAL_MEMORY_DEDICATED : 0;
  CUresult r = cg_drv.cuImportExternalMemory(&e->h.drv.extmem->mem, &d);
  if (r != CUDA_SUCCESS) { /* the descriptor stays the caller's */
    free(e->h.drv.extmem);
    e->h.drv.extmem = NULL;
    cg_check(L, ctx, "cuImportExternalMemory", r);
  }
  e->h.open = 1;
  return 1;
}

void cg_push_extmem(lua_State *L, cg_ctx *ctx, CUexternalMemory m,
                    size_t size) {
  if (!m || !size)
    luaL_error(L, "cugraph_pushexternalmemory: null memory or size 0");
  check_driver(L, "cugraph_pushexternalmemory");
  cg_extmem *e = push(L, ctx, size, 0);
  e->h.drv.extmem->mem = m;
  e->h.drv.extmem->borrowed = 1;
  e->h.open = 1;
}

static cg_extmem *check(lua_State *L) { return cg_checkobj(L, 1, CG_EXTMEM); }

/* An offset at idx (absent: 0) of bytes more that fit in e. */
static size_t range(lua_State *L, cg_extmem *e, int idx, size_t bytes,
                    const char *what) {
  lua_Integer off = luaL_optinteger(L, idx, 0);
  if (off < 0 || (uint64_t)off > e->size || bytes > e->size - (size_t)off)
    luaL_error(L, "%s: %I bytes at offset %I pass the end of the external "
               "memory (%I bytes)", what, (LUAI_UACINT)bytes,
               (LUAI_UACINT)off, (LUAI_UACINT)e->size);
  return (size_t)off;
}

/* Makes the new object at the top a view of e (at 1). */
static void adopt(lua_State *L, cg_extmem *e, cg_obj *o) {
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  o->parent = &e->h;
  e->h.views++;
}

/* mem:buffer(type, n [, offset]): n elements of type from byte offset */
static int extmem_buffer(lua_State *L) {
  cg_extmem *e = check(L);
  cg_type t = cg_checktype(L, 2);
  size_t n = cg_checkcount(L, 3, t), bytes = n * cg_type_size[t];
  size_t off = range(L, e, 4, bytes, "mem:buffer");
  if (off % cg_type_size[t])
    return luaL_error(L, "mem:buffer: offset %I is not aligned for %s",
                      (LUAI_UACINT)off, cg_type_names[t]);
  cg_check_outside(L, e->h.ctx, "cannot map external memory",
                   "map before capture");
  lua_settop(L, 1);
  cg_buffer *b = cg_newobj(L, e->h.ctx, sizeof *b, CG_BUFFER);
  b->type = t;
  b->n = n;
  cg_check_open(L, &e->h); /* the allocation may have run a finalizer */
  CUDA_EXTERNAL_MEMORY_BUFFER_DESC d;
  memset(&d, 0, sizeof d);
  d.offset = off;
  d.size = bytes;
  CU(L, e->h.ctx, cuExternalMemoryGetMappedBuffer, &b->h.drv.mem,
     e->h.drv.extmem->mem, &d);
  adopt(L, e, &b->h); /* owned: cuMemFree ends the mapping */
  b->h.open = 1;
  return 1;
}

/* mem:array(format, width [, height [, depth]] [, opts]): opts {offset,
   surface = true, color_attachment = true (the image is a render target
   of the other API)} */
static int extmem_array(lua_State *L) {
  static const char *const keys[] = { "offset", "surface", "color_attachment",
                                      NULL };
  static const char *const flag_keys[] = { "surface", "color_attachment" };
  static const unsigned flag_bits[] = { CUDA_ARRAY3D_SURFACE_LDST,
                                        CUDA_ARRAY3D_COLOR_ATTACHMENT };
  cg_extmem *e = check(L);
  int top = lua_gettop(L), oidx = 0;
  if (top >= 3 && lua_istable(L, top)) {
    oidx = top--;
    cg_check_options(L, oidx, "mem:array", keys);
  }
  cg_type t;
  int channels;
  cg_check_array_format(L, 2, "mem:array", &t, &channels);
  if (top > 5)
    return luaL_error(L, "mem:array: too many dimensions: an array has "
                      "width, height and depth");
  size_t dims[3] = { 0, 0, 0 };
  static const char *const names[3] = { "width", "height", "depth" };
  for (int i = 0; i < 3 && i + 3 <= top; i++) {
    if (i && lua_isnil(L, i + 3)) continue;
    lua_Integer v = luaL_checkinteger(L, i + 3);
    luaL_argcheck(L, v > 0 && v <= (1 << 30), i + 3,
                  lua_pushfstring(L, "%s must be 1..2^30", names[i]));
    dims[i] = (size_t)v;
  }
  if (!dims[0]) luaL_checkinteger(L, 3);
  if (dims[2] && !dims[1])
    return luaL_error(L, "mem:array: a depth needs a height");
  unsigned flags = 0;
  lua_Integer off = 0;
  if (oidx) {
    for (int i = 0; i < 2; i++) {
      lua_getfield(L, oidx, flag_keys[i]);
      if (lua_toboolean(L, -1)) flags |= flag_bits[i];
      lua_pop(L, 1);
    }
    lua_getfield(L, oidx, "offset");
    off = luaL_optinteger(L, -1, 0);
    lua_pop(L, 1);
  }
  size_t bytes = cg_check_array_bytes(L, "mem:array", dims[0], dims[1],
                                      dims[2], (size_t)channels *
                                      cg_type_size[t]);
  lua_pushinteger(L, off);
  range(L, e, lua_gettop(L), bytes, "mem:array");
  cg_check_outside(L, e->h.ctx, "cannot map external memory",
                   "map before capture");
  struct cg_extmem_res *m = e->h.drv.extmem;
  if (m->nmips == m->cmips) { /* room first: a mapping is never dropped */
    size_t c = m->cmips ? 2 * m->cmips : 4;
    void *p = realloc(m->mips, c * sizeof *m->mips);
    if (!p) return luaL_error(L, "out of host memory");
    m->mips = p;
    m->cmips = c;
  }
  lua_settop(L, 1);
  cg_array *a = cg_array_new(L, e->h.ctx, t, channels,
                             (flags & CUDA_ARRAY3D_SURFACE_LDST) != 0,
                             dims[0], dims[1], dims[2]);
  a->h.owned = 0; /* the level of a mipmapped array the memory holds */
  cg_check_open(L, &e->h);
  m = e->h.drv.extmem;
  CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC d;
  memset(&d, 0, sizeof d);
  d.offset = (unsigned long long)off;
  d.arrayDesc.Width = dims[0];
  d.arrayDesc.Height = dims[1];
  d.arrayDesc.Depth = dims[2];
  d.arrayDesc.Format = cg_array_format(t);
  d.arrayDesc.NumChannels = (unsigned)channels;
  d.arrayDesc.Flags = flags;
  d.numLevels = 1;
  CUmipmappedArray mip = NULL;
  CU(L, e->h.ctx, cuExternalMemoryGetMappedMipmappedArray, &mip, m->mem, &d);
  m->mips[m->nmips++] = mip;
  CU(L, e->h.ctx, cuMipmappedArrayGetLevel, &a->h.drv.array, mip, 0);
  adopt(L, e, &a->h);
  a->h.open = 1;
  return 1;
}

/* e:size(): its bytes, as imported */
static int extmem_size(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)check(L)->size);
  return 1;
}

/* e:handle(): the CUexternalMemory, for foreign code */
static int extmem_handle(lua_State *L) {
  cg_extmem *e = check(L);
  lua_pushinteger(L, (lua_Integer)(uintptr_t)e->h.drv.extmem->mem);
  return 1;
}

/* Its buffers and arrays are mapped from it: it is freed after them (a
   collected one's are garbage too). */
static int extmem_free(lua_State *L) {
  cg_extmem *e = cg_toobj(L, 1, CG_EXTMEM);
  if (e->h.open && e->h.views)
    luaL_error(L, "cannot free %s: %d open buffer%s or array%s mapped from "
               "it (mem:buffer, mem:array); free them first",
               cg_kind_names[CG_EXTMEM], (int)e->h.views,
               e->h.views > 1 ? "s" : "", e->h.views > 1 ? "s" : "");
  return cg_close(L, CG_EXTMEM, 0);
}
static int extmem_gc(lua_State *L) { return cg_close(L, CG_EXTMEM, 1); }

static int extmem_tostring(lua_State *L) {
  cg_extmem *e = cg_toobj(L, 1, CG_EXTMEM);
  return cg_tostring(L, &e->h, " of %I bytes%s (%p)", (LUAI_UACINT)e->size,
                     e->h.drv.extmem && e->h.drv.extmem->borrowed
                     ? ", borrowed" : "",
                     e->h.drv.extmem ? (void *)e->h.drv.extmem->mem : NULL);
}

void extmem_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"buffer", extmem_buffer}, {"array", extmem_array},
    {"size", extmem_size}, {"handle", extmem_handle},
    {"free", extmem_free}, {"close", extmem_free}, {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", extmem_gc}, {"__close", extmem_free},
    {"__tostring", extmem_tostring}, {NULL, NULL}
  };
  cg_newtype(L, CG_EXTMEM, methods, meta, NULL);
  lua_pushcfunction(L, extmem_new);
  lua_setfield(L, -2, "external_memory");
}
