/* Work: kernel launches, copies, memsets and host functions, checked, then
   run at once or recorded by a capture (dbl_submit). */
#include "double.h"
#include "queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -- work: kernel launches, copies and memsets ----------------------------- */

/* Checks o's memory ranges and, unless dry, does it. A kernel's accesses are
   checked as it runs: their faults are sticky, not returned; a stop of its
   work is (CUDA_ERROR_TIMEOUT). */
CUresult dbl_run_op(const op *o, int dry) {
  if (!dry && dbl_strict) dbl_track_op(o); /* its accesses, for races */
  if (o->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC
      || o->type == CU_GRAPH_NODE_TYPE_MEM_FREE)
    return dry ? CUDA_SUCCESS : dbl_run_memory_node(o);
  if (o->type == CU_GRAPH_NODE_TYPE_KERNEL) {
    if (dry) return CUDA_SUCCESS;
    uint64_t t0 = o->id && dbl_activity_on() ? dbl_activity_now() : 0;
    CUresult r = dbl_run_kernel(o);
    if (t0) dbl_activity_kernel(o->id, t0, dbl_activity_now());
    return r;
  }
  if (o->type == CU_GRAPH_NODE_TYPE_HOST) {
    if (!dry) dbl_callback(o->fn, o->data);
    return CUDA_SUCCESS;
  }
  if (o->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD) {
    if (!dry) dbl_event_now(o->event);
    return CUDA_SUCCESS;
  }
  if (o->type == CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL
      || o->type == CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT)
    return dbl_run_semas(o, dry);
  if (o->type == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP)
    return dbl_run_memops(o, dry);
  if (o->type == CU_GRAPH_NODE_TYPE_MEMCPY && o->height) { /* a box */
    for (size_t z = 0; z < o->depth; z++)
      for (size_t y = 0; y < o->height; y++) {
        size_t doff = z * o->dslice + y * o->dpitch;
        size_t soff = z * o->sslice + y * o->spitch;
        unsigned char *d = o->hdst ? (unsigned char *)o->hdst + doff
                         : dbl_dev_range(o->dst + doff, o->bytes);
        const unsigned char *sp = o->hsrc
                         ? (const unsigned char *)o->hsrc + soff
                         : dbl_dev_range(o->src + soff, o->bytes);
        if (!d || !sp) return CUDA_ERROR_INVALID_VALUE;
        if (!dry) memmove(d, sp, o->bytes);
      }
    return CUDA_SUCCESS;
  }
  if (o->type == CU_GRAPH_NODE_TYPE_MEMCPY) {
    void *d = o->hdst ? o->hdst : dbl_dev_range(o->dst, o->bytes);
    const void *s = o->hsrc ? o->hsrc : dbl_dev_range(o->src, o->bytes);
    if (!d || !s) return CUDA_ERROR_INVALID_VALUE;
    if (!dry) memmove(d, s, o->bytes);
    return CUDA_SUCCESS;
  }
  for (size_t r = 0; r < o->height; r++) {
    unsigned char *d = dbl_dev_range(o->dst + r * o->pitch, o->width * o->elem);
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; !dry && i < o->width; i++)
      memcpy(d + i * o->elem, &o->value, o->elem); /* little-endian host */
  }
  return CUDA_SUCCESS;
}

size_t dbl_op_bytes(const op *o) {
  if (o->type == CU_GRAPH_NODE_TYPE_KERNEL) return o->f->argbytes;
  if (o->type == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP)
    return o->nsems * sizeof(CUstreamBatchMemOpParams);
  return dbl_semas_bytes(o);
}

int dbl_copy_op(op *dst, const op *src) {
  *dst = *src;
  size_t n = dbl_op_bytes(src);
  if (!n) return 0;
  if (!(dst->args = malloc(n))) return 1;
  memcpy(dst->args, src->args, n);
  return 0;
}

/* A copy; a NULL host pointer stands for device memory, so a NULL host
   side fails the range check. A copy of nothing is no work. */
static CUresult memcpy_op(CUdeviceptr dst, void *hdst, CUdeviceptr src,
                          const void *hsrc, size_t n, CUstream s) {
  CUresult r = dbl_enter();
  if (r) return r;
  if (!n) return dbl_stream_usable(dbl_stream_of(s));
  op o = {.type = CU_GRAPH_NODE_TYPE_MEMCPY, .dst = dst, .hdst = hdst,
          .src = src, .hsrc = hsrc, .bytes = n};
  return dbl_submit(dbl_stream_of(s), &o);
}

CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void *srcHost,
                                   size_t ByteCount, CUstream hStream) {
  ENTRY(cuMemcpyHtoDAsync);
  return memcpy_op(dstDevice, NULL, 0, srcHost, ByteCount, hStream);
}

CUresult CUDAAPI cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr srcDevice,
                                   size_t ByteCount, CUstream hStream) {
  ENTRY(cuMemcpyDtoHAsync);
  return memcpy_op(0, dstHost, srcDevice, NULL, ByteCount, hStream);
}

CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                   size_t ByteCount, CUstream hStream) {
  ENTRY(cuMemcpyDtoDAsync);
  return memcpy_op(dstDevice, NULL, srcDevice, NULL, ByteCount, hStream);
}

/* Boxes between host memory, device memory and arrays; a host side is
   taken as given, a device side must lie in one allocation row by row, an
   array side inside the array (it is device memory, laid out densely). */
CUresult CUDAAPI cuMemcpy3DAsync(const CUDA_MEMCPY3D *pin, CUstream hStream) {
  ENTRY(cuMemcpy3DAsync);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!pin) return CUDA_ERROR_INVALID_VALUE;
  CUDA_MEMCPY3D q = *pin, *p = &q;
  if ((r = dbl_array_side(p, &p->srcMemoryType, p->srcArray, p->srcXInBytes,
                          p->srcY, p->srcZ, &p->srcDevice, &p->srcPitch,
                          &p->srcHeight)) ||
      (r = dbl_array_side(p, &p->dstMemoryType, p->dstArray, p->dstXInBytes,
                          p->dstY, p->dstZ, &p->dstDevice, &p->dstPitch,
                          &p->dstHeight)))
    return r;
  if (p->srcLOD || p->dstLOD || !p->WidthInBytes || !p->Height ||
      !p->Depth || p->srcPitch < p->srcXInBytes + p->WidthInBytes ||
      p->dstPitch < p->dstXInBytes + p->WidthInBytes ||
      (p->Depth > 1 && (p->srcHeight < p->srcY + p->Height ||
                        p->dstHeight < p->dstY + p->Height)))
    return CUDA_ERROR_INVALID_VALUE;
  int sh = p->srcMemoryType == CU_MEMORYTYPE_HOST;
  int dh = p->dstMemoryType == CU_MEMORYTYPE_HOST;
  if ((!sh && p->srcMemoryType != CU_MEMORYTYPE_DEVICE) ||
      (!dh && p->dstMemoryType != CU_MEMORYTYPE_DEVICE))
    return CUDA_ERROR_NOT_SUPPORTED;
  size_t sstart = (p->srcZ * p->srcHeight + p->srcY) * p->srcPitch +
                  p->srcXInBytes;
  size_t dstart = (p->dstZ * p->dstHeight + p->dstY) * p->dstPitch +
                  p->dstXInBytes;
  op o = {.type = CU_GRAPH_NODE_TYPE_MEMCPY, .bytes = p->WidthInBytes,
          .height = p->Height, .depth = p->Depth, .dpitch = p->dstPitch,
          .spitch = p->srcPitch, .dslice = p->dstPitch * p->dstHeight,
          .sslice = p->srcPitch * p->srcHeight};
  if (sh) o.hsrc = (const unsigned char *)p->srcHost + sstart;
  else o.src = p->srcDevice + sstart;
  if (dh) o.hdst = (unsigned char *)p->dstHost + dstart;
  else o.dst = p->dstDevice + dstart;
  return dbl_submit(dbl_stream_of(hStream), &o);
}

/* Each pointer must lie in memory of its context's device; no peer access
   is needed. */
CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext,
                                   CUdeviceptr srcDevice, CUcontext srcContext,
                                   size_t ByteCount, CUstream hStream) {
  ENTRY(cuMemcpyPeerAsync);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!dbl_is_primary(dstContext) || !dbl_is_primary(srcContext) ||
      !dstContext->refs || !srcContext->refs)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (ByteCount && (dbl_dev_of(dstDevice, ByteCount) != dstContext->dev ||
                    dbl_dev_of(srcDevice, ByteCount) != srcContext->dev))
    return CUDA_ERROR_INVALID_VALUE;
  CUstream s = dbl_stream_of(hStream);
  if (s && s->cap) { /* as the driver: not capturable, and the capture fails */
    s->cap->invalid = 1;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return memcpy_op(dstDevice, NULL, srcDevice, NULL, ByteCount, hStream);
}

/* -- host functions -------------------------------------------------------- */

/* fn(userData) runs in stream order: at once here, once the work sent
   before it is over when that still runs (CUDA_DOUBLE_BUSY: on the thread
   of user objects' destructors, dbl_host_later), or as a host node of the
   graph a capture records; as on the driver's own thread, it may make no
   CUDA call (dbl_callback). */
CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn,
                                  void *userData) {
  ENTRY(cuLaunchHostFunc);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  op o = {.type = CU_GRAPH_NODE_TYPE_HOST, .fn = fn, .data = userData};
  return dbl_submit(dbl_stream_of(hStream), &o);
}

static CUresult memset_op(CUdeviceptr dst, size_t pitch, unsigned value,
                          unsigned elem, size_t width, size_t height,
                          CUstream s) {
  CUresult r = dbl_enter();
  if (r) return r;
  if (!width || !height) return dbl_stream_usable(dbl_stream_of(s));
  if (dst % elem || (height > 1 && pitch < width * elem))
    return CUDA_ERROR_INVALID_VALUE;
  op o = {.type = CU_GRAPH_NODE_TYPE_MEMSET, .dst = dst, .pitch = pitch,
          .width = width, .height = height, .value = value, .elem = elem};
  return dbl_submit(dbl_stream_of(s), &o);
}

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc,
                                 size_t N, CUstream hStream) {
  ENTRY(cuMemsetD8Async);
  return memset_op(dstDevice, 0, uc, 1, N, 1, hStream);
}

CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us,
                                  size_t N, CUstream hStream) {
  ENTRY(cuMemsetD16Async);
  return memset_op(dstDevice, 0, us, 2, N, 1, hStream);
}

CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui,
                                  size_t N, CUstream hStream) {
  ENTRY(cuMemsetD32Async);
  return memset_op(dstDevice, 0, ui, 4, N, 1, hStream);
}

CUresult CUDAAPI cuMemsetD2D32Async(CUdeviceptr dstDevice, size_t dstPitch,
                                    unsigned int ui, size_t Width,
                                    size_t Height, CUstream hStream) {
  ENTRY(cuMemsetD2D32Async);
  return memset_op(dstDevice, dstPitch, ui, 4, Width, Height, hStream);
}

/* Checks a launch and copies its parameters into o->args (the caller may
   reuse its own storage at once). */
CUresult dbl_prepare_launch(op *o, void **params, void **extra) {
  const CUfunction f = o->f;
  for (int i = 0; i < 3; i++)
    if (!o->grid[i] || o->grid[i] > dbl_max_grid[i] || !o->block[i]
        || o->block[i] > dbl_max_block[i])
      return CUDA_ERROR_INVALID_VALUE;
  if ((uint64_t)o->block[0] * o->block[1] * o->block[2] > MAX_THREADS
      || o->shared > (unsigned)f->max_dynamic)
    return CUDA_ERROR_INVALID_VALUE;
#ifdef CUDA_SIM
  if (extra || !f->sim) return CUDA_ERROR_NOT_SUPPORTED;
#else
  if (!f->impl) /* the double runs only the kernels it has */
    snprintf(dbl_refusal, sizeof dbl_refusal, "operation not supported: "
             "the test double runs only the specs' kernels (%.80s is not "
             "one); use CUGRAPH_LUA_LIBCUDA=sim", f->name);
  if (extra || !f->impl) /* and reads only kernelParams */
    return CUDA_ERROR_NOT_SUPPORTED;
#endif
  if (f->nparams && !params) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < f->nparams; i++)
    if (!params[i]) return CUDA_ERROR_INVALID_VALUE;
  if (f->argbytes && !(o->args = malloc(f->argbytes)))
    return CUDA_ERROR_OUT_OF_MEMORY;
  for (size_t i = 0; i < f->nparams; i++)
    memcpy(o->args + f->off[i], params[i], f->size[i]);
  return CUDA_SUCCESS;
}

/* A launch that fails its checks also breaks the capture it was sent to.
   prog: with programmatic stream serialization. */
static CUresult launch(CUfunction f, const unsigned grid[3],
                       const unsigned block[3], unsigned sharedMemBytes,
                       CUstream hStream, void **kernelParams, void **extra,
                       int prog) {
  unsigned gridDimX = grid[0], gridDimY = grid[1], gridDimZ = grid[2];
  unsigned blockDimX = block[0], blockDimY = block[1], blockDimZ = block[2];
  CUresult r;
  CUstream s = dbl_stream_of(hStream);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if ((r = dbl_stream_usable(s))) return r;
  op o = {.type = CU_GRAPH_NODE_TYPE_KERNEL, .f = f,
          .grid = {gridDimX, gridDimY, gridDimZ},
          .block = {blockDimX, blockDimY, blockDimZ},
          .shared = sharedMemBytes, .prog = (unsigned char)(prog != 0)};
  if ((r = dbl_prepare_launch(&o, kernelParams, extra))) {
    if (s && s->cap) s->cap->invalid = 1;
    return r;
  }
  return dbl_submit(s, &o);
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX,
                                unsigned int gridDimY, unsigned int gridDimZ,
                                unsigned int blockDimX, unsigned int blockDimY,
                                unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream,
                                void **kernelParams, void **extra) {
  ENTRY(cuLaunchKernel);
  CUresult r = dbl_enter();
  if (r) return r;
  unsigned grid[3] = {gridDimX, gridDimY, gridDimZ};
  unsigned block[3] = {blockDimX, blockDimY, blockDimZ};
  return launch(f, grid, block, sharedMemBytes, hStream, kernelParams, extra,
                0);
}

/* The attributes the runtime sets: a cooperative grid must be resident at
   once, a grid a whole number of clusters of at most 8 blocks; priority
   changes nothing here, nor programmatic serialization eagerly (work runs
   in order, at once); a capture makes the launch's edges programmatic. */
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
                                  void **kernelParams, void **extra) {
  ENTRY(cuLaunchKernelEx);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!config || (config->numAttrs && !config->attrs))
    return CUDA_ERROR_INVALID_VALUE;
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  unsigned grid[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
  unsigned block[3] = {config->blockDimX, config->blockDimY,
                       config->blockDimZ};
  int prog = 0;
  for (unsigned i = 0; i < config->numAttrs; i++) {
    const CUlaunchAttribute *a = &config->attrs[i];
    switch (a->id) {
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
      if (a->value.cooperative &&
          (uint64_t)grid[0] * grid[1] * grid[2] >
          (uint64_t)dbl_occupancy(f, block[0] * block[1] * block[2],
                                  config->sharedMemBytes) * DBL_SMS)
        return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
      break;
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: {
      unsigned c[3] = {a->value.clusterDim.x, a->value.clusterDim.y,
                       a->value.clusterDim.z};
      if (!c[0] || !c[1] || !c[2] || c[0] * c[1] * c[2] > 8)
        return CUDA_ERROR_INVALID_CLUSTER_SIZE;
      for (int d = 0; d < 3; d++)
        if (grid[d] % c[d]) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
      break;
    }
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
      break;
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
      prog = a->value.programmaticStreamSerializationAllowed != 0;
      break;
    default:
      return CUDA_ERROR_NOT_SUPPORTED;
    }
  }
  return launch(f, grid, block, config->sharedMemBytes, config->hStream,
                kernelParams, extra, prog);
}

/* The synchronous forms an embedding host may call itself: work of the
   legacy stream, done when they return (strict mode: the legacy stream's
   work, and so the blocking streams' before it, runs). */
static CUresult synchronous(CUresult r) {
  return !r && dbl_strict ? dbl_wait_stream(NULL) : r;
}

CUresult CUDAAPI cuMemsetD32(CUdeviceptr dstDevice, unsigned int ui,
                             size_t N) {
  ENTRY(cuMemsetD32);
  return synchronous(memset_op(dstDevice, 0, ui, 4, N, 1, NULL));
}

CUresult CUDAAPI cuMemcpyDtoH(void *dstHost, CUdeviceptr srcDevice,
                              size_t ByteCount) {
  ENTRY(cuMemcpyDtoH);
  return synchronous(memcpy_op(0, dstHost, srcDevice, NULL, ByteCount, NULL));
}
