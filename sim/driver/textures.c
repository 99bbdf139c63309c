/* Texture and surface objects over arrays, and what the host twins of
   kernels read and write through them: 2-D fetches with the texture
   unit's point and linear filtering (weights of 8 fractional bits, as the
   hardware keeps them), the four address modes, normalized coordinates
   and normalized reads of 8- and 16-bit integers; surface loads and stores
   of whole texels, out of bounds a fault (the trap mode). */
#include "double.h"
#include "queue.h"
#include "halfconv.h"

#include <math.h>
#include <stdlib.h>

enum { TEX_MAGIC = 0x7e47e4, SURF_MAGIC = 0x5a4f5a };

struct dbl_sampler {
  obj h;
  int magic;
  CUarray array;
  CUDA_TEXTURE_DESC td;
};

static CUresult array_resource(const CUDA_RESOURCE_DESC *r, CUarray *a) {
  if (!r || r->resType != CU_RESOURCE_TYPE_ARRAY || !r->res.array.hArray)
    return CUDA_ERROR_INVALID_VALUE;
  *a = r->res.array.hArray;
  return CUDA_SUCCESS;
}

static CUresult new_sampler(unsigned long long *out, CUarray a, int magic,
                            const CUDA_TEXTURE_DESC *td) {
  struct dbl_sampler *s = dbl_new_obj(sizeof *s, O_SAMPLER);
  if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
  s->magic = magic;
  s->array = a;
  if (td) s->td = *td;
  *out = (unsigned long long)(uintptr_t)s;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuTexObjectCreate(CUtexObject *pTexObject,
                                   const CUDA_RESOURCE_DESC *pResDesc,
                                   const CUDA_TEXTURE_DESC *pTexDesc,
                                   const CUDA_RESOURCE_VIEW_DESC *pResViewDesc) {
  ENTRY(cuTexObjectCreate);
  CUresult r = dbl_enter();
  if (r) return r;
  CUarray a;
  if (!pTexObject || !pTexDesc || pResViewDesc || (r = array_resource(pResDesc, &a)))
    return r ? r : CUDA_ERROR_INVALID_VALUE;
  CUarray_format f = a->desc.Format;
  int is_float = f == CU_AD_FORMAT_FLOAT || f == CU_AD_FORMAT_HALF;
  int as_int = (pTexDesc->flags & CU_TRSF_READ_AS_INTEGER) != 0;
  /* linear filtering needs float results */
  if (pTexDesc->filterMode == CU_TR_FILTER_MODE_LINEAR && !is_float &&
      (as_int || f == CU_AD_FORMAT_UNSIGNED_INT32 || f == CU_AD_FORMAT_SIGNED_INT32))
    return CUDA_ERROR_INVALID_VALUE;
  return new_sampler(pTexObject, a, TEX_MAGIC, pTexDesc);
}

CUresult CUDAAPI cuSurfObjectCreate(CUsurfObject *pSurfObject,
                                    const CUDA_RESOURCE_DESC *pResDesc) {
  ENTRY(cuSurfObjectCreate);
  CUresult r = dbl_enter();
  if (r) return r;
  CUarray a;
  if (!pSurfObject || (r = array_resource(pResDesc, &a)))
    return r ? r : CUDA_ERROR_INVALID_VALUE;
  if (!(a->desc.Flags & CUDA_ARRAY3D_SURFACE_LDST)) return CUDA_ERROR_INVALID_VALUE;
  return new_sampler(pSurfObject, a, SURF_MAGIC, NULL);
}

static struct dbl_sampler *sampler_of(unsigned long long h, int magic) {
  struct dbl_sampler *s = (struct dbl_sampler *)(uintptr_t)h;
  return s && s->magic == magic ? s : NULL;
}

void dbl_free_sampler(void *p) {
  ((struct dbl_sampler *)p)->magic = 0;
  dbl_free_obj(p);
}

static CUresult destroy(unsigned long long h, int magic) {
  CUresult r = dbl_enter();
  if (r) return r;
  struct dbl_sampler *s = sampler_of(h, magic);
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  if ((r = dbl_settle())) return r; /* the work still to run that uses it runs first */
  dbl_free_sampler(s);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuTexObjectDestroy(CUtexObject texObject) {
  ENTRY(cuTexObjectDestroy);
  return destroy(texObject, TEX_MAGIC);
}

CUresult CUDAAPI cuSurfObjectDestroy(CUsurfObject surfObject) {
  ENTRY(cuSurfObjectDestroy);
  return destroy(surfObject, SURF_MAGIC);
}

/* -- what kernels read and write ------------------------------------------ */

/* Channel k of the texel at p, as a float: normalized when asked. */
static float channel(const unsigned char *p, CUarray_format f, int k, int norm) {
  switch (f) {
  case CU_AD_FORMAT_FLOAT: { float v; memcpy(&v, p + 4 * k, 4); return v; }
  case CU_AD_FORMAT_HALF: { uint16_t v; memcpy(&v, p + 2 * k, 2); return half_to_float(v, 0); }
  case CU_AD_FORMAT_UNSIGNED_INT8: return p[k] / (norm ? 255.0f : 1.0f);
  case CU_AD_FORMAT_SIGNED_INT8: {
    float v = (signed char)p[k];
    return norm ? fmaxf(v / 127.0f, -1.0f) : v;
  }
  case CU_AD_FORMAT_UNSIGNED_INT16: { uint16_t v; memcpy(&v, p + 2 * k, 2); return v / (norm ? 65535.0f : 1.0f); }
  case CU_AD_FORMAT_SIGNED_INT16: {
    int16_t v; memcpy(&v, p + 2 * k, 2);
    return norm ? fmaxf(v / 32767.0f, -1.0f) : (float)v;
  }
  case CU_AD_FORMAT_UNSIGNED_INT32: { uint32_t v; memcpy(&v, p + 4 * k, 4); return (float)v; }
  case CU_AD_FORMAT_SIGNED_INT32: { int32_t v; memcpy(&v, p + 4 * k, 4); return (float)v; }
  default: return 0;
  }
}

/* Index i of n texels under address mode m; -1: the border. */
static long address(long i, long n, CUaddress_mode m) {
  switch (m) {
  case CU_TR_ADDRESS_MODE_WRAP: return ((i % n) + n) % n;
  case CU_TR_ADDRESS_MODE_MIRROR: {
    long p = ((i % (2 * n)) + 2 * n) % (2 * n);
    return p < n ? p : 2 * n - 1 - p;
  }
  case CU_TR_ADDRESS_MODE_BORDER: return i < 0 || i >= n ? -1 : i;
  default: return i < 0 ? 0 : i >= n ? n - 1 : i;
  }
}

static void texel(const struct dbl_sampler *s, long x, long y, float out[4]) {
  const struct CUarray_st *a = s->array;
  long w = (long)a->desc.Width, h = (long)(a->desc.Height ? a->desc.Height : 1);
  long ix = address(x, w, s->td.addressMode[0]), iy = address(y, h, s->td.addressMode[1]);
  int norm = !(s->td.flags & CU_TRSF_READ_AS_INTEGER);
  for (int k = 0; k < 4; k++) out[k] = 0;
  if (ix < 0 || iy < 0) {
    for (int k = 0; k < 4; k++) out[k] = s->td.borderColor[k];
    return;
  }
  const unsigned char *p = dbl_dev_range(a->mem + (size_t)iy * a->pitch +
                                         (size_t)ix * a->texel, a->texel);
  if (!p) return;
  for (unsigned k = 0; k < a->desc.NumChannels; k++)
    out[k] = channel(p, a->desc.Format, (int)k, norm);
}

/* The fetch at (x, y) of a live texture object s. */
static void fetch2d(const struct dbl_sampler *s, float x, float y, float out[4]) {
  const struct CUarray_st *a = s->array;
  if (s->td.flags & CU_TRSF_NORMALIZED_COORDINATES) {
    x *= (float)a->desc.Width;
    y *= (float)(a->desc.Height ? a->desc.Height : 1);
  }
  if (s->td.filterMode != CU_TR_FILTER_MODE_LINEAR) {
    texel(s, (long)floorf(x), (long)floorf(y), out);
    return;
  }
  float xb = x - 0.5f, yb = y - 0.5f;
  long i = (long)floorf(xb), j = (long)floorf(yb);
  /* the hardware's weights: 9-bit fixed point, 8 bits of fraction */
  float a0 = roundf((xb - (float)i) * 256.0f) / 256.0f;
  float b0 = roundf((yb - (float)j) * 256.0f) / 256.0f;
  float t00[4], t10[4], t01[4], t11[4];
  texel(s, i, j, t00), texel(s, i + 1, j, t10);
  texel(s, i, j + 1, t01), texel(s, i + 1, j + 1, t11);
  for (int k = 0; k < 4; k++)
    out[k] = (1 - a0) * (1 - b0) * t00[k] + a0 * (1 - b0) * t10[k] +
             (1 - a0) * b0 * t01[k] + a0 * b0 * t11[k];
}

int dbl_tex_fetch(void *ud, uint64_t handle, int dims, const float c[3],
                  float out[4]) {
  (void)ud;
  const struct dbl_sampler *s = sampler_of(handle, TEX_MAGIC);
  if (!s || dims > 2) return CUDA_ERROR_ILLEGAL_ADDRESS;
  fetch2d(s, c[0], dims > 1 ? c[1] : 0.5f, out);
  return 0;
}

int dbl_surf_access(void *ud, uint64_t handle, int dims, int64_t x, int64_t y,
                    int64_t z, void *v, size_t n, int store, int mode) {
  (void)ud;
  const struct dbl_sampler *s = sampler_of(handle, SURF_MAGIC);
  if (!s) return CUDA_ERROR_ILLEGAL_ADDRESS;
  const struct CUarray_st *a = s->array;
  int64_t h = (int64_t)a->rows, d = (int64_t)a->slices, w = (int64_t)a->pitch;
  if (dims < 2) y = 0;
  if (dims < 3) z = 0;
  int out = x < 0 || y < 0 || z < 0 || y >= h || z >= d || x + (int64_t)n > w;
  if (out && mode == 0) return CUDA_ERROR_ILLEGAL_ADDRESS;
  if (out && mode == 2) {
    if (!store) memset(v, 0, n);
    return 0;
  }
  if (out) { /* clamp to the nearest texel */
    x = x < 0 ? 0 : x + (int64_t)n > w ? w - (int64_t)n : x;
    y = y < 0 ? 0 : y >= h ? h - 1 : y;
    z = z < 0 ? 0 : z >= d ? d - 1 : z;
  }
  if ((uint64_t)x % n) return CUDA_ERROR_MISALIGNED_ADDRESS;
  unsigned char *p = dbl_dev_range(a->mem + ((size_t)z * a->rows + (size_t)y) *
                                   a->pitch + (size_t)x, n);
  if (!p) return CUDA_ERROR_ILLEGAL_ADDRESS;
  if (store) memcpy(p, v, n);
  else memcpy(v, p, n);
  return 0;
}

int dbl_tex2d(dbl_kctx *c, unsigned long long tex, float x, float y, float out[4]) {
  const float xy[3] = { x, y, 0 };
  CUresult r = (CUresult)dbl_tex_fetch(NULL, tex, 2, xy, out);
  if (r) c->fault = r;
  return !r;
}

int dbl_surf2d_store(dbl_kctx *c, unsigned long long surf, long xbytes, long y,
                     const void *v, size_t n) {
  CUresult r = (CUresult)dbl_surf_access(NULL, surf, 2, xbytes, y, 0,
                                         (void *)(uintptr_t)v, n, 1, 0);
  if (r) c->fault = r;
  return !r;
}
