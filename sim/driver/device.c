/* The devices and their primary contexts: initialization, device queries,
   the current context, peer access; the gates every call passes, and the
   ring of live handles that destroying a context frees. */
#include "double.h"
#include "queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -- the device ------------------------------------------------------------ */

#ifdef CUDA_SIM
#define DEVICE_NAME "cugraph-lua PTX simulator"
#else
#define DEVICE_NAME "cugraph-lua test double"
#endif
#define DEVICE_MEMORY ((size_t)80 << 30)

const unsigned dbl_max_block[3] = {1024, 1024, 64};
const unsigned dbl_max_grid[3] = {2147483647u, 65535, 65535};

/* CUDA_DOUBLE_NARROW_MEMOPS=1: the device's stream memory operations lack
   64-bit values and the NOR comparison, as some devices' do. */
static int narrow_memops;

int dbl_attribute(CUdevice_attribute a) {
  switch (a) {
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return MAX_THREADS;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return (int)dbl_max_block[0];
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return (int)dbl_max_block[1];
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return (int)dbl_max_block[2];
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return (int)dbl_max_grid[0];
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return (int)dbl_max_grid[1];
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return (int)dbl_max_grid[2];
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return SHARED_DEFAULT;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
    return SHARED_OPTIN;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return DBL_SMS;
  case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
  case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
  case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
  case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: return 1;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
  case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS: return !narrow_memops;
  case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR: return !narrow_memops;
  /* an H200's limits on arrays (texels) */
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH: return 131072;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH: return 131072;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT: return 65536;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH: return 16384;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT: return 16384;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH: return 16384;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH: return 32768;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH: return 131072;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT: return 65536;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH: return 16384;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT: return 16384;
  case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH: return 16384;
  default: return 0;
  }
}

/* -- driver and context state ---------------------------------------------- */

static int initialized, no_peer;
int dbl_ndevices = 1;
size_t dbl_mem_limit;

struct CUctx_st dbl_primary[MAX_DEVICES];
/* initial-exec: static TLS, read without __tls_get_addr (whose dynamic
   blocks LeakSanitizer misreads at exit in some heap layouts) */
static _Thread_local CUcontext current __attribute__((tls_model("initial-exec")));

/* The device of the current context (0 without one). */
int dbl_cur_dev(void) { return current ? current->dev : 0; }

/* Whether ctx is one of the primary contexts. */
int dbl_is_primary(CUcontext ctx) {
  return ctx && ctx >= dbl_primary && ctx < dbl_primary + dbl_ndevices;
}

/* The gate of calls that need the context, whatever the sticky error. */
CUresult dbl_enter_context(void) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!current) return CUDA_ERROR_INVALID_CONTEXT;
  return current->refs ? CUDA_SUCCESS : CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

/* The gate of every call that works on the device. */
CUresult dbl_enter(void) {
  CUresult r = dbl_enter_context();
  return r ? r : dbl_sticky;
}

/* The gate of device queries, which need no context. */
CUresult dbl_enter_device(CUdevice dev) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  return dev >= 0 && dev < dbl_ndevices ? CUDA_SUCCESS
                                         : CUDA_ERROR_INVALID_DEVICE;
}

/* Graphs belong to no context and are host data: sticky errors spare them. */
CUresult dbl_enter_graph(void) {
  return initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

/* -- handles --------------------------------------------------------------- */

obj dbl_live = {&dbl_live, &dbl_live, -1, -1};

void *dbl_new_obj(size_t size, int kind) {
  obj *o = calloc(1, size);
  if (!o) return NULL;
  o->kind = kind;
  o->dev = dbl_cur_dev(); /* the device of the context it is made in */
  if (kind == O_GRAPH) ((CUgraph)o)->cupti_id = dbl_graph_id();
  o->prev = dbl_live.prev;
  o->next = &dbl_live;
  dbl_live.prev->next = o;
  dbl_live.prev = o;
  return o;
}

void dbl_free_obj(void *p) {
  obj *o = p;
  o->prev->next = o->next;
  o->next->prev = o->prev;
  free(o);
}

/* The free of each kind when its context is destroyed (double.h's list). */
#define DBL_KIND_FREE(k, free, type) \
  static void free_##k(obj *o) { free((type)(void *)o); }
DBL_KINDS(DBL_KIND_FREE)
#undef DBL_KIND_FREE
static void (*const frees[O_NKINDS])(obj *) = {
#define DBL_KIND_ROW(k, free, type) free_##k,
  DBL_KINDS(DBL_KIND_ROW)
#undef DBL_KIND_ROW
};

/* Frees everything made in device dev's context, which is being destroyed:
   all but the graphs, which belong to no context. */
static void destroy_context(int dev) {
  dbl_flush_output(); /* what its kernels printed; work still to run goes */
  for (capture *c = dbl_captures, *next; c; c = next) {
    next = c->next;
    if (c->origin && c->origin->h.dev != dev) continue;
    if (c->owned) dbl_free_graph(c->g);
    dbl_end_capture(c);
  }
  memset(dbl_primary[dev].peer, 0, sizeof dbl_primary[dev].peer);
  for (int d = 0; d < dbl_ndevices; d++) dbl_primary[d].peer[dev] = 0;
  for (obj *o = dbl_live.next, *next; o != &dbl_live; o = next) {
    next = o->next;
    if (o->dev == dev) frees[o->kind](o);
  }
  dbl_queues_end(dev);
  dbl_free_all_memory(dev);
}

unsigned long dbl_hang;
int dbl_hung;
static double busy_for, busy_until; /* seconds; CLOCK_MONOTONIC */

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void dbl_keep_busy(void) {
  if (busy_for > 0) busy_until = mono() + busy_for;
}

int dbl_busy(void) { return busy_for > 0 && mono() < busy_until; }
double dbl_busy_until(void) { return busy_until; }

void dbl_wait_busy(pthread_mutex_t *held) {
  while (dbl_busy()) {
    struct timespec nap = { 0, 1000000 };
    pthread_mutex_unlock(held);
    nanosleep(&nap, NULL);
    pthread_mutex_lock(held);
  }
}

void dbl_wait_forever(pthread_mutex_t *held) {
  pthread_mutex_unlock(held); /* the other calls go on meanwhile */
  for (;;) {
    struct timespec nap = { 1, 0 };
    nanosleep(&nap, NULL);
  }
}

/* -- initialization, device, context --------------------------------------- */

static void tear_down(void) { atomic_store(&dbl_torn_down, 1); }

CUresult CUDAAPI cuInit(unsigned int Flags) {
  ENTRY(cuInit);
  if (Flags) return CUDA_ERROR_INVALID_VALUE;
  if (initialized) return CUDA_SUCCESS;
  /* as the driver: an empty CUDA_VISIBLE_DEVICES (or -1) hides every device */
  const char *devices = getenv("CUDA_VISIBLE_DEVICES");
  if (devices && (!*devices || !strcmp(devices, "-1")))
    return CUDA_ERROR_NO_DEVICE;
  const char *limit = getenv("CUDA_DOUBLE_MEM_LIMIT");
  char *end = NULL;
  unsigned long long v = limit ? strtoull(limit, &end, 10) : 0;
  dbl_mem_limit = limit && *limit && !*end && v ? (size_t)v : DEVICE_MEMORY;
  const char *n = getenv("CUDA_DOUBLE_DEVICES");
  v = n && *n ? strtoull(n, &end, 10) : 1;
  dbl_ndevices = n && *n && !*end && v >= 1 && v <= MAX_DEVICES ? (int)v : 1;
  const char *np = getenv("CUDA_DOUBLE_NO_PEER");
  no_peer = np && *np && strcmp(np, "0");
  const char *nm = getenv("CUDA_DOUBLE_NARROW_MEMOPS");
  narrow_memops = nm && *nm && strcmp(nm, "0");
  const char *hang = getenv("CUDA_DOUBLE_HANG");
  v = hang && *hang ? strtoull(hang, &end, 10) : 0;
  dbl_hang = hang && *hang && !*end ? (unsigned long)v : 0;
  const char *busy = getenv("CUDA_DOUBLE_BUSY");
  v = busy && *busy ? strtoull(busy, &end, 10) : 0;
  busy_for = busy && *busy && !*end ? (double)v * 1e-3 : 0;
  for (int d = 0; d < MAX_DEVICES; d++) dbl_primary[d].dev = d;
#ifdef CUDA_SIM
  /* strict mode, unless CUDA_SIM_STRICT=0 (queue.c) */
  const char *strict = getenv("CUDA_SIM_STRICT");
  dbl_strict = !strict || strcmp(strict, "0");
#endif
  atexit(tear_down); /* as the driver: calls made after exit's turn fail */
  initialized = 1;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int *driverVersion) {
  ENTRY(cuDriverGetVersion);
  if (!driverVersion) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = 13000;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int *count) {
  ENTRY(cuDeviceGetCount);
  CUresult r = dbl_enter_device(0);
  if (r) return r;
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = dbl_ndevices;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal) {
  ENTRY(cuDeviceGet);
  CUresult r = dbl_enter_device(ordinal);
  if (r) return r;
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev) {
  ENTRY(cuDeviceGetName);
  CUresult r = dbl_enter_device(dev);
  if (r) return r;
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  snprintf(name, (size_t)len, "%s", DEVICE_NAME);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib,
                                      CUdevice dev) {
  ENTRY(cuDeviceGetAttribute);
  CUresult r = dbl_enter_device(dev);
  if (r) return r;
  if (!pi || attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
    return CUDA_ERROR_INVALID_VALUE;
  *pi = dbl_attribute(attrib);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem(size_t *bytes, CUdevice dev) {
  ENTRY(cuDeviceTotalMem);
  CUresult r = dbl_enter_device(dev);
  if (r) return r;
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  *bytes = dbl_mem_limit;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  ENTRY(cuDevicePrimaryCtxRetain);
  CUresult r = dbl_enter_device(dev);
  if (r) return r;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (!dbl_primary[dev].refs && dbl_sticky)
    return dbl_sticky; /* no new context */
  dbl_primary[dev].refs++;
  *pctx = &dbl_primary[dev];
  return CUDA_SUCCESS;
}

/* Works after a sticky error too. */
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) {
  ENTRY(cuDevicePrimaryCtxRelease);
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || dev >= dbl_ndevices) return CUDA_ERROR_INVALID_DEVICE;
  if (!dbl_primary[dev].refs) return CUDA_ERROR_INVALID_CONTEXT;
  if (!--dbl_primary[dev].refs) destroy_context(dev);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  ENTRY(cuCtxSetCurrent);
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx && !dbl_is_primary(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  current = ctx;
  return CUDA_SUCCESS;
}

/* Waits for all work, which is done; refused during any capture. */
CUresult CUDAAPI cuCtxSynchronize(void) {
  ENTRY(cuCtxSynchronize);
  CUresult r = dbl_enter();
  if (r) return r;
  for (capture *c = dbl_captures; c; c = c->next) {
    c->invalid = 1;
    r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (!r && dbl_strict && !dbl_hung) r = dbl_wait_device();
  else if (!r) dbl_flush_output();
  if (dbl_hung) dbl_wait_forever(held_);
  dbl_wait_busy(held_);
  return r;
}

/* -- peer access ----------------------------------------------------------- */

CUresult CUDAAPI cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev,
                                       CUdevice peerDev) {
  ENTRY(cuDeviceCanAccessPeer);
  CUresult r = dbl_enter_device(dev);
  if (!r) r = dbl_enter_device(peerDev);
  if (r) return r;
  if (!canAccessPeer) return CUDA_ERROR_INVALID_VALUE;
  *canAccessPeer = dev != peerDev && !no_peer;
  return CUDA_SUCCESS;
}

/* Access from the current context to memory of peerContext's device. */
CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peerContext,
                                       unsigned int Flags) {
  ENTRY(cuCtxEnablePeerAccess);
  CUresult r = dbl_enter();
  if (r) return r;
  if (Flags) return CUDA_ERROR_INVALID_VALUE;
  if (!dbl_is_primary(peerContext) || !peerContext->refs ||
      peerContext == current)
    return CUDA_ERROR_INVALID_DEVICE;
  if (no_peer) return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
  if (current->peer[peerContext->dev])
    return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  current->peer[peerContext->dev] = 1;
  return CUDA_SUCCESS;
}
