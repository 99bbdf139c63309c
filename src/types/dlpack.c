/* cugraph.DLTensor and DLPack exchange (src/cugraph.h). b:dlpack() and
   cugraph_todlpack lend a Buffer's memory as a DLPack tensor the runtime
   makes: it holds a share of the memory (base/release.c), so the memory
   outlives the Buffer and lua_close until the consumer calls the deleter,
   on any thread. cuda.from_dlpack and cugraph_pushdlpack make a Buffer
   over a tensor, which then owns it: the Buffer is a view of the DLTensor
   that holds the tensor (its parent, user value 1), so graphs pin it, C
   graphs share it and views keep it as they do memory, and the deleter
   runs once, when the Buffer closes and nothing uses it any more. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "types/types.h"
#include "cugraph.h"

enum { MAXDIMS = 32 }; /* of a shape given to b:dlpack */

static DLTensor *tensor_of(uintptr_t h) {
  if (h & 1) return &((DLManagedTensorVersioned *)(h - 1))->dl_tensor;
  return &((DLManagedTensor *)h)->dl_tensor;
}

/* -- element types and devices -------------------------------------------- */

static const struct { unsigned char code, bits; } dtypes[CG_NTYPES] = {
  [CG_F32] = { kDLFloat, 32 }, [CG_F64] = { kDLFloat, 64 },
  [CG_I8] = { kDLInt, 8 },     [CG_U8] = { kDLUInt, 8 },
  [CG_I16] = { kDLInt, 16 },   [CG_U16] = { kDLUInt, 16 },
  [CG_I32] = { kDLInt, 32 },   [CG_U32] = { kDLUInt, 32 },
  [CG_I64] = { kDLInt, 64 },   [CG_U64] = { kDLUInt, 64 },
  [CG_F16] = { kDLFloat, 16 }, [CG_BF16] = { kDLBfloat, 16 },
};

/* The runtime's type of one lane of dt, or -1. */
static int type_of(DLDataType dt) {
  for (int t = 0; t < CG_NTYPES; t++)
    if (dtypes[t].code == dt.code && dtypes[t].bits == dt.bits) return t;
  return -1;
}

/* "float32", "bool8", "code 9, 8 bits": a DLPack type's name (pushed). */
static const char *dtype_name(lua_State *L, DLDataType dt) {
  static const char *const codes[] = {
    "int", "uint", "float", "opaque handle ", "bfloat", "complex", "bool"
  };
  if (dt.code < sizeof codes / sizeof *codes)
    return lua_pushfstring(L, "%s%d", codes[dt.code], (int)dt.bits);
  return lua_pushfstring(L, "code %d, %d bits", (int)dt.code, (int)dt.bits);
}

static const char *device_name(int type) {
  switch (type) {
  case kDLCPU: return "CPU (kDLCPU)";
  case kDLCUDAHost: return "pinned host memory (kDLCUDAHost)";
  case kDLOpenCL: return "OpenCL (kDLOpenCL)";
  case kDLVulkan: return "Vulkan (kDLVulkan)";
  case kDLMetal: return "Metal (kDLMetal)";
  case kDLVPI: return "VPI (kDLVPI)";
  case kDLROCM: return "ROCm (kDLROCM)";
  case kDLROCMHost: return "ROCm host (kDLROCMHost)";
  case kDLExtDev: return "extension (kDLExtDev)";
  case kDLOneAPI: return "oneAPI (kDLOneAPI)";
  case kDLWebGPU: return "WebGPU (kDLWebGPU)";
  case kDLHexagon: return "Hexagon (kDLHexagon)";
  case kDLMAIA: return "MAIA (kDLMAIA)";
  default: return NULL;
  }
}

/* "2x3" (at most some 20 dimensions shown), pushed. */
static const char *shape_text(lua_State *L, int ndim, const int64_t *shape) {
  char buf[256];
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < ndim && len < sizeof buf - 32; i++)
    len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%lld",
                            i ? "x" : "", (long long)shape[i]);
  if (ndim == 0) snprintf(buf, sizeof buf, "scalar");
  else if (len >= sizeof buf - 32) snprintf(buf + len, sizeof buf - len, "x...");
  return lua_pushstring(L, buf);
}

/* -- a Buffer over a tensor ------------------------------------------------ */

/* Raises "what: ..." unless tensor t suits a Buffer of ctx; returns its
   element type and count. */
static cg_type check_tensor(lua_State *L, cg_ctx *ctx, const DLTensor *t,
                            size_t *n, const char *what) {
  if (!t) luaL_error(L, "%s: null tensor", what);
  int dev = t->device.device_type;
  if (dev != kDLCUDA && dev != kDLCUDAManaged) {
    const char *name = device_name(dev);
    if (name)
      luaL_error(L, "%s: the tensor is in %s memory; a Buffer takes CUDA "
                 "device memory (kDLCUDA, kDLCUDAManaged)", what, name);
    luaL_error(L, "%s: unknown DLPack device type %d; a Buffer takes CUDA "
               "device memory (kDLCUDA, kDLCUDAManaged)", what, dev);
  }
  if (t->device.device_id != ctx->ordinal)
    luaL_error(L, "%s: the tensor is on CUDA device %d, the current device "
               "is %d (cuda.on(%d, fn) takes it there)", what,
               (int)t->device.device_id, ctx->ordinal,
               (int)t->device.device_id);
  if (t->dtype.lanes != 1)
    luaL_error(L, "%s: the tensor's elements are vectors of %d lanes of %s; "
               "a Buffer's have 1 lane", what, (int)t->dtype.lanes,
               dtype_name(L, t->dtype));
  int type = type_of(t->dtype);
  if (type < 0)
    luaL_error(L, "%s: the tensor's element type %s is none of a Buffer's "
               "(float16/32/64, bfloat16, int8..64, uint8..64)", what,
               dtype_name(L, t->dtype));
  if (t->ndim < 0)
    luaL_error(L, "%s: the tensor has %d dimensions", what, (int)t->ndim);
  if (t->ndim > 0 && !t->shape)
    luaL_error(L, "%s: the tensor has %d dimensions and no shape", what,
               (int)t->ndim);
  size_t es = cg_type_size[type];
  uint64_t count = 1, limit = (uint64_t)INT64_MAX / 8;
  if (SIZE_MAX / es < limit) limit = SIZE_MAX / es;
  for (int i = 0; i < t->ndim; i++) {
    int64_t d = t->shape[i];
    if (d < 0)
      luaL_error(L, "%s: dimension %d of the tensor has size %I", what, i,
                 (LUAI_UACINT)d);
    if (d && count > limit / (uint64_t)d)
      luaL_error(L, "%s: the tensor's shape %s overflows the byte size of "
                 "a Buffer", what, shape_text(L, t->ndim, t->shape));
    count *= (uint64_t)d;
  }
  if (count == 0)
    luaL_error(L, "%s: the tensor has no elements (shape %s)", what,
               shape_text(L, t->ndim, t->shape));
  if (t->strides) { /* row-major; a dimension of size 1 has any stride */
    int64_t want = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
      if (t->shape[i] != 1 && t->strides[i] != want)
        luaL_error(L, "%s: the tensor is not contiguous: dimension %d (of "
                   "%I) has stride %I, row-major order needs %I; make a "
                   "contiguous copy first", what, i,
                   (LUAI_UACINT)t->shape[i], (LUAI_UACINT)t->strides[i],
                   (LUAI_UACINT)want);
      want *= t->shape[i];
    }
  }
  if (!t->data) luaL_error(L, "%s: the tensor's data pointer is null", what);
  uintptr_t first = (uintptr_t)t->data + (uintptr_t)t->byte_offset;
  if (first % es)
    luaL_error(L, "%s: the first element, at %p (data + byte_offset %I), is "
               "not aligned for %s (%d bytes)", what, (void *)first,
               (LUAI_UACINT)t->byte_offset, cg_type_names[type], (int)es);
  *n = (size_t)count;
  return (cg_type)type;
}

static void check_version(lua_State *L, const DLManagedTensorVersioned *v,
                          const char *what) {
  if (!v) luaL_error(L, "%s: null tensor", what);
  if (v->version.major != 1)
    luaL_error(L, "%s: the tensor is of DLPack %d.%d; this runtime reads "
               "major version 1", what, (int)v->version.major,
               (int)v->version.minor);
  if (v->flags & DLPACK_FLAG_BITMASK_READ_ONLY)
    luaL_error(L, "%s: the tensor is read-only (DLPACK_FLAG_BITMASK_READ_"
               "ONLY), and kernels may write any Buffer", what);
}

/* The tensor h, checked, becomes the DLTensor d's at tidx (if it is not
   already) and the Buffer b's at the top of the stack, which is its view:
   no allocation, no error from here. */
static void adopt(lua_State *L, int tidx, cg_dltensor *d, cg_buffer *b,
                  uintptr_t h, cg_type type, size_t n) {
  const DLTensor *t = tensor_of(h);
  d->h.drv.dlpack = h;
  d->h.open = 1;
  lua_pushvalue(L, tidx);
  lua_setiuservalue(L, -2, 1);
  b->type = type;
  b->n = n;
  b->h.drv.mem = (CUdeviceptr)((uintptr_t)t->data + t->byte_offset);
  b->h.parent = &d->h;
  b->h.owned = 0;
  b->managed = t->device.device_type == kDLCUDAManaged;
  b->shaped = 1;
  b->ndim = t->ndim;
  b->shape = t->shape;
  d->h.views++;
  b->h.open = 1;
}

/* The sentinel's device record; opens the module if the script has not. */
static cg_ctx *context(lua_State *L) {
  if (!cg_sentinel(L)) {
    luaL_requiref(L, "cugraph.core", luaopen_cugraph_core, 0);
    lua_pop(L, 1);
  }
  return cg_context(L);
}

/* A DLTensor and a Buffer are made first, so the tensor becomes the
   state's only once nothing can fail (checks, memory): until then it stays
   the caller's. */
static void push(lua_State *L, uintptr_t h, const char *what) {
  cg_ctx *ctx = context(L);
  cg_dltensor *d = cg_newobj(L, ctx, sizeof *d, CG_DLTENSOR);
  int tidx = lua_gettop(L);
  cg_buffer *b = cg_newobj(L, ctx, sizeof *b, CG_BUFFER);
  size_t n;
  cg_type type = check_tensor(L, ctx, h ? tensor_of(h) : NULL, &n, what);
  adopt(L, tidx, d, b, h, type, n);
  lua_remove(L, tidx); /* the Buffer holds it */
}

void cugraph_pushdlpack(lua_State *L, DLManagedTensor *t) {
  push(L, (uintptr_t)t, "cugraph_pushdlpack");
}

void cugraph_pushdlpack_versioned(lua_State *L, DLManagedTensorVersioned *t) {
  check_version(L, t, "cugraph_pushdlpack_versioned");
  push(L, (uintptr_t)t + 1, "cugraph_pushdlpack_versioned");
}

/* Raises unless the DLTensor d is open and not consumed. */
static void check_unused(lua_State *L, cg_dltensor *d, const char *what) {
  if (d->taken)
    luaL_error(L, "%s: the cugraph.DLTensor was taken by C "
               "(cugraph_todlpack)", what);
  cg_check_open(L, &d->h);
  if (d->h.views)
    luaL_error(L, "%s: the cugraph.DLTensor was consumed by a Buffer "
               "(cuda.from_dlpack); a tensor is consumed once", what);
}

static int lend(lua_State *L); /* b:dlpack */

/* cuda.from_dlpack(t): a Buffer over the DLTensor t, which it consumes; a
   Buffer for t stands for t:dlpack(). */
static int from_dlpack(lua_State *L) {
  static const char what[] = "cuda.from_dlpack";
  if (cg_testobj(L, 1, CG_BUFFER)) {
    lua_settop(L, 1);
    lend(L);
    lua_replace(L, 1);
  }
  cg_dltensor *d = cg_testobj(L, 1, CG_DLTENSOR);
  if (!d)
    luaL_error(L, "%s: expected a cugraph.DLTensor (b:dlpack()), got %s",
               what, luaL_typename(L, 1));
  check_unused(L, d, what);
  lua_settop(L, 1);
  cg_ctx *ctx = cg_context(L);
  cg_buffer *b = cg_newobj(L, ctx, sizeof *b, CG_BUFFER);
  check_unused(L, d, what); /* the allocation may have run a finalizer */
  size_t n;
  cg_type type = check_tensor(L, ctx, tensor_of(d->h.drv.dlpack), &n, what);
  adopt(L, 1, d, b, d->h.drv.dlpack, type, n);
  return 1;
}

/* -- tensors over a Buffer's memory ---------------------------------------- */

/* What the runtime's tensors hold: the tensor first (its address is the
   record's), the share that keeps the memory (NULL: borrowed memory), the
   shape and strides. */
typedef struct lent {
  union { DLManagedTensor v0; DLManagedTensorVersioned v1; } t;
  cg_share *share;
  int64_t dims[];
} lent;

/* Any thread, before or after lua_close: the last holder frees. */
static void lent_free(lent *e) {
  cg_share_drop(e->share);
  free(e);
}
static void delete_v0(DLManagedTensor *self) { lent_free(self->manager_ctx); }
static void delete_v1(DLManagedTensorVersioned *self) {
  lent_free(self->manager_ctx);
}

/* Reads a shape table at idx into dims (positive sizes, product n). */
static int read_shape(lua_State *L, int idx, int64_t *dims, size_t n,
                      const char *what) {
  luaL_checktype(L, idx, LUA_TTABLE);
  lua_Unsigned len = lua_rawlen(L, idx);
  if (len == 0 || len > MAXDIMS)
    luaL_error(L, "%s: a shape has 1 to %d dimensions, got %I", what,
               MAXDIMS, (LUAI_UACINT)len);
  uint64_t count = 1;
  int over = 0;         /* the product passes 2^63 */
  for (int i = 0; i < (int)len; i++) {
    lua_rawgeti(L, idx, i + 1);
    int ok;
    lua_Integer d = lua_tointegerx(L, -1, &ok);
    lua_pop(L, 1);
    if (!ok || d <= 0)
      luaL_error(L, "%s: shape[%d] must be a positive integer", what, i + 1);
    dims[i] = d;
    if (count > (uint64_t)INT64_MAX / (uint64_t)d) over = 1;
    else count *= (uint64_t)d;
  }
  if (over || count != n)
    luaL_error(L, "%s: the shape %s holds %s elements, the buffer %I", what,
               shape_text(L, (int)len, dims),
               over ? "more than 2^63"
                    : lua_pushfstring(L, "%I", (LUAI_UACINT)count),
               (LUAI_UACINT)n);
  return (int)len;
}

/* A new tensor over the memory of the Buffer at idx, with the shape at
   sidx (0 or nil: the Buffer's own). */
static lent *make_lent(lua_State *L, int idx, int sidx, int versioned,
                       const char *what) {
  cg_buffer *b = cg_checkobj(L, idx, CG_BUFFER);
  if (cg_in_graphmem(&b->h))
    luaL_error(L, "%s: the buffer is memory a graph allocates, which a "
               "tensor cannot keep allocated; allocate it before the "
               "capture", what);
  if (b->h.scoped)
    luaL_error(L, "%s: the buffer is mapped only inside a GLResource's map "
               "scope, which a tensor would outlive", what);
  cg_obj *owner = &b->h;
  while (owner && !owner->owned) owner = owner->parent;
  if (owner && owner->kind == CG_MODULE)
    luaL_error(L, "%s: the buffer is a module global, which lives with its "
               "module's code (m:reload replaces it); copy it to a buffer",
               what);
  int64_t dims[2 * MAXDIMS];
  int ndim;
  size_t es = cg_type_size[b->type];
  if (sidx && !lua_isnoneornil(L, sidx)) {
    if (b->pitch)
      luaL_error(L, "%s: a pitched buffer has its own shape", what);
    ndim = read_shape(L, sidx, dims, b->n, what);
  } else if (b->shaped && b->ndim <= MAXDIMS) {
    ndim = b->ndim;
    for (int i = 0; i < ndim; i++) dims[i] = b->shape[i];
  } else if (b->pitch && b->pitch % es == 0) {
    ndim = b->depth > 1 ? 3 : 2;
    int64_t *p = dims, *s = dims + ndim;
    if (ndim == 3) *p++ = (int64_t)b->depth, *s++ = (int64_t)(b->height * b->pitch / es);
    *p++ = (int64_t)b->height, *s++ = (int64_t)(b->pitch / es);
    *p = (int64_t)b->width, *s = 1;
  } else if (b->pitch || b->shaped) {
    luaL_error(L, "%s: the buffer's shape cannot be told (give one)", what);
    return NULL;
  } else {
    ndim = 1;
    dims[0] = (int64_t)b->n;
  }
  if (!b->pitch) { /* row-major strides */
    int64_t st = 1;
    for (int i = ndim - 1; i >= 0; i--) {
      dims[ndim + i] = st;
      st *= dims[i];
    }
  }
  lent *e = malloc(sizeof *e + 2 * (size_t)ndim * sizeof *e->dims + 1);
  if (!e) luaL_error(L, "%s: out of host memory", what);
  memset(e, 0, sizeof *e);
  memcpy(e->dims, dims, 2 * (size_t)ndim * sizeof *dims);
  if (owner && !(e->share = cg_share_of(owner))) {
    free(e);
    luaL_error(L, "%s: out of host memory", what);
  }
  DLTensor *t = versioned ? &e->t.v1.dl_tensor : &e->t.v0.dl_tensor;
  t->data = (void *)(uintptr_t)b->h.drv.mem;
  t->device.device_type = b->managed ? kDLCUDAManaged : kDLCUDA;
  t->device.device_id = b->h.ctx->ordinal;
  t->ndim = ndim;
  t->dtype.code = dtypes[b->type].code;
  t->dtype.bits = dtypes[b->type].bits;
  t->dtype.lanes = 1;
  t->shape = e->dims;
  t->strides = e->dims + ndim;
  t->byte_offset = 0;
  if (versioned) {
    e->t.v1.version.major = DLPACK_MAJOR_VERSION;
    e->t.v1.version.minor = DLPACK_MINOR_VERSION;
    e->t.v1.manager_ctx = e;
    e->t.v1.deleter = delete_v1;
  } else {
    e->t.v0.manager_ctx = e;
    e->t.v0.deleter = delete_v0;
  }
  return e;
}

/* b:dlpack([shape]) -> a cugraph.DLTensor over b's memory */
static int lend(lua_State *L) {
  cg_buffer *b = cg_checkobj(L, 1, CG_BUFFER);
  lua_settop(L, 2);
  cg_dltensor *d = cg_newobj(L, b->h.ctx, sizeof *d, CG_DLTENSOR); /* 3 */
  lent *e = make_lent(L, 1, 2, 0, "b:dlpack");
  d->h.drv.dlpack = (uintptr_t)&e->t.v0;
  d->h.open = 1;
  return 1;
}

/* The tensor the DLTensor d holds, given away. */
static uintptr_t take(lua_State *L, cg_dltensor *d, const char *what) {
  check_unused(L, d, what);
  uintptr_t h = d->h.drv.dlpack;
  memset(&d->h.drv, 0, sizeof d->h.drv);
  d->h.open = 0;
  d->taken = 1;
  return h;
}

DLManagedTensor *cugraph_todlpack(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  cg_dltensor *d = cg_testobj(L, idx, CG_DLTENSOR);
  if (d) return (DLManagedTensor *)take(L, d, "cugraph_todlpack");
  return &make_lent(L, idx, 0, 0, "cugraph_todlpack")->t.v0;
}

DLManagedTensorVersioned *cugraph_todlpack_versioned(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (cg_testobj(L, idx, CG_DLTENSOR))
    luaL_error(L, "cugraph_todlpack_versioned: a cugraph.DLTensor holds an "
               "unversioned tensor (cugraph_todlpack takes it); pass the "
               "Buffer");
  return &make_lent(L, idx, 0, 1, "cugraph_todlpack_versioned")->t.v1;
}

/* -- the cugraph.DLTensor type --------------------------------------------- */

static cg_dltensor *check(lua_State *L) {
  cg_dltensor *d = cg_toobj(L, 1, CG_DLTENSOR);
  if (d->taken)
    luaL_error(L, "attempt to use a cugraph.DLTensor taken by C "
               "(cugraph_todlpack)");
  cg_check_open(L, &d->h);
  return d;
}

/* t:free(), t:close(), __close: calls the deleter, refused while a Buffer
   uses the tensor */
static int dltensor_free(lua_State *L) {
  cg_dltensor *d = cg_toobj(L, 1, CG_DLTENSOR);
  if (d->h.open && d->h.views)
    luaL_error(L, "cannot free a cugraph.DLTensor that a Buffer was made "
               "from (cuda.from_dlpack); free the Buffer");
  return cg_close(L, CG_DLTENSOR, 0);
}

static int dltensor_gc(lua_State *L) { return cg_close(L, CG_DLTENSOR, 1); }

/* t:shape() -> its sizes, outermost first */
static int dltensor_shape(lua_State *L) {
  const DLTensor *t = tensor_of(check(L)->h.drv.dlpack);
  luaL_checkstack(L, t->ndim, "too many dimensions");
  for (int i = 0; i < t->ndim; i++) lua_pushinteger(L, t->shape[i]);
  return t->ndim;
}

/* t:type() -> the element type ("f32", ...), or nil for one a Buffer
   cannot have */
static int dltensor_type(lua_State *L) {
  const DLTensor *t = tensor_of(check(L)->h.drv.dlpack);
  int type = t->dtype.lanes == 1 ? type_of(t->dtype) : -1;
  if (type < 0) return 0;
  lua_pushstring(L, cg_type_names[type]);
  return 1;
}

static int dltensor_tostring(lua_State *L) {
  cg_dltensor *d = cg_toobj(L, 1, CG_DLTENSOR);
  if (d->taken) {
    lua_pushliteral(L, "cugraph.DLTensor (taken by C)");
    return 1;
  }
  if (!d->h.open) return cg_tostring(L, &d->h, "");
  const DLTensor *t = tensor_of(d->h.drv.dlpack);
  int type = t->dtype.lanes == 1 ? type_of(t->dtype) : -1;
  return cg_tostring(L, &d->h, " %s[%s] (%p, device %d%s)",
                     type < 0 ? dtype_name(L, t->dtype) : cg_type_names[type],
                     shape_text(L, t->ndim, t->shape),
                     (void *)((uintptr_t)t->data + t->byte_offset),
                     (int)t->device.device_id,
                     d->h.views ? ", consumed" : "");
}

void dlpack_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"free", dltensor_free}, {"close", dltensor_free},
    {"shape", dltensor_shape}, {"type", dltensor_type}, {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", dltensor_gc}, {"__close", dltensor_free},
    {"__tostring", dltensor_tostring}, {NULL, NULL}
  };
  cg_newtype(L, CG_DLTENSOR, methods, meta, NULL);
  static const luaL_Reg bmethods[] = { {"dlpack", lend}, {NULL, NULL} };
  luaL_getmetatable(L, cg_kind_names[CG_BUFFER]);
  lua_getfield(L, -1, "methods");
  luaL_setfuncs(L, bmethods, 0);
  lua_pop(L, 2);
  lua_pushcfunction(L, from_dlpack);
  lua_setfield(L, -2, "from_dlpack");
}
