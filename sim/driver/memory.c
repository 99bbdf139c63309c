/* Device memory: allocations are host memory, plain, stream-ordered
   (the default pool) or graph memory (mapped while its allocation node's
   graph holds it); page-locked host memory; pool and graph memory
   attributes; the memory of OpenGL buffers' stand-ins (gl.c); the
   mappings of imported external memory (external.c maps them). */
#include "double.h"
#include "queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALLOC_ALIGN 256      /* cuMemAlloc's alignment */

/* -- device memory --------------------------------------------------------- */

static size_t mem_used[MAX_DEVICES]; /* sum of its live allocation sizes,
                                        <= dbl_mem_limit */

/* Live allocations, sorted by base and disjoint. A device pointer is the
   host address of the allocation. */
typedef struct span {
  uintptr_t base;
  size_t size;
  int kind;             /* SPAN_PLAIN, SPAN_POOL (cuMemAllocAsync),
                           SPAN_GRAPH (an allocation node's memory) or
                           SPAN_GL (a registered GL buffer's) or
                           SPAN_MODULE (a module variable's: the module
                           owns the memory) or SPAN_ARRAY (a CUDA
                           array's texels: no cuMemFree frees it) or
                           SPAN_EXT_BUFFER (a buffer mapped onto external
                           memory: cuMemFree unmaps it) or SPAN_EXT_ARRAY
                           (a mipmapped array's levels mapped onto it) */
  int mapped;           /* SPAN_GRAPH: from its allocation node's run until
                           freed; the host memory stays while a graph or an
                           instantiated graph holds the node. SPAN_GL:
                           while CUDA maps the buffer */
  unsigned holders;     /* SPAN_GRAPH: graphs and execs with its node */
  int dev;              /* the device whose memory it is */
  int managed;          /* cuMemAllocManaged's */
} span;
enum { SPAN_PLAIN, SPAN_POOL, SPAN_GRAPH, SPAN_EXT_BUFFER, SPAN_GL,
       SPAN_MODULE, SPAN_ARRAY, SPAN_EXT_ARRAY, SPAN_KINDS };

/* External memory is mapped from its file, not taken from the device's:
   it is not counted in its use, and goes back by unmapping. */
static int external(int kind) {
  return kind == SPAN_EXT_BUFFER || kind == SPAN_EXT_ARRAY;
}

/* What the span at s lets go of: host memory it allocated, a mapping. */
static void drop_memory(const struct span *s) {
  if (external(s->kind)) dbl_unmap(s->base, s->size);
  else if (s->kind != SPAN_MODULE) free((void *)s->base);
}
static size_t kind_used[SPAN_KINDS], kind_high[SPAN_KINDS]; /* bytes of each kind, and peak */
int dbl_capture_check; /* checking work being captured: graph memory
                         counts as mapped, as it is in the graph */
static span *spans;
static size_t nspans, cspans;

/* Number of spans whose base is <= p. */
static size_t spans_upto(uintptr_t p) {
  size_t lo = 0, hi = nspans;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (spans[mid].base <= p) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* The host address of [p, p + n) when one allocation holds it, else NULL. */
void *dbl_dev_range(CUdeviceptr p, size_t n) {
  size_t i = spans_upto((uintptr_t)p);
  if (!i) return NULL;
  const span *s = &spans[i - 1];
  if (!s->mapped && !dbl_capture_check) return NULL;
  size_t at = (uintptr_t)p - s->base;
  if (at >= s->size || n > s->size - at) return NULL;
  return (void *)(uintptr_t)p;
}

/* Page-locked host memory (cuMemHostAlloc): plain host memory, each block
   listed so that freeing anything else fails, as on the driver. Like device
   memory it belongs to the context and goes with it. Its device address
   is its host address (unified addressing). */
typedef struct hostblock { void *p; size_t size; } hostblock;
static hostblock *hosts;
static size_t nhosts, chosts;

/* The page-locked block that holds [p, p + n), or NULL. */
static const hostblock *host_of(uintptr_t p, size_t n) {
  for (size_t i = 0; i < nhosts; i++) {
    uintptr_t b = (uintptr_t)hosts[i].p;
    if (p >= b && p - b < hosts[i].size && n <= hosts[i].size - (p - b))
      return &hosts[i];
  }
  return NULL;
}

int dbl_host_block(uint64_t p, uint64_t *base, uint64_t *size) {
  const hostblock *h = host_of((uintptr_t)p, 1);
  if (!h) return 0;
  *base = (uint64_t)(uintptr_t)h->p;
  *size = h->size;
  return 1;
}

int dbl_device_block(uint64_t p, uint64_t *base, uint64_t *size) {
  size_t i = spans_upto((uintptr_t)p);
  if (!i || p - spans[i - 1].base >= spans[i - 1].size) return 0;
  *base = spans[i - 1].base;
  *size = spans[i - 1].size;
  return 1;
}

void *dbl_memop_range(CUdeviceptr p, size_t n) {
  size_t i = spans_upto((uintptr_t)p);
  void *h = dbl_dev_range(p, n);
  if (h) return spans[i - 1].managed ? NULL : h;
  return host_of((uintptr_t)p, n) ? (void *)(uintptr_t)p : NULL;
}

/* Frees the memory of device dev; page-locked host memory goes with the
   last context. */
void dbl_free_all_memory(int dev) {
  size_t n = 0;
  for (size_t i = 0; i < nspans; i++)
    if (spans[i].dev == dev) {
      dbl_forget_block(spans[i].base);
      drop_memory(&spans[i]);
    } else {
      spans[n++] = spans[i];
    }
  nspans = n;
  mem_used[dev] = 0;
  for (int d = 0; d < dbl_ndevices; d++)
    if (dbl_primary[d].refs) return;
  free(spans);
  spans = NULL;
  nspans = cspans = 0;
  for (size_t i = 0; i < nhosts; i++) {
    dbl_forget_block((uint64_t)(uintptr_t)hosts[i].p);
    free(hosts[i].p);
  }
  free(hosts);
  hosts = NULL;
  nhosts = chosts = 0;
  memset(kind_used, 0, sizeof kind_used);
}

/* The device of the allocation that holds [p, p + n), or -1. */
int dbl_dev_of(CUdeviceptr p, size_t n) {
  size_t i = spans_upto((uintptr_t)p);
  if (!i || !dbl_dev_range(p, n ? n : 1)) return -1;
  return spans[i - 1].dev;
}

#ifdef CUDA_SIM
/* The live allocation holding [p, p + n), for the simulator's checks. */
int dbl_sim_live(void *ud, uint64_t p, size_t n, uint64_t *lo, uint64_t *hi) {
  size_t i = spans_upto((uintptr_t)p);
  if (!i || !dbl_dev_range(p, n)) return 0;
  *lo = spans[i - 1].base;
  *hi = spans[i - 1].base + spans[i - 1].size;
  return 1;
}
#endif

/* -- memory ---------------------------------------------------------------- */

CUresult CUDAAPI cuMemGetInfo(size_t *free_bytes, size_t *total) {
  ENTRY(cuMemGetInfo);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!free_bytes || !total) return CUDA_ERROR_INVALID_VALUE;
  *free_bytes = dbl_mem_limit - mem_used[dbl_cur_dev()];
  *total = dbl_mem_limit;
  return CUDA_SUCCESS;
}

static void map_span(span *s, int on) {
  if (on) kind_used[s->kind] += s->size;
  else kind_used[s->kind] -= s->size;
  if (kind_used[s->kind] > kind_high[s->kind])
    kind_high[s->kind] = kind_used[s->kind];
  s->mapped = on;
}

/* A new span of bytesize bytes (not zeroed) of the given kind; graph memory
   is mapped only when its allocation node runs. A module variable's span
   is the memory at *dptr, which its module owns; an external one, the
   mapping at *dptr. */
static CUresult alloc_span(CUdeviceptr *dptr, size_t bytesize, int kind) {
  if ((!external(kind) &&
       bytesize > dbl_mem_limit - mem_used[dbl_cur_dev()])
      || bytesize > SIZE_MAX - ALLOC_ALIGN)
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (nspans == cspans) {
    size_t cap = cspans ? 2 * cspans : 64;
    span *v = realloc(spans, cap * sizeof *v);
    if (!v) return CUDA_ERROR_OUT_OF_MEMORY;
    spans = v;
    cspans = cap;
  }
  void *p = (void *)(uintptr_t)*dptr;
  if (kind != SPAN_MODULE && !external(kind)) {
    size_t rounded = (bytesize + ALLOC_ALIGN - 1) / ALLOC_ALIGN * ALLOC_ALIGN;
    if (!(p = aligned_alloc(ALLOC_ALIGN, rounded)))
      return CUDA_ERROR_OUT_OF_MEMORY;
    memset(p, 0xCD, rounded); /* device memory is not zeroed */
  }
  size_t i = spans_upto((uintptr_t)p);
  memmove(spans + i + 1, spans + i, (nspans - i) * sizeof *spans);
  int later = kind == SPAN_GRAPH || kind == SPAN_GL; /* mapped later */
  spans[i] = (span){(uintptr_t)p, bytesize, kind, !later, 0, dbl_cur_dev(), 0};
  nspans++;
  if (!external(kind)) mem_used[dbl_cur_dev()] += bytesize;
  if (!later) map_span(&spans[i], 1);
  *dptr = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

/* The span that begins at dptr, or -1. */
static long span_at(CUdeviceptr dptr) {
  size_t i = spans_upto((uintptr_t)dptr);
  return i && spans[i - 1].base == (uintptr_t)dptr ? (long)i - 1 : -1;
}

/* The memory of span i goes back to the device. */
static void release_span(long i) {
  dbl_forget_block(spans[i].base);
  drop_memory(&spans[i]);
  if (!external(spans[i].kind)) mem_used[spans[i].dev] -= spans[i].size;
  memmove(spans + i, spans + i + 1, (nspans - (size_t)i - 1) * sizeof *spans);
  nspans--;
}

/* Graph memory lives while its allocation node does (in a graph or an
   instantiated one) or while it is allocated, as the driver reserves it. */
static CUresult free_span(CUdeviceptr dptr) {
  long i = span_at(dptr);
  if (i < 0 || !spans[i].mapped || spans[i].kind >= SPAN_GL)
    return CUDA_ERROR_INVALID_VALUE;
  map_span(&spans[i], 0);
  if (spans[i].kind != SPAN_GRAPH || !spans[i].holders) release_span(i);
  return CUDA_SUCCESS;
}

void dbl_hold_graph_memory(const op *o, int delta) {
  if (o->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) return;
  long i = span_at(o->dst);
  if (i < 0 || spans[i].kind != SPAN_GRAPH) return;
  spans[i].holders += (unsigned)delta;
  if (!spans[i].holders && !spans[i].mapped) release_span(i);
}

CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytesize) {
  ENTRY(cuMemAlloc);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!dptr || !bytesize) return CUDA_ERROR_INVALID_VALUE;
  if ((r = dbl_unsafe_call())) return r;
  return alloc_span(dptr, bytesize, SPAN_PLAIN);
}

/* Rows start at multiples of 512 bytes, as on the H200. */
CUresult CUDAAPI cuMemAllocPitch(CUdeviceptr *dptr, size_t *pPitch,
                                 size_t WidthInBytes, size_t Height,
                                 unsigned int ElementSizeBytes) {
  ENTRY(cuMemAllocPitch);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!dptr || !pPitch || !WidthInBytes || !Height ||
      (ElementSizeBytes != 4 && ElementSizeBytes != 8 &&
       ElementSizeBytes != 16) || WidthInBytes > SIZE_MAX - 512)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = dbl_unsafe_call())) return r;
  size_t pitch = (WidthInBytes + 511) / 512 * 512;
  if (Height > SIZE_MAX / pitch) return CUDA_ERROR_OUT_OF_MEMORY;
  if ((r = alloc_span(dptr, pitch * Height, SPAN_PLAIN))) return r;
  *pPitch = pitch;
  return CUDA_SUCCESS;
}

/* Managed memory is device memory here: the host reaches all of it. */
CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize,
                                   unsigned int flags) {
  ENTRY(cuMemAllocManaged);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!dptr || !bytesize || (flags != CU_MEM_ATTACH_GLOBAL &&
                             flags != CU_MEM_ATTACH_HOST))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = dbl_unsafe_call())) return r;
  if ((r = alloc_span(dptr, bytesize, SPAN_PLAIN))) return r;
  spans[span_at(*dptr)].managed = 1;
  return CUDA_SUCCESS;
}

/* A range of one live allocation, and a location the device knows. */
static CUresult check_range(CUdeviceptr p, size_t n, CUmemLocation loc) {
  if (!n || !dbl_dev_range(p, n)) return CUDA_ERROR_INVALID_VALUE;
  if (loc.type == CU_MEM_LOCATION_TYPE_DEVICE &&
      (loc.id < 0 || loc.id >= dbl_ndevices))
    return CUDA_ERROR_INVALID_DEVICE;
  if (loc.type != CU_MEM_LOCATION_TYPE_DEVICE &&
      loc.type != CU_MEM_LOCATION_TYPE_HOST)
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

/* Migration changes nothing here; a capturing stream takes no prefetch. */
CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count,
                                    CUmemLocation location,
                                    unsigned int flags, CUstream hStream) {
  ENTRY(cuMemPrefetchAsync);
  CUresult r = dbl_enter();
  if (r) return r;
  CUstream s = dbl_stream_of(hStream);
  if (s && s->cap) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (flags) return CUDA_ERROR_INVALID_VALUE;
  return check_range(devPtr, count, location);
}

CUresult CUDAAPI cuMemAdvise(CUdeviceptr devPtr, size_t count,
                             CUmem_advise advice, CUmemLocation location) {
  ENTRY(cuMemAdvise);
  CUresult r = dbl_enter();
  if (r) return r;
  if (advice < CU_MEM_ADVISE_SET_READ_MOSTLY ||
      advice > CU_MEM_ADVISE_UNSET_ACCESSED_BY)
    return CUDA_ERROR_INVALID_VALUE;
  return check_range(devPtr, count, location);
}

/* Frees any kind of device memory, graph allocations too. As on a GPU,
   where the free synchronizes, it waits while the device is busy
   (CUDA_DOUBLE_BUSY). */
CUresult CUDAAPI cuMemFree(CUdeviceptr dptr) {
  ENTRY(cuMemFree);
  CUresult r = dbl_enter();
  if (r || !dptr) return r;
  if ((r = dbl_unsafe_call())) return r;
  if ((r = dbl_settle())) return r; /* as the driver: the work before runs first */
  dbl_wait_busy(held_);
  return free_span(dptr);
}

CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize,
                                unsigned int Flags) {
  ENTRY(cuMemHostAlloc);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!pp || !bytesize || (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE |
                                               CU_MEMHOSTALLOC_DEVICEMAP |
                                               CU_MEMHOSTALLOC_WRITECOMBINED)))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = dbl_unsafe_call())) return r;
  if (nhosts == chosts) {
    size_t cap = chosts ? 2 * chosts : 16;
    hostblock *v = realloc(hosts, cap * sizeof *v);
    if (!v) return CUDA_ERROR_OUT_OF_MEMORY;
    hosts = v;
    chosts = cap;
  }
  void *p = malloc(bytesize);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  memset(p, 0xCD, bytesize); /* not zeroed */
  hosts[nhosts++] = (hostblock){p, bytesize};
  *pp = p;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostGetDevicePointer(CUdeviceptr *pdptr, void *p,
                                           unsigned int Flags) {
  ENTRY(cuMemHostGetDevicePointer);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!pdptr || Flags || !host_of((uintptr_t)p, 1))
    return CUDA_ERROR_INVALID_VALUE;
  *pdptr = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFreeHost(void *p) {
  ENTRY(cuMemFreeHost);
  CUresult r = dbl_enter();
  if (r) return r;
  if ((r = dbl_unsafe_call())) return r;
  if ((r = dbl_settle())) return r; /* copies of it still to run run */
  dbl_wait_busy(held_); /* as cuMemFree */
  for (size_t i = 0; i < nhosts; i++)
    if (hosts[i].p == p) {
      dbl_forget_block((uint64_t)(uintptr_t)p);
      free(p);
      hosts[i] = hosts[--nhosts];
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_VALUE;
}

/* -- stream-ordered and graph memory --------------------------------------- */

/* An allocation or free node of the bytes at p, recorded by s's capture. */
static CUresult graph_memory_node(CUstream s, CUgraphNodeType type,
                                  CUdeviceptr p, size_t bytes) {
  op o = {.type = type, .dst = p, .bytes = bytes};
  return dbl_capture_op(s, &o);
}

/* On a capturing stream an allocation node whose memory the double makes
   at once (its address is fixed from capture on, as the driver's is); else
   memory of the device's default pool. */
CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize,
                                 CUstream hStream) {
  ENTRY(cuMemAllocAsync);
  CUresult r = dbl_enter();
  if (r) return r;
  CUstream s = dbl_stream_of(hStream);
  if (!dptr || !bytesize) return CUDA_ERROR_INVALID_VALUE;
  if ((r = dbl_stream_usable(s))) return r;
  if (!s || !s->cap) return alloc_span(dptr, bytesize, SPAN_POOL);
  if ((r = alloc_span(dptr, bytesize, SPAN_GRAPH))) return r;
  if ((r = graph_memory_node(s, CU_GRAPH_NODE_TYPE_MEM_ALLOC, *dptr,
                             bytesize)))
    release_span(span_at(*dptr));
  return r;
}

/* On a capturing stream a free node, of graph memory only; else frees. */
CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  ENTRY(cuMemFreeAsync);
  CUresult r = dbl_enter();
  if (r) return r;
  CUstream s = dbl_stream_of(hStream);
  if ((r = dbl_stream_usable(s))) return r;
  long i = span_at(dptr);
  if (i < 0) return CUDA_ERROR_INVALID_VALUE;
  if (!s || !s->cap) {
    if ((r = dbl_settle())) return r; /* stream-ordered: the work before it runs first */
    return free_span(dptr);
  }
  if (spans[i].kind != SPAN_GRAPH) return CUDA_ERROR_INVALID_VALUE;
  return graph_memory_node(s, CU_GRAPH_NODE_TYPE_MEM_FREE, dptr,
                           spans[i].size);
}

struct CUmemPoolHandle_st { int unused; };
static struct CUmemPoolHandle_st default_pool;

CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out,
                                           CUdevice dev) {
  ENTRY(cuDeviceGetDefaultMemPool);
  CUresult r = dbl_enter_device(dev);
  if (r) return r;
  if (!pool_out) return CUDA_ERROR_INVALID_VALUE;
  *pool_out = &default_pool;
  return CUDA_SUCCESS;
}

/* The pool keeps no memory once freed: reserved is what is used. */
CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool,
                                       CUmemPool_attribute attr, void *value) {
  ENTRY(cuMemPoolGetAttribute);
  CUresult r = dbl_enter();
  if (r) return r;
  if (pool != &default_pool || !value) return CUDA_ERROR_INVALID_VALUE;
  cuuint64_t v;
  switch (attr) {
  case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
  case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: v = kind_used[SPAN_POOL]; break;
  case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
  case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: v = kind_high[SPAN_POOL]; break;
  default: return CUDA_ERROR_NOT_SUPPORTED;
  }
  memcpy(value, &v, sizeof v);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  ENTRY(cuMemPoolTrimTo);
  CUresult r = dbl_enter();
  if (r) return r;
  return pool == &default_pool ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuDeviceGetGraphMemAttribute(CUdevice device,
                                              CUgraphMem_attribute attr,
                                              void *value) {
  ENTRY(cuDeviceGetGraphMemAttribute);
  CUresult r = dbl_enter_device(device);
  if (r) return r;
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  cuuint64_t v;
  switch (attr) {
  case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
  case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: v = kind_used[SPAN_GRAPH]; break;
  case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
  case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: v = kind_high[SPAN_GRAPH]; break;
  default: return CUDA_ERROR_INVALID_VALUE;
  }
  memcpy(value, &v, sizeof v);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGraphMemTrim(CUdevice device) {
  ENTRY(cuDeviceGraphMemTrim);
  return dbl_enter_device(device);
}

/* An allocation node maps its memory, refused while it is mapped from an
   earlier launch (unless the graph frees it on launch); a free node
   unmaps it. */
CUresult dbl_run_memory_node(const op *o) {
  long i = span_at(o->dst);
  if (i < 0 || spans[i].kind != SPAN_GRAPH) return CUDA_ERROR_INVALID_VALUE;
  int alloc = o->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  if (alloc && spans[i].mapped && !dbl_auto_free())
    return CUDA_ERROR_INVALID_VALUE;
  if (spans[i].mapped != alloc) map_span(&spans[i], alloc);
  return CUDA_SUCCESS;
}

/* -- OpenGL buffers' memory (gl.c) ---------------------------------------- */

CUresult dbl_alloc_gl_memory(CUdeviceptr *p, size_t n) {
  return alloc_span(p, n, SPAN_GL);
}

void dbl_map_gl_memory(CUdeviceptr p, int on) {
  long i = span_at(p);
  if (i >= 0 && spans[i].kind == SPAN_GL) map_span(&spans[i], on);
}

void dbl_free_gl_memory(CUdeviceptr p) {
  long i = span_at(p);
  if (i >= 0 && spans[i].kind == SPAN_GL) release_span(i);
}

/* -- module variables ------------------------------------------------------ */

CUresult dbl_add_module_memory(void *p, size_t n) {
  CUdeviceptr d = (CUdeviceptr)(uintptr_t)p;
  return alloc_span(&d, n, SPAN_MODULE);
}

void dbl_drop_module_memory(void *p) {
  long i = span_at((CUdeviceptr)(uintptr_t)p);
  if (i < 0 || spans[i].kind != SPAN_MODULE) return;
  map_span(&spans[i], 0);
  release_span(i);
}

/* -- arrays' memory -------------------------------------------------------- */

CUresult dbl_alloc_array_memory(CUdeviceptr *p, size_t n) {
  return alloc_span(p, n, SPAN_ARRAY);
}

void dbl_free_array_memory(CUdeviceptr p) {
  long i = span_at(p);
  if (i < 0 || spans[i].kind != SPAN_ARRAY) return;
  map_span(&spans[i], 0);
  release_span(i);
}

/* -- external memory's mappings -------------------------------------------- */

CUresult dbl_add_external_memory(void *p, size_t n, int array) {
  CUdeviceptr d = (CUdeviceptr)(uintptr_t)p;
  return alloc_span(&d, n, array ? SPAN_EXT_ARRAY : SPAN_EXT_BUFFER);
}

void dbl_drop_external_memory(void *p) {
  long i = span_at((CUdeviceptr)(uintptr_t)p);
  if (i < 0 || spans[i].kind != SPAN_EXT_ARRAY) return;
  map_span(&spans[i], 0);
  release_span(i);
}
