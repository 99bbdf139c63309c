/* Pitched memory and copies of rectangles and boxes: cuda.pitched makes a
   Buffer whose rows start at a pitch the driver chooses (cuMemAllocPitch),
   b:copy2d and b:copy3d copy a width x height (x depth) region between
   Buffers, HostBuffers and Arrays at any offsets and row pitches
   (cuMemcpy3DAsync), eagerly and as memcpy nodes of a capture. With an
   Array on either side the width and x offsets count its texels. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "types/types.h"

/* cuda.pitched(type, width, height [, depth]) */
static int pitched_new(lua_State *L) {
  cg_type t = cg_checktype(L, 1);
  lua_Integer w = luaL_checkinteger(L, 2), h = luaL_checkinteger(L, 3);
  lua_Integer d = luaL_optinteger(L, 4, 1);
  luaL_argcheck(L, w > 0 && w <= (1 << 30), 2, "width must be 1..2^30");
  luaL_argcheck(L, h > 0 && h <= (1 << 30), 3, "height must be 1..2^30");
  luaL_argcheck(L, d > 0 && d <= (1 << 30), 4, "depth must be 1..2^30");
  size_t es = cg_type_size[t];
  if ((uint64_t)h * (uint64_t)d > UINT32_MAX)
    return luaL_error(L, "cuda.pitched: %I rows are too many",
                      (LUAI_UACINT)(h * d));
  cg_ctx *ctx = cg_context(L);
  cg_check_outside(L, ctx, "cannot allocate a buffer",
                   "allocate buffers before capture");
  if (!cg_drv.cuMemAllocPitch)
    return luaL_error(L, "cuda.pitched: this CUDA driver has no pitched "
                      "allocations");
  lua_settop(L, 4);
  cg_buffer *b = cg_newobj(L, ctx, sizeof *b, CG_BUFFER);
  size_t pitch = 0;
  /* the driver aligns for 4-, 8- or 16-byte elements */
  CU(L, ctx, cuMemAllocPitch, &b->h.drv.mem, &pitch, (size_t)w * es,
     (size_t)(h * d), es < 4 ? 4 : es);
  b->h.open = 1;
  b->type = t;
  b->pitch = pitch;
  b->width = (size_t)w;
  b->height = (size_t)h;
  b->depth = (size_t)d;
  b->n = pitch / es * (size_t)(h * d);
  return 1;
}

/* b:pitch() -> bytes a row (pitched), or nil */
static int buffer_pitch(lua_State *L) {
  cg_buffer *b = cg_checkobj(L, 1, CG_BUFFER);
  if (!b->pitch) return 0;
  lua_pushinteger(L, (lua_Integer)b->pitch);
  return 1;
}

/* b:shape() -> width, height, depth (pitched), a DLPack tensor's shape
   (outermost first), or the element count */
static int buffer_shape(lua_State *L) {
  cg_buffer *b = cg_checkobj(L, 1, CG_BUFFER);
  if (b->shaped) {
    luaL_checkstack(L, b->ndim, "too many dimensions");
    for (int i = 0; i < b->ndim; i++) lua_pushinteger(L, b->shape[i]);
    return b->ndim;
  }
  if (!b->pitch) {
    lua_pushinteger(L, (lua_Integer)b->n);
    return 1;
  }
  lua_pushinteger(L, (lua_Integer)b->width);
  lua_pushinteger(L, (lua_Integer)b->height);
  lua_pushinteger(L, (lua_Integer)b->depth);
  return 3;
}

/* One side of a copy: its memory, element type and size, and the box's
   corner and row and slice strides. */
typedef struct side {
  cg_obj *o;
  cg_array *array;      /* or NULL */
  int host;
  cg_type type;
  size_t bytes;         /* of the whole buffer */
  size_t x, y, z, pitch, rows; /* pitch in bytes; rows a slice */
} side;

static size_t optsize(lua_State *L, int opts, const char *key, size_t dflt,
                      const char *what) {
  if (!opts || lua_getfield(L, opts, key) == LUA_TNIL) {
    if (opts) lua_pop(L, 1);
    return dflt;
  }
  int ok;
  lua_Integer v = lua_tointegerx(L, -1, &ok);
  if (!ok || v < 0)
    luaL_error(L, "%s: opts.%s must be a non-negative integer", what, key);
  lua_pop(L, 1);
  return (size_t)v;
}

/* The bytes of an element of the Buffer or HostBuffer at idx, of a texel
   of the Array there; 0 for anything else. */
static size_t elem_size(lua_State *L, int idx) {
  cg_array *a = cg_testobj(L, idx, CG_ARRAY);
  if (a) return cg_array_texel(a);
  cg_buffer *b = cg_testobj(L, idx, CG_BUFFER);
  if (b) return cg_type_size[b->type];
  cg_hostbuf *h = cg_testobj(L, idx, CG_HOSTBUF);
  return h ? cg_type_size[h->type] : 0;
}

/* The bytes of one step of the box's width (an Array's texel, else the
   elements both sides share) and the width of each side in its own
   elements. An Array's texel must be whole elements of the other side. */
static void widths(lua_State *L, const char *what, size_t w, size_t *wd,
                   size_t *ws, size_t *unit) {
  cg_array *ad = cg_testobj(L, 1, CG_ARRAY), *as = cg_testobj(L, 2, CG_ARRAY);
  size_t ed = elem_size(L, 1), es = elem_size(L, 2);
  if (!ed || !es) { /* get_side names what is wrong */
    *wd = *ws = w, *unit = 1;
    return;
  }
  *unit = ad ? ed : es;
  if (!ad && !as) { /* copy_box names unequal element types */
    *wd = *ws = w;
    return;
  }
  if (*unit % ed || *unit % es)
    luaL_error(L, "%s: %s of %I bytes and %s of %I bytes: a texel must be "
               "whole elements of the other side", what,
               ad ? "texels" : "elements", (LUAI_UACINT)ed,
               as ? "texels" : "elements", (LUAI_UACINT)es);
  *wd = w * *unit / ed;
  *ws = w * *unit / es;
}

/* The Buffer, HostBuffer or Array at idx as side `which` ("dst" or "src"). */
static void get_side(lua_State *L, int idx, int opts, const char *what,
                     const char *which, size_t w, size_t h, size_t d,
                     side *s) {
  char key[16];
  memset(s, 0, sizeof *s);
  cg_buffer *b = cg_testobj(L, idx, CG_BUFFER);
  size_t pitch = 0, rows = h;
  cg_array *a = b ? NULL : cg_testobj(L, idx, CG_ARRAY);
  if (a) {
    cg_check_open(L, &a->h);
    static const char *const own[] = { "pitch", "height" };
    for (int i = 0; i < 2; i++) {
      snprintf(key, sizeof key, "%s_%s", which, own[i]);
      if (opts && lua_getfield(L, opts, key) != LUA_TNIL)
        luaL_error(L, "%s: opts.%s: an array has its own layout", what, key);
      if (opts) lua_pop(L, 1);
    }
    s->o = &a->h;
    s->array = a;
    s->type = a->type;
  } else if (b) {
    cg_check_mem(L, b->h.ctx, &b->h, what);
    s->o = &b->h;
    s->type = b->type;
    s->bytes = b->n * cg_type_size[b->type];
    if (b->pitch) pitch = b->pitch, rows = b->height;
  } else {
    cg_hostbuf *hb = cg_testobj(L, idx, CG_HOSTBUF);
    if (!hb)
      luaL_error(L, "%s: %s must be a cugraph.Buffer, HostBuffer or Array, "
                 "got %s", what, which, luaL_typename(L, idx));
    s->o = &hb->h;
    s->host = 1;
    s->type = hb->type;
    s->bytes = hb->n * cg_type_size[hb->type];
  }
  cg_check_open(L, s->o);
  size_t es = a ? cg_array_texel(a) : cg_type_size[s->type];
  snprintf(key, sizeof key, "%s_x", which);
  s->x = optsize(L, opts, key, 0, what);
  snprintf(key, sizeof key, "%s_y", which);
  s->y = optsize(L, opts, key, 0, what);
  snprintf(key, sizeof key, "%s_z", which);
  s->z = optsize(L, opts, key, 0, what);
  snprintf(key, sizeof key, "%s_pitch", which);
  size_t p = optsize(L, opts, key, 0, what);
  if (p && b && b->pitch)
    luaL_error(L, "%s: opts.%s: a pitched buffer has its own pitch", what,
               key);
  if (a) { /* its texels, row by row, as far as the box's checks go */
    pitch = a->width * es;
    rows = a->height ? a->height : 1;
    s->bytes = cg_array_bytes(a);
  }
  if (p && !cg_mul_ok(p, es, &s->pitch))
    luaL_error(L, "%s: opts.%s: %I elements of %I bytes overflow a size",
               what, key, (LUAI_UACINT)p, (LUAI_UACINT)es);
  if (!p) s->pitch = pitch ? pitch : w * es; /* w * es: below 2^35 */
  /* a plain buffer's rows: all there are for a rectangle, h a slice of a
     box */
  if (!pitch) rows = d == 1 ? s->bytes / s->pitch : h;
  if (a) s->rows = rows;
  snprintf(key, sizeof key, "%s_height", which);
  if (!a) s->rows = optsize(L, opts, key, rows, what);
  size_t width = a ? a->width : b && b->pitch ? b->width : s->pitch / es;
  if (s->x + w > width)
    luaL_error(L, "%s: the %s rows are %I elements wide; %I from x = %I do "
               "not fit", what, which, (LUAI_UACINT)width, (LUAI_UACINT)w,
               (LUAI_UACINT)s->x);
  if (s->rows < h || s->y + h > s->rows)
    luaL_error(L, "%s: the %s slices have %I rows; %I from y = %I do not "
               "fit", what, which, (LUAI_UACINT)s->rows, (LUAI_UACINT)h,
               (LUAI_UACINT)s->y);
  size_t slices = a ? (a->depth ? a->depth : 1) : b && b->pitch ? b->depth : 0;
  if (slices && s->z + d > slices)
    luaL_error(L, "%s: the %s has %I slices; %I from z = %I do not fit",
               what, which, (LUAI_UACINT)slices, (LUAI_UACINT)d,
               (LUAI_UACINT)s->z);
}

/* Whether the box of w x h x d elements at s's corner lies in its memory:
   the end of its last row, exactly (an offset below 2^63 plus a size below
   2^31 cannot wrap; a product that would wraps past every end). */
static int fits(const side *s, size_t w, size_t h, size_t d) {
  size_t es = s->array ? cg_array_texel(s->array) : cg_type_size[s->type];
  size_t end;
  return cg_mul_ok(s->z + d - 1, s->rows, &end) &&
         cg_add_ok(end, s->y + h - 1, &end) &&
         cg_mul_ok(end, s->pitch, &end) &&
         cg_add_ok(end, (s->x + w) * es, &end) && end <= s->bytes;
}

static void fill(const side *s, CUmemorytype *mt, CUdeviceptr *dev,
                 const void **host, CUarray *arr, size_t *x, size_t *y,
                 size_t *z, size_t *pitch, size_t *height) {
  size_t es = s->array ? cg_array_texel(s->array) : cg_type_size[s->type];
  if (s->array) {
    *mt = CU_MEMORYTYPE_ARRAY;
    *arr = s->array->h.drv.array;
    *x = s->x * es;
    *y = s->y;
    *z = s->z;
    return;
  }
  if (s->host) {
    *mt = CU_MEMORYTYPE_HOST;
    *host = ((cg_hostbuf *)s->o)->h.drv.host;
  } else {
    *mt = CU_MEMORYTYPE_DEVICE;
    *dev = s->o->drv.mem;
  }
  *x = s->x * es;
  *y = s->y;
  *z = s->z;
  *pitch = s->pitch;
  *height = s->rows;
}

/* dst:copy2d(src, width, height [, opts]) and dst:copy3d(src, width,
   height, depth [, opts]): opts {stream, dst_x, dst_y, dst_z, src_x, src_y,
   src_z, dst_pitch, src_pitch, dst_height, src_height} (elements and rows;
   a pitched buffer's own pitch and height are the defaults, a plain one's
   rows are width elements). */
static int copy_box(lua_State *L, int three) {
  static const char *const keys[] = {
    "stream", "dst_x", "dst_y", "dst_z", "src_x", "src_y", "src_z",
    "dst_pitch", "src_pitch", "dst_height", "src_height", NULL
  };
  const char *what = three ? "copy3d" : "copy2d";
  int oidx = three ? 6 : 5, nargs = lua_gettop(L);
  lua_Integer w = luaL_checkinteger(L, 3), h = luaL_checkinteger(L, 4);
  lua_Integer d = three ? luaL_checkinteger(L, 5) : 1;
  luaL_argcheck(L, w > 0 && w <= (1 << 30), 3, "width must be 1..2^30");
  luaL_argcheck(L, h > 0 && h <= (1 << 30), 4, "height must be 1..2^30");
  luaL_argcheck(L, d > 0 && d <= (1 << 30), 5, "depth must be 1..2^30");
  int opts = 0;
  if (!lua_isnoneornil(L, oidx)) {
    luaL_checktype(L, oidx, LUA_TTABLE);
    cg_check_options(L, oidx, what, keys);
    opts = oidx;
  }
  lua_settop(L, oidx);
  side dst, src;
  size_t wd, ws, unit;
  widths(L, what, (size_t)w, &wd, &ws, &unit);
  get_side(L, 1, opts, what, "dst", wd, (size_t)h, (size_t)d, &dst);
  get_side(L, 2, opts, what, "src", ws, (size_t)h, (size_t)d, &src);
  if (dst.host && src.host)
    return luaL_error(L, "%s: host to host: one side must be a Buffer or an "
                      "Array", what);
  if (!dst.array && !src.array &&
      cg_type_size[dst.type] != cg_type_size[src.type])
    return luaL_error(L, "%s: elements of %s and %s differ in size", what,
                      cg_type_names[dst.type], cg_type_names[src.type]);
  if (!three && (dst.z || src.z))
    return luaL_error(L, "copy2d: a z offset needs copy3d");
  if (!fits(&dst, wd, (size_t)h, (size_t)d) ||
      !fits(&src, ws, (size_t)h, (size_t)d))
    return luaL_error(L, "%s: the %Ix%Ix%I box passes the end of the %s",
                      what, (LUAI_UACINT)w, (LUAI_UACINT)h, (LUAI_UACINT)d,
                      fits(&dst, wd, (size_t)h, (size_t)d)
                      ? "source" : "destination");
  cg_ctx *ctx = (dst.host ? src : dst).o->ctx;
  if (dst.o->ctx != ctx || src.o->ctx != ctx)
    return cg_error_devices(L, dst.o->ctx, src.o->ctx, what);
  if (!cg_drv.cuMemcpy3DAsync)
    return luaL_error(L, "%s: this CUDA driver has no 3-D copies", what);
  int sidx = 0;
  if (opts && lua_getfield(L, opts, "stream") != LUA_TNIL) sidx = lua_gettop(L);
  if (cg_recording(ctx)) { /* made again when the graph is built */
    if (!sidx)
      luaL_error(L, "%s without a stream in a graphed function: pass the "
                 "stream the function runs on (opts.stream)", what);
    CUstream rs = cg_optstream(L, sidx, ctx);
    cg_record_call(L, ctx, rs, nargs); /* the call as it was made */
    lua_settop(L, 1);
    return 1;
  }
  cg_pin(L, ctx, 1); /* pins allocate: handles are read after them */
  cg_pin(L, ctx, 2);
  CUstream st = cg_work_begin(L, ctx, sidx, what);
  cg_check_open(L, dst.o);
  cg_check_open(L, src.o);
  CUDA_MEMCPY3D c;
  memset(&c, 0, sizeof c);
  fill(&src, &c.srcMemoryType, &c.srcDevice, &c.srcHost, &c.srcArray,
       &c.srcXInBytes, &c.srcY, &c.srcZ, &c.srcPitch, &c.srcHeight);
  const void *dhost = NULL;
  fill(&dst, &c.dstMemoryType, &c.dstDevice, &dhost, &c.dstArray,
       &c.dstXInBytes, &c.dstY, &c.dstZ, &c.dstPitch, &c.dstHeight);
  c.dstHost = (void *)(uintptr_t)dhost;
  c.WidthInBytes = (size_t)w * unit;
  c.Height = (size_t)h;
  c.Depth = (size_t)d;
  int t = cg_trace_begin(L, ctx, st ? st : ctx->stream, "copy", "copy3d");
  CU(L, ctx, cuMemcpy3DAsync, &c, st ? st : ctx->stream);
  cg_trace_end(L, ctx, t);
  if (ctx->capture) cg_note_copy3d(L, ctx, st, dst.o, src.o);
  cg_work_finish(L, ctx, st);
  lua_settop(L, 1);
  return 1;
}

static int copy2d(lua_State *L) { return copy_box(L, 0); }
static int copy3d(lua_State *L) { return copy_box(L, 1); }

void pitched_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"pitch", buffer_pitch}, {"shape", buffer_shape}, {"copy2d", copy2d},
    {"copy3d", copy3d}, {NULL, NULL}
  };
  static const luaL_Reg hmethods[] = {
    {"copy2d", copy2d}, {"copy3d", copy3d}, {NULL, NULL}
  };
  luaL_getmetatable(L, cg_kind_names[CG_BUFFER]);
  lua_getfield(L, -1, "methods");
  luaL_setfuncs(L, methods, 0);
  lua_pop(L, 2);
  for (int k = 0; k < 2; k++) { /* HostBuffers and Arrays copy alike */
    luaL_getmetatable(L, cg_kind_names[k ? CG_ARRAY : CG_HOSTBUF]);
    lua_getfield(L, -1, "methods");
    luaL_setfuncs(L, hmethods, 0);
    lua_pop(L, 2);
  }
  lua_pushcfunction(L, pitched_new);
  lua_setfield(L, -2, "pitched");
}
