/* cugraph.Array: a CUDA array (cuArray3DCreate), the memory of images that
   textures sample and surfaces load and store. Its texels are 1, 2 or 4
   elements of one type ("f32x4": four f32); copies between arrays,
   Buffers and HostBuffers are b:copy2d and b:copy3d (pitched.c), eager
   and as copy nodes of a capture. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "types/types.h"

CUarray_format cg_array_format(cg_type t) {
  switch (t) {
  case CG_U8: return CU_AD_FORMAT_UNSIGNED_INT8;
  case CG_U16: return CU_AD_FORMAT_UNSIGNED_INT16;
  case CG_U32: return CU_AD_FORMAT_UNSIGNED_INT32;
  case CG_I8: return CU_AD_FORMAT_SIGNED_INT8;
  case CG_I16: return CU_AD_FORMAT_SIGNED_INT16;
  case CG_I32: return CU_AD_FORMAT_SIGNED_INT32;
  case CG_F16: return CU_AD_FORMAT_HALF;
  case CG_F32: return CU_AD_FORMAT_FLOAT;
  default: return (CUarray_format)0;
  }
}

void cg_check_array_format(lua_State *L, int idx, const char *what,
                           cg_type *t, int *channels) {
  const char *s = cg_checkname(L, idx, what);
  size_t len = strlen(s);
  char base[8];
  const char *x = strchr(s, 'x');
  size_t n = x ? (size_t)(x - s) : len;
  *channels = 1;
  if (x && ((x[1] != '1' && x[1] != '2' && x[1] != '4') || x[2]))
    luaL_error(L, "%s: format '%s': a texel has 1, 2 or 4 channels "
               "(\"f32\", \"f32x2\", \"u8x4\")", what, s);
  if (x) *channels = x[1] - '0';
  int i = -1;
  if (n < sizeof base) {
    memcpy(base, s, n);
    base[n] = 0;
    for (i = 0; cg_type_names[i] && strcmp(cg_type_names[i], base); i++) {}
    if (!cg_type_names[i]) i = -1;
  }
  if (i < 0 || !cg_array_format((cg_type)i))
    luaL_error(L, "%s: format '%s': the element type must be one of "
               "u8, i8, u16, i16, u32, i32, f16, f32", what, s);
  *t = (cg_type)i;
}

size_t cg_check_array_bytes(lua_State *L, const char *what, size_t w,
                            size_t h, size_t d, size_t texel) {
  size_t bytes = 0;
  if (!cg_mul_ok(w, h ? h : 1, &bytes) || !cg_mul_ok(bytes, d ? d : 1, &bytes)
      || !cg_mul_ok(bytes, texel, &bytes))
    luaL_error(L, "%s: %I x %I x %I texels of %I bytes overflow a size", what,
               (LUAI_UACINT)w, (LUAI_UACINT)(h ? h : 1),
               (LUAI_UACINT)(d ? d : 1), (LUAI_UACINT)texel);
  return bytes;
}

/* A dimension at idx: 1..max, or 0 when absent (and allowed to be). */
static size_t dim(lua_State *L, int idx, const char *name, int need) {
  if (!need && lua_isnoneornil(L, idx)) return 0;
  lua_Integer v = luaL_checkinteger(L, idx);
  luaL_argcheck(L, v > 0 && v <= (1 << 30), idx,
                lua_pushfstring(L, "%s must be 1..2^30", name));
  return (size_t)v;
}

/* The device's limit on one dimension of an array of this shape. */
static size_t limit(lua_State *L, cg_ctx *ctx, CUdevice_attribute a) {
  int v = 0;
  CU(L, ctx, cuDeviceGetAttribute, &v, a, ctx->dev);
  return v > 0 ? (size_t)v : 0;
}

cg_array *cg_array_new(lua_State *L, cg_ctx *ctx, cg_type t, int channels,
                           int surface, size_t w, size_t h, size_t d) {
  cg_array *a = cg_newobj(L, ctx, sizeof *a, CG_ARRAY);
  a->type = t;
  a->channels = channels;
  a->surface = surface;
  a->width = w;
  a->height = h;
  a->depth = d;
  return a;
}

/* cuda.array(format, width [, height [, depth]] [, opts]): opts
   {surface = true} allows surface loads and stores. */
static int array_new(lua_State *L) {
  static const char *const keys[] = { "surface", NULL };
  int top = lua_gettop(L), oidx = 0;
  if (top >= 2 && lua_istable(L, top)) {
    oidx = top--;
    cg_check_options(L, oidx, "cuda.array", keys);
  }
  cg_type t;
  int channels;
  cg_check_array_format(L, 1, "cuda.array", &t, &channels);
  if (top > 4)
    return luaL_error(L, "cuda.array: too many dimensions: an array has "
                      "width, height and depth");
  size_t w = dim(L, 2, "width", 1);
  size_t h = top >= 3 ? dim(L, 3, "height", 0) : 0;
  size_t d = top >= 4 ? dim(L, 4, "depth", 0) : 0;
  if (d && !h) return luaL_error(L, "cuda.array: a depth needs a height");
  cg_check_array_bytes(L, "cuda.array", w, h, d,
                       (size_t)channels * cg_type_size[t]);
  int surface = 0;
  if (oidx) {
    lua_getfield(L, oidx, "surface");
    surface = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  cg_ctx *ctx = cg_context(L);
  cg_check_outside(L, ctx, "cannot allocate an array",
                   "allocate arrays before capture");
  if (!cg_drv.cuArray3DCreate)
    return luaL_error(L, "cuda.array: this CUDA driver has no arrays");
  /* the device's limits, so that a size it refuses is named here: by
     texture or surface, dimensions, then width, height, depth */
  static const CUdevice_attribute lims[2][3][3] = {
    {{CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH},
     {CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH,
      CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT},
     {CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH,
      CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT,
      CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH}},
    {{CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH},
     {CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH,
      CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT},
     {CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH,
      CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT,
      CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH}}};
  const size_t size[3] = { w, h, d };
  static const char *const names[3] = { "width", "height", "depth" };
  int dims = d ? 3 : h ? 2 : 1;
  for (int i = 0; i < dims; i++) {
    size_t m = limit(L, ctx, lims[surface][dims - 1][i]);
    if (m && size[i] > m)
      return luaL_error(L, "cuda.array: %s %I is past this device's %I for "
                        "a %d-D %s", names[i], (LUAI_UACINT)size[i],
                        (LUAI_UACINT)m, dims, surface ? "surface" : "texture");
  }
  lua_settop(L, 1);
  cg_array *a = cg_array_new(L, ctx, t, channels, surface, w, h, d);
  CUDA_ARRAY3D_DESCRIPTOR desc = {
    .Width = w, .Height = h, .Depth = d, .Format = cg_array_format(t),
    .NumChannels = (unsigned)channels,
    .Flags = surface ? CUDA_ARRAY3D_SURFACE_LDST : 0,
  };
  CU(L, ctx, cuArray3DCreate, &a->h.drv.array, &desc);
  a->h.open = 1;
  return 1;
}

void cg_push_array(lua_State *L, cg_ctx *ctx, CUarray h) {
  if (!h) luaL_error(L, "cugraph_pusharray: null array");
  if (!cg_drv.cuArray3DGetDescriptor)
    luaL_error(L, "cugraph_pusharray: this CUDA driver has no arrays");
  CUDA_ARRAY3D_DESCRIPTOR d;
  CU(L, ctx, cuArray3DGetDescriptor, &d, h);
  int t = 0;
  while (cg_type_names[t] && !(cg_array_format((cg_type)t) == d.Format &&
                               cg_array_format((cg_type)t))) t++;
  if (!cg_type_names[t] ||
      (d.NumChannels != 1 && d.NumChannels != 2 && d.NumChannels != 4) ||
      (d.Flags & ~(unsigned)(CUDA_ARRAY3D_SURFACE_LDST |
                             CUDA_ARRAY3D_TEXTURE_GATHER |
                             CUDA_ARRAY3D_COLOR_ATTACHMENT)))
    luaL_error(L, "cugraph_pusharray: an array of format 0x%x, %d channels, "
               "flags 0x%x: cugraph arrays have 1, 2 or 4 channels of u8 to "
               "f32 and no flags but surface stores, gather and color "
               "attachment", (unsigned)d.Format, (int)d.NumChannels,
               d.Flags);
  cg_array *a = cg_array_new(L, ctx, (cg_type)t, (int)d.NumChannels,
                          (d.Flags & CUDA_ARRAY3D_SURFACE_LDST) != 0, d.Width,
                          d.Height, d.Depth);
  a->h.drv.array = h;
  a->h.owned = 0;
  a->h.open = 1;
}

static cg_array *check(lua_State *L) { return cg_checkobj(L, 1, CG_ARRAY); }

/* Its textures and surfaces read its handle: it is freed after them (a
   collected array's are garbage too). */
static int array_free(lua_State *L) {
  cg_array *a = cg_toobj(L, 1, CG_ARRAY);
  if (a->h.open && a->h.views)
    luaL_error(L, "cannot free %s: %d open texture or surface object%s over "
               "it (a:texture, a:surface); free them first",
               cg_kind_names[CG_ARRAY], (int)a->h.views,
               a->h.views > 1 ? "s" : "");
  return cg_close(L, CG_ARRAY, 0);
}
static int array_gc(lua_State *L) { return cg_close(L, CG_ARRAY, 1); }

/* One over external memory (its parent) is one view of it fewer. */
static void array_release(lua_State *L, cg_obj *o) {
  if (o->parent) cg_unview(L, o->parent);
}

/* a:shape() -> width [, height [, depth]]: as many as it has */
static int array_shape(lua_State *L) {
  cg_array *a = check(L);
  lua_pushinteger(L, (lua_Integer)a->width);
  if (!a->height) return 1;
  lua_pushinteger(L, (lua_Integer)a->height);
  if (!a->depth) return 2;
  lua_pushinteger(L, (lua_Integer)a->depth);
  return 3;
}

/* "f32x4", "u8", ...: a's format as cuda.array takes it, in buf. */
static const char *format_name(const cg_array *a, char buf[16]) {
  if (a->channels == 1) return cg_type_names[a->type];
  snprintf(buf, 16, "%sx%d", cg_type_names[a->type], a->channels);
  return buf;
}

/* a:format() -> "f32x4" ..., the element type, the channels */
static int array_format(lua_State *L) {
  cg_array *a = check(L);
  char buf[16];
  lua_pushstring(L, format_name(a, buf));
  lua_pushstring(L, cg_type_names[a->type]);
  lua_pushinteger(L, a->channels);
  return 3;
}

/* a:bytes(): its texels' bytes (the driver may lay them out in more) */
static int array_bytes(lua_State *L) {
  cg_array *a = check(L);
  lua_pushinteger(L, (lua_Integer)cg_array_bytes(a));
  return 1;
}

static int array_tostring(lua_State *L) {
  cg_array *a = cg_toobj(L, 1, CG_ARRAY);
  char shape[64];
  if (a->depth)
    snprintf(shape, sizeof shape, "%zux%zux%zu", a->width, a->height,
             a->depth);
  else if (a->height)
    snprintf(shape, sizeof shape, "%zux%zu", a->width, a->height);
  else snprintf(shape, sizeof shape, "%zu", a->width);
  char buf[16];
  return cg_tostring(L, &a->h, " %s[%s]%s (%p)", format_name(a, buf), shape,
                     a->surface ? " surface" : "", (void *)a->h.drv.array);
}

void array_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"shape", array_shape}, {"format", array_format}, {"bytes", array_bytes},
    {"free", array_free}, {"close", array_free}, {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", array_gc}, {"__close", array_free},
    {"__tostring", array_tostring}, {NULL, NULL}
  };
  cg_newtype(L, CG_ARRAY, methods, meta, array_release);
  lua_pushcfunction(L, array_new);
  lua_setfield(L, -2, "array");
}
