/* CUDA arrays: texels in device memory laid out row by row (the driver's
   own layout is opaque; copies are the only way in or out), 1-D, 2-D and
   3-D, with the formats and channel counts of cuArray3DCreate; the levels
   of mipmapped arrays (external.c) are arrays too. */
#include "double.h"
#include "queue.h"

#include <stdlib.h>

/* Bytes of one element of format f, or 0 for a format not stood in for. */
static size_t format_bytes(CUarray_format f) {
  switch (f) {
  case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
  case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16:
  case CU_AD_FORMAT_HALF: return 2;
  case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32:
  case CU_AD_FORMAT_FLOAT: return 4;
  default: return 0;
  }
}

static int attr_limit(CUdevice_attribute a) { return dbl_attribute(a); }

/* Whether the extents fit the device's limits for their dimensions. */
static int within_limits(const CUDA_ARRAY3D_DESCRIPTOR *d) {
  int surf = (d->Flags & CUDA_ARRAY3D_SURFACE_LDST) != 0;
  if (d->Depth)
    return d->Width <= (size_t)attr_limit(surf ? CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH
                                               : CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH) &&
           d->Height <= (size_t)attr_limit(surf ? CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT
                                                : CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT) &&
           d->Depth <= (size_t)attr_limit(surf ? CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH
                                               : CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH);
  if (d->Height)
    return d->Width <= (size_t)attr_limit(surf ? CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH
                                               : CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH) &&
           d->Height <= (size_t)attr_limit(surf ? CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT
                                                : CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT);
  return d->Width <= (size_t)attr_limit(surf ? CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH
                                             : CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH);
}

CUresult dbl_array_layout(CUarray a, const CUDA_ARRAY3D_DESCRIPTOR *d,
                          unsigned flags) {
  size_t es = format_bytes(d->Format);
  unsigned c = d->NumChannels;
  if (!es || (c != 1 && c != 2 && c != 4) || !d->Width ||
      (d->Depth && !d->Height) || (d->Flags & ~flags) || !within_limits(d))
    return CUDA_ERROR_INVALID_VALUE;
  a->desc = *d;
  a->texel = es * c;
  a->pitch = a->texel * d->Width;
  a->rows = d->Height ? d->Height : 1;
  a->slices = d->Depth ? d->Depth : 1;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuArray3DCreate(CUarray *pHandle,
                                 const CUDA_ARRAY3D_DESCRIPTOR *d) {
  ENTRY(cuArray3DCreate);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!pHandle || !d) return CUDA_ERROR_INVALID_VALUE;
  struct CUarray_st layout = {.mem = 0};
  if ((r = dbl_array_layout(&layout, d, CUDA_ARRAY3D_SURFACE_LDST))) return r;
  if ((r = dbl_unsafe_call())) return r;
  return dbl_array_new(pHandle, d);
}

CUresult dbl_array_new(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d) {
  CUresult r;
  struct CUarray_st layout = {.mem = 0};
  if ((r = dbl_array_layout(&layout, d, CUDA_ARRAY3D_SURFACE_LDST))) return r;
  CUarray a = dbl_new_obj(sizeof *a, O_ARRAY);
  if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
  layout.h = a->h;
  *a = layout;
  a->mipmap = NULL;
  if ((r = dbl_alloc_array_memory(&a->mem, a->pitch * a->rows * a->slices))) {
    dbl_free_obj(a);
    return r;
  }
  *pHandle = a;
  return CUDA_SUCCESS;
}

void dbl_free_array(CUarray a) {
  dbl_free_array_memory(a->mem);
  dbl_free_obj(a);
}

CUresult CUDAAPI cuArrayDestroy(CUarray hArray) {
  ENTRY(cuArrayDestroy);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!hArray) return CUDA_ERROR_INVALID_HANDLE;
  if (hArray->mipmap) return CUDA_ERROR_INVALID_VALUE; /* its array's */
  if ((r = dbl_unsafe_call())) return r;
  if ((r = dbl_settle())) return r; /* the work still to run that uses it runs first */
  dbl_free_array(hArray);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuArray3DGetDescriptor(CUDA_ARRAY3D_DESCRIPTOR *d,
                                        CUarray hArray) {
  ENTRY(cuArray3DGetDescriptor);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  if (!hArray) return CUDA_ERROR_INVALID_HANDLE;
  *d = hArray->desc;
  return CUDA_SUCCESS;
}

CUresult dbl_array_side(const CUDA_MEMCPY3D *p, CUmemorytype *mt, CUarray a,
                        size_t x, size_t y, size_t z, CUdeviceptr *base,
                        size_t *pitch, size_t *rows) {
  if (*mt != CU_MEMORYTYPE_ARRAY) return CUDA_SUCCESS;
  if (!a) return CUDA_ERROR_INVALID_HANDLE;
  size_t w = p->WidthInBytes, h = p->Height, d = p->Depth;
  if (x % a->texel || w % a->texel || x > a->pitch || w > a->pitch - x ||
      y > a->rows || h > a->rows - y || z > a->slices || d > a->slices - z)
    return CUDA_ERROR_INVALID_VALUE;
  *mt = CU_MEMORYTYPE_DEVICE;
  *base = a->mem;
  *pitch = a->pitch;
  *rows = a->rows;
  return CUDA_SUCCESS;
}
