/* OpenGL interop, a stand-in: there is no GL here. Registering buffer
   object n (any name but 0) makes CUDA_DOUBLE_GL_BYTES bytes (default
   4096) of device memory, reachable by kernels only while mapped, and
   freed when it is unregistered or its context goes; an image is a CUDA
   array of CUDA_DOUBLE_GL_IMAGE texels. */
#include "double.h"
#include "queue.h"
#include "base/cudagl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct CUgraphicsResource_st {
  obj h;
  CUdeviceptr mem;      /* a buffer object's stand-in, or */
  CUarray image;        /* a GL image's: u8x4 texels */
  size_t bytes;
  int mapped;
};

static size_t gl_bytes(void) {
  const char *e = getenv("CUDA_DOUBLE_GL_BYTES");
  long long v = e ? atoll(e) : 0;
  return v > 0 ? (size_t)v : 4096;
}

static void set_gl_mapped(CUgraphicsResource res, int on) {
  dbl_map_gl_memory(res->mem, on);
  res->mapped = on;
}

void dbl_free_resource(CUgraphicsResource res) {
  if (res->mapped) set_gl_mapped(res, 0);
  dbl_free_gl_memory(res->mem); /* its image is an array of the context,
                                   freed with it or by the unregister */
  dbl_free_obj(res);
}

CUresult CUDAAPI cuGraphicsGLRegisterBuffer(CUgraphicsResource *res,
                                            unsigned int buffer,
                                            unsigned int flags) {
  ENTRY(cuGraphicsGLRegisterBuffer);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!res || !buffer || flags > CU_GRAPHICS_REGISTER_FLAGS_WRITE_DISCARD)
    return CUDA_ERROR_INVALID_VALUE;
  CUgraphicsResource g = dbl_new_obj(sizeof *g, O_RESOURCE);
  if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
  g->bytes = gl_bytes();
  if ((r = dbl_alloc_gl_memory(&g->mem, g->bytes))) {
    dbl_free_obj(g);
    return r;
  }
  memset((void *)(uintptr_t)g->mem, 0, g->bytes); /* a new GL buffer */
  *res = g;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphicsGLRegisterImage(CUgraphicsResource *res,
                                           unsigned int image,
                                           unsigned int target,
                                           unsigned int flags) {
  ENTRY(cuGraphicsGLRegisterImage);
  CUresult r = dbl_enter();
  if (r) return r;
  /* GL_TEXTURE_2D, GL_TEXTURE_RECTANGLE, GL_RENDERBUFFER */
  int known = target == 0x0DE1 || target == 0x84F5 || target == 0x8D41;
  unsigned valid = CU_GRAPHICS_REGISTER_FLAGS_READ_ONLY |
                   CU_GRAPHICS_REGISTER_FLAGS_WRITE_DISCARD |
                   CU_GRAPHICS_REGISTER_FLAGS_SURFACE_LDST |
                   CU_GRAPHICS_REGISTER_FLAGS_TEXTURE_GATHER;
  if (!res || !image || !known || (flags & ~valid) ||
      (flags & 3) == 3)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = dbl_unsafe_call())) return r;
  /* every image is CUDA_DOUBLE_GL_IMAGE ("WxH", 64x64) texels of RGBA8 */
  const char *e = getenv("CUDA_DOUBLE_GL_IMAGE");
  unsigned long w = 64, h = 64;
  if (e && sscanf(e, "%lux%lu", &w, &h) != 2) w = h = 64;
  CUDA_ARRAY3D_DESCRIPTOR d = {
    .Width = w, .Height = h, .Format = CU_AD_FORMAT_UNSIGNED_INT8,
    .NumChannels = 4,
    .Flags = flags & CU_GRAPHICS_REGISTER_FLAGS_SURFACE_LDST
             ? CUDA_ARRAY3D_SURFACE_LDST : 0 };
  CUgraphicsResource g = dbl_new_obj(sizeof *g, O_RESOURCE);
  if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
  if ((r = dbl_array_new(&g->image, &d))) {
    dbl_free_obj(g);
    return r;
  }
  *res = g;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphicsSubResourceGetMappedArray(CUarray *array,
                                                     CUgraphicsResource res,
                                                     unsigned int index,
                                                     unsigned int level) {
  ENTRY(cuGraphicsSubResourceGetMappedArray);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!array) return CUDA_ERROR_INVALID_VALUE;
  if (!res) return CUDA_ERROR_INVALID_HANDLE;
  if (!res->mapped) return CUDA_ERROR_NOT_MAPPED;
  if (!res->image) return CUDA_ERROR_NOT_MAPPED_AS_ARRAY;
  if (index || level) return CUDA_ERROR_INVALID_VALUE; /* one layer, level */
  *array = res->image;
  return CUDA_SUCCESS;
}

/* Work on the stream before the map or unmap is done by then: the
   software driver's streams run their work as it is issued. */
static CUresult map_all(unsigned count, CUgraphicsResource *res, int on) {
  if (!res) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < count; i++) {
    if (!res[i]) return CUDA_ERROR_INVALID_HANDLE;
    if (res[i]->mapped == on)
      return on ? CUDA_ERROR_ALREADY_MAPPED : CUDA_ERROR_NOT_MAPPED;
  }
  for (unsigned i = 0; i < count; i++) set_gl_mapped(res[i], on);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphicsMapResources(unsigned int count,
                                        CUgraphicsResource *res,
                                        CUstream stream) {
  ENTRY(cuGraphicsMapResources);
  CUresult r = dbl_enter();
  if (r) return r;
  if ((r = dbl_unsafe_call())) return r;
  if ((r = dbl_settle())) return r; /* stream-ordered: the work before it runs first */
  return map_all(count, res, 1);
}

CUresult CUDAAPI cuGraphicsUnmapResources(unsigned int count,
                                          CUgraphicsResource *res,
                                          CUstream stream) {
  ENTRY(cuGraphicsUnmapResources);
  CUresult r = dbl_enter();
  if (r) return r;
  if ((r = dbl_unsafe_call())) return r;
  if ((r = dbl_settle())) return r;
  return map_all(count, res, 0);
}

CUresult CUDAAPI cuGraphicsResourceGetMappedPointer(CUdeviceptr *p,
                                                    size_t *bytes,
                                                    CUgraphicsResource res) {
  ENTRY(cuGraphicsResourceGetMappedPointer);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!p || !bytes) return CUDA_ERROR_INVALID_VALUE;
  if (!res) return CUDA_ERROR_INVALID_HANDLE;
  if (!res->mapped) return CUDA_ERROR_NOT_MAPPED;
  if (res->image) return CUDA_ERROR_NOT_MAPPED_AS_POINTER;
  *p = res->mem;
  *bytes = res->bytes;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphicsUnregisterResource(CUgraphicsResource res) {
  ENTRY(cuGraphicsUnregisterResource);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!res) return CUDA_ERROR_INVALID_HANDLE;
  if ((r = dbl_unsafe_call())) return r;
  if ((r = dbl_settle())) return r;
  if (res->image) dbl_free_array(res->image);
  dbl_free_resource(res);
  return CUDA_SUCCESS;
}
