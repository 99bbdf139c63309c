/* A test double of libcuda.so.1, the CUDA Driver API, so that the specs run
   on machines with CUDA's headers but no GPU. Built as a shared library and
   named by CUGRAPH_LUA_LIBCUDA, it exports the entry points of src/base/driver.h
   under the versioned symbols that cuda.h maps them to, and follows the real
   driver's documented behaviour for what it covers: one device whose memory
   is host memory, streams that run work at once, stream capture into graphs,
   instantiated graphs, graph clones and kernel nodes whose function and
   parameters change (kernel reload), sticky errors, and host versions of
   the kernels of spec/kernels/kernels.cu and of the built-in condition
   setters of src/kernel/setters.cu, found by entry name. Conditional nodes (while,
   if/else, switch) and child graph nodes run with the driver's semantics;
   their handles live in the instantiated graph, defaults applied at each
   launch, and a kernel sets one with the host twin of
   cudaGraphSetConditional. A while loop that runs past 2^24 turns stops the
   device as a watchdog would (CUDA_ERROR_LAUNCH_TIMEOUT, sticky): a GPU
   would hang.

   Environment: CUDA_VISIBLE_DEVICES empty (or -1) hides the device, as with
   the driver; CUDA_DOUBLE_MEM_LIMIT=bytes sizes device memory (80 GiB).
   CUDA_DOUBLE_DEVICES=n (1 to 8) gives n devices, each with its primary
   context, its own memory and handles; any two may access each other's
   memory (cuDeviceCanAccessPeer) unless CUDA_DOUBLE_NO_PEER=1.
   CUDA_DOUBLE_FAULT=name:n:code[,...] makes the n-th call of an entry point
   (its plain name, cuMemAlloc, or the versioned symbol, cuMemAlloc_v2) fail
   with code, before it does anything; a sticky code also breaks the device
   for the rest of the process, as a fault on a GPU does.
   CUDA_DOUBLE_TRACE=path writes "name calls" lines, one per entry point
   called, to path at exit.

   Any thread may call: every entry point holds one lock for its whole body.
   The current context is per thread, as with the driver.

   Built with -DCUDA_SIM it is the simulator (build/libcuda-sim.so): the
   same driver, with kernels run from their PTX by sim/ instead of host
   twins; a fatbin's PTX is run, a cubin refused. */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef CUDA_SIM
#include "ptx/ptx_sim.h"
#endif

/* -- the device ----------------------------------------------------------- */

#ifdef CUDA_SIM
#define DEVICE_NAME "cugraph-lua PTX simulator"
#else
#define DEVICE_NAME "cugraph-lua test double"
#endif
#define DEVICE_MEMORY ((size_t)80 << 30)
#define MAX_THREADS 1024
#define SHARED_DEFAULT 49152 /* dynamic shared memory without opt-in */
#define SHARED_OPTIN 232448
#define ALLOC_ALIGN 256      /* cuMemAlloc's alignment */

static const unsigned max_block[3] = {1024, 1024, 64};
static const unsigned max_grid[3] = {2147483647u, 65535, 65535};

static int attribute(CUdevice_attribute a) {
  switch (a) {
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return MAX_THREADS;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return (int)max_block[0];
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return (int)max_block[1];
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return (int)max_block[2];
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return (int)max_grid[0];
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return (int)max_grid[1];
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return (int)max_grid[2];
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return SHARED_DEFAULT;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
    return SHARED_OPTIN;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
  default: return 0;
  }
}

/* -- error codes ---------------------------------------------------------- */

/* Every code of cuda.h, with the real driver's messages. */
#define E(code, text) {code, #code, text}
static const struct { CUresult code; const char *name, *text; } errors[] = {
  E(CUDA_SUCCESS, "no error"),
  E(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
  E(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
  E(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
  E(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
  E(CUDA_ERROR_PROFILER_DISABLED,
    "profiler disabled while using external profiling tool"),
  E(CUDA_ERROR_PROFILER_NOT_INITIALIZED,
    "profiler not initialized: call cudaProfilerInitialize()"),
  E(CUDA_ERROR_PROFILER_ALREADY_STARTED, "profiler already started"),
  E(CUDA_ERROR_PROFILER_ALREADY_STOPPED, "profiler already stopped"),
  E(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library"),
  E(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER,
    "API call is not supported in the installed CUDA driver"),
  E(CUDA_ERROR_DEVICE_UNAVAILABLE,
    "CUDA-capable device(s) is/are busy or unavailable"),
  E(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
  E(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
  E(CUDA_ERROR_DEVICE_NOT_LICENSED, "device doesn't have valid Grid license"),
  E(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid"),
  E(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
  E(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "context already current"),
  E(CUDA_ERROR_MAP_FAILED, "mapping of buffer object failed"),
  E(CUDA_ERROR_UNMAP_FAILED, "unmapping of buffer object failed"),
  E(CUDA_ERROR_ARRAY_IS_MAPPED, "array is mapped"),
  E(CUDA_ERROR_ALREADY_MAPPED, "resource already mapped"),
  E(CUDA_ERROR_NO_BINARY_FOR_GPU,
    "no kernel image is available for execution on the device"),
  E(CUDA_ERROR_ALREADY_ACQUIRED, "resource already acquired"),
  E(CUDA_ERROR_NOT_MAPPED, "resource not mapped"),
  E(CUDA_ERROR_NOT_MAPPED_AS_ARRAY, "resource not mapped as array"),
  E(CUDA_ERROR_NOT_MAPPED_AS_POINTER, "resource not mapped as pointer"),
  E(CUDA_ERROR_ECC_UNCORRECTABLE, "uncorrectable ECC error encountered"),
  E(CUDA_ERROR_UNSUPPORTED_LIMIT,
    "limit is not supported on this architecture"),
  E(CUDA_ERROR_CONTEXT_ALREADY_IN_USE,
    "exclusive-thread device already in use by a different thread"),
  E(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
    "peer access is not supported between these two devices"),
  E(CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed"),
  E(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, "invalid OpenGL or DirectX context"),
  E(CUDA_ERROR_NVLINK_UNCORRECTABLE,
    "uncorrectable NVLink error detected during the execution"),
  E(CUDA_ERROR_JIT_COMPILER_NOT_FOUND, "PTX JIT compiler library not found"),
  E(CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
    "the provided PTX was compiled with an unsupported toolchain."),
  E(CUDA_ERROR_JIT_COMPILATION_DISABLED, "PTX JIT compilation was disabled"),
  E(CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY,
    "the provided execution affinity is not supported"),
  E(CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC,
    "the provided PTX contains unsupported call to cudaDeviceSynchronize"),
  E(CUDA_ERROR_CONTAINED,
    "Invalid access of peer GPU memory over nvlink or a hardware error"),
  E(CUDA_ERROR_INVALID_SOURCE, "device kernel image is invalid"),
  E(CUDA_ERROR_FILE_NOT_FOUND, "file not found"),
  E(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND,
    "shared object symbol not found"),
  E(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED,
    "shared object initialization failed"),
  E(CUDA_ERROR_OPERATING_SYSTEM,
    "OS call failed or operation not supported on this OS"),
  E(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
  E(CUDA_ERROR_ILLEGAL_STATE,
    "the operation cannot be performed in the present state"),
  E(CUDA_ERROR_LOSSY_QUERY,
    "attempted introspection would be semantically lossy"),
  E(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
  E(CUDA_ERROR_NOT_READY, "device not ready"),
  E(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"),
  E(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
    "too many resources requested for launch"),
  E(CUDA_ERROR_LAUNCH_TIMEOUT, "the launch timed out and was terminated"),
  E(CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING,
    "launch uses incompatible texturing mode"),
  E(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "peer access is already enabled"),
  E(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "peer access has not been enabled"),
  E(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE,
    "cannot set while device is active in this process"),
  E(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed"),
  E(CUDA_ERROR_ASSERT, "device-side assert triggered"),
  E(CUDA_ERROR_TOO_MANY_PEERS, "peer mapping resources exhausted"),
  E(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
    "part or all of the requested memory range is already mapped"),
  E(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
    "pointer does not correspond to a registered memory region"),
  E(CUDA_ERROR_HARDWARE_STACK_ERROR, "hardware stack error"),
  E(CUDA_ERROR_ILLEGAL_INSTRUCTION, "an illegal instruction was encountered"),
  E(CUDA_ERROR_MISALIGNED_ADDRESS, "misaligned address"),
  E(CUDA_ERROR_INVALID_ADDRESS_SPACE,
    "operation not supported on global/shared address space"),
  E(CUDA_ERROR_INVALID_PC, "invalid program counter"),
  E(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure"),
  E(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
    "too many blocks in cooperative launch"),
  E(CUDA_ERROR_TENSOR_MEMORY_LEAK, "tensor memory not completely freed"),
  E(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
  E(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
  E(CUDA_ERROR_SYSTEM_NOT_READY, "system not yet initialized"),
  E(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH,
    "system has unsupported display driver / cuda driver combination"),
  E(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE,
    "forward compatibility was attempted on non supported HW"),
  E(CUDA_ERROR_MPS_CONNECTION_FAILED,
    "MPS client failed to connect to the MPS control daemon or the MPS "
    "server"),
  E(CUDA_ERROR_MPS_RPC_FAILURE,
    "the remote procedural call between the MPS server and the MPS client "
    "failed"),
  E(CUDA_ERROR_MPS_SERVER_NOT_READY,
    "MPS server is not ready to accept new MPS client requests"),
  E(CUDA_ERROR_MPS_MAX_CLIENTS_REACHED,
    "the hardware resources required to create MPS client have been "
    "exhausted"),
  E(CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED,
    "the hardware resources required to support device connections have "
    "been exhausted"),
  E(CUDA_ERROR_MPS_CLIENT_TERMINATED,
    "the MPS client has been terminated by the server"),
  E(CUDA_ERROR_CDP_NOT_SUPPORTED,
    "is using CUDA Dynamic Parallelism, but the current configuration, like "
    "MPS, does not support it"),
  E(CUDA_ERROR_CDP_VERSION_MISMATCH,
    "unsupported interaction between different versions of CUDA Dynamic "
    "Parallelism"),
  E(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
    "operation not permitted when stream is capturing"),
  E(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
    "operation failed due to a previous error during capture"),
  E(CUDA_ERROR_STREAM_CAPTURE_MERGE,
    "operation would result in a merge of separate capture sequences"),
  E(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED,
    "capture was not ended in the same stream as it began"),
  E(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "capturing stream has unjoined work"),
  E(CUDA_ERROR_STREAM_CAPTURE_ISOLATION,
    "dependency created on uncaptured work in another stream"),
  E(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
    "operation would make the legacy stream depend on a capturing blocking "
    "stream"),
  E(CUDA_ERROR_CAPTURED_EVENT,
    "operation not permitted on an event last recorded in a capturing "
    "stream"),
  E(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
    "attempt to terminate a thread-local capture sequence from another "
    "thread"),
  E(CUDA_ERROR_TIMEOUT, "wait operation timed out"),
  E(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
    "the graph update was not performed because it included changes which "
    "violated constraints specific to instantiated graph update"),
  E(CUDA_ERROR_EXTERNAL_DEVICE,
    "an async error has occured in external entity outside of CUDA"),
  E(CUDA_ERROR_INVALID_CLUSTER_SIZE,
    "a kernel launch error has occurred due to cluster misconfiguration"),
  E(CUDA_ERROR_FUNCTION_NOT_LOADED,
    "the function handle is not loaded when calling an API that requires a "
    "loaded function"),
  E(CUDA_ERROR_INVALID_RESOURCE_TYPE,
    "one or more resources passed in are not valid resource types for the "
    "operation"),
  E(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION,
    "one or more resources are insufficient or non-applicable for the "
    "operation"),
  E(CUDA_ERROR_KEY_ROTATION,
    "an error happened during the key rotation sequence"),
  E(CUDA_ERROR_UNKNOWN, "unknown error"),
};
#undef E

/* Errors after which the context can never work again (the driver's
   "sticky" errors: the process must restart). */
static int is_sticky(CUresult r) {
  switch (r) {
  case CUDA_ERROR_ILLEGAL_ADDRESS: case CUDA_ERROR_LAUNCH_FAILED:
  case CUDA_ERROR_MISALIGNED_ADDRESS: case CUDA_ERROR_ILLEGAL_INSTRUCTION:
  case CUDA_ERROR_HARDWARE_STACK_ERROR: case CUDA_ERROR_INVALID_PC:
  case CUDA_ERROR_INVALID_ADDRESS_SPACE: case CUDA_ERROR_ASSERT:
  case CUDA_ERROR_LAUNCH_TIMEOUT: case CUDA_ERROR_ECC_UNCORRECTABLE:
    return 1;
  default:
    return 0;
  }
}

/* The fault that broke the device for this process, or SUCCESS. Device
   queries, cuCtxSetCurrent and freeing graphs still work after it; not even
   destroying the context clears it. */
static CUresult sticky;

/* -- entry points: one lock, call counts, injected faults ----------------- */

/* Calls of one entry point, on the list of those called so far. */
typedef struct site {
  const char *name;
  unsigned long calls;
  struct site *next;
} site;

static site *sites;

/* Armed faults: the n-th call of name returns code. */
#define MAX_FAULTS 16
static struct fault { char name[64]; unsigned long n; CUresult code; }
  faults[MAX_FAULTS];
static int nfaults, configured;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static pthread_mutex_t *take_lock(void) {
  pthread_mutex_lock(&lock);
  return &lock;
}

static void drop_lock(pthread_mutex_t **held) { pthread_mutex_unlock(*held); }

static void write_trace(void) {
  pthread_mutex_lock(&lock);
  const char *path = getenv("CUDA_DOUBLE_TRACE");
  FILE *f = path ? fopen(path, "w") : NULL;
  if (f) {
    for (const site *s = sites; s; s = s->next)
      fprintf(f, "%s %lu\n", s->name, s->calls);
    fclose(f);
  } else {
    fprintf(stderr, "cuda double: cannot write CUDA_DOUBLE_TRACE\n");
  }
  pthread_mutex_unlock(&lock);
}

/* Reads CUDA_DOUBLE_FAULT and CUDA_DOUBLE_TRACE, at the first call of any
   entry point. A malformed fault list aborts: a test would mean nothing. */
static void configure(void) {
  configured = 1;
  const char *t = getenv("CUDA_DOUBLE_TRACE");
  if (t && *t) atexit(write_trace);
  const char *p = getenv("CUDA_DOUBLE_FAULT");
  while (p && *p) {
    struct fault *f = &faults[nfaults];
    int len = 0, code = 0;
    if (nfaults == MAX_FAULTS
        || sscanf(p, "%63[A-Za-z0-9_]:%lu:%d%n", f->name, &f->n, &code, &len)
             != 3
        || !f->n || code <= 0 || (p[len] && p[len] != ',')) {
      fprintf(stderr, "cuda double: bad CUDA_DOUBLE_FAULT at \"%s\" "
              "(name:n:code[,...], at most %d)\n", p, MAX_FAULTS);
      abort();
    }
    f->code = (CUresult)code;
    nfaults++;
    p += len + (p[len] == ',');
  }
}

/* Counts a call of s (whose symbol is func) and returns its armed fault, or
   SUCCESS. A sticky fault breaks the device from here on. */
static CUresult called(site *s, const char *func) {
  if (!configured) configure();
  if (!s->calls++) {
    s->next = sites;
    sites = s;
  }
  for (int i = 0; i < nfaults; i++)
    if (faults[i].n == s->calls
        && (!strcmp(faults[i].name, s->name) || !strcmp(faults[i].name, func))) {
      if (is_sticky(faults[i].code) && !sticky) sticky = faults[i].code;
      return faults[i].code;
    }
  return CUDA_SUCCESS;
}

/* The first statement of every entry point: takes the lock until the
   function returns, counts the call; ENTRY returns an armed fault at once,
   ENTRY_THEN leaves it in fault_ for a call that must still do its work.
   The name is stringized here, before cuda.h's macros version it. */
#define ENTRY_AT(name)                                                      \
  pthread_mutex_t *held_ __attribute__((cleanup(drop_lock), unused)) =     \
    take_lock();                                                            \
  static site site_ = {name, 0, NULL};                                      \
  CUresult fault_ = called(&site_, __func__)
#define ENTRY_THEN(name) ENTRY_AT(#name)
#define ENTRY(name)                                                         \
  ENTRY_AT(#name);                                                          \
  if (fault_) return fault_

static int error_index(CUresult r) {
  for (size_t i = 0; i < sizeof errors / sizeof *errors; i++)
    if (errors[i].code == r) return (int)i;
  return -1;
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr) {
  ENTRY(cuGetErrorName);
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  int i = error_index(error);
  *pStr = i < 0 ? NULL : errors[i].name;
  return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr) {
  ENTRY(cuGetErrorString);
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  int i = error_index(error);
  *pStr = i < 0 ? NULL : errors[i].text;
  return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* -- driver and context state --------------------------------------------- */

#define MAX_DEVICES 8
static int initialized;
static int ndevices = 1, no_peer;
static size_t mem_limit;  /* device memory of each device, bytes */
static size_t mem_used[MAX_DEVICES]; /* sum of its live allocation sizes,
                                        <= mem_limit */

/* A device's primary context: live while refs > 0; destroying it frees
   everything made in it. The handle stays the same across retains. */
struct CUctx_st { int refs, dev; unsigned char peer[MAX_DEVICES]; };
static struct CUctx_st primary[MAX_DEVICES];
static _Thread_local CUcontext current;

/* The device of the current context (0 without one). */
static int cur_dev(void) { return current ? current->dev : 0; }

/* Whether ctx is one of the primary contexts. */
static int is_primary(CUcontext ctx) {
  return ctx && ctx >= primary && ctx < primary + ndevices;
}

/* The gate of calls that need the context, whatever the sticky error. */
static CUresult enter_context(void) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!current) return CUDA_ERROR_INVALID_CONTEXT;
  return current->refs ? CUDA_SUCCESS : CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

/* The gate of every call that works on the device. */
static CUresult enter(void) {
  CUresult r = enter_context();
  return r ? r : sticky;
}

/* The gate of device queries, which need no context. */
static CUresult enter_device(CUdevice dev) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  return dev >= 0 && dev < ndevices ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

/* -- handles -------------------------------------------------------------- */

/* Every live handle is on one ring, so that destroying the context can free
   what the caller did not (all but graphs) and capture can find its
   streams. Each handle struct starts with an obj. */
enum { O_STREAM, O_EVENT, O_MODULE, O_GRAPH, O_EXEC };
typedef struct obj { struct obj *prev, *next; int kind, dev; } obj;
static obj live = {&live, &live, -1, -1};

static void *new_obj(size_t size, int kind) {
  obj *o = calloc(1, size);
  if (!o) return NULL;
  o->kind = kind;
  o->dev = cur_dev(); /* the device of the context it is made in */
  o->prev = live.prev;
  o->next = &live;
  live.prev->next = o;
  live.prev = o;
  return o;
}

static void free_obj(void *p) {
  obj *o = p;
  o->prev->next = o->next;
  o->next->prev = o->prev;
  free(o);
}

/* A set of graph nodes in insertion order. */
typedef struct nodeset { CUgraphNode *v; size_t n, cap; } nodeset;

static int set_has(const nodeset *s, CUgraphNode x) {
  for (size_t i = 0; i < s->n; i++)
    if (s->v[i] == x) return 1;
  return 0;
}

/* Appends x (also when present, if dup). Nonzero when out of memory. */
static int set_push(nodeset *s, CUgraphNode x, int dup) {
  if (!dup && set_has(s, x)) return 0;
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 4;
    CUgraphNode *v = realloc(s->v, cap * sizeof *v);
    if (!v) return 1;
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = x;
  return 0;
}

static int set_union(nodeset *dst, const nodeset *src) {
  for (size_t i = 0; i < src->n; i++)
    if (set_push(dst, src->v[i], 0)) return 1;
  return 0;
}

static int set_assign(nodeset *dst, const nodeset *src) {
  dst->n = 0;
  return set_union(dst, src);
}

/* -- device memory -------------------------------------------------------- */

/* Live allocations, sorted by base and disjoint. A device pointer is the
   host address of the allocation. */
typedef struct span {
  uintptr_t base;
  size_t size;
  int kind;             /* SPAN_PLAIN, SPAN_POOL (cuMemAllocAsync) or
                           SPAN_GRAPH (an allocation node's memory) */
  int mapped;           /* SPAN_GRAPH: from its allocation node's run until
                           freed; the host memory stays till destroy */
  int dev;              /* the device whose memory it is */
} span;
enum { SPAN_PLAIN, SPAN_POOL, SPAN_GRAPH };
static size_t kind_used[3], kind_high[3]; /* bytes of each kind, and peak */
static int capture_check; /* checking work being captured: graph memory
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
static void *dev_range(CUdeviceptr p, size_t n) {
  size_t i = spans_upto((uintptr_t)p);
  if (!i) return NULL;
  const span *s = &spans[i - 1];
  if (!s->mapped && !capture_check) return NULL;
  size_t at = (uintptr_t)p - s->base;
  if (at >= s->size || n > s->size - at) return NULL;
  return (void *)(uintptr_t)p;
}

/* Page-locked host memory (cuMemHostAlloc): plain host memory, each block
   listed so that freeing anything else fails, as on the driver. Like device
   memory it belongs to the context and goes with it. */
static void **hosts;
static size_t nhosts, chosts;

/* Frees the memory of device dev; page-locked host memory goes with the
   last context. */
static void free_all_memory(int dev) {
  size_t n = 0;
  for (size_t i = 0; i < nspans; i++)
    if (spans[i].dev == dev) free((void *)spans[i].base);
    else spans[n++] = spans[i];
  nspans = n;
  mem_used[dev] = 0;
  for (int d = 0; d < ndevices; d++)
    if (primary[d].refs) return;
  free(spans);
  spans = NULL;
  nspans = cspans = 0;
  for (size_t i = 0; i < nhosts; i++) free(hosts[i]);
  free(hosts);
  hosts = NULL;
  nhosts = chosts = 0;
  memset(kind_used, 0, sizeof kind_used);
}

/* -- kernels -------------------------------------------------------------- */

/* One thread of a launch. A bad access sets fault and the kernel stops, as
   a GPU stops the context. */
typedef struct kctx {
  const unsigned char *args; /* parameter bytes, laid out as on the GPU */
  const size_t *off;         /* offset of each parameter in args */
  unsigned grid[3], block[3], bid[3], tid[3];
  unsigned char *shared;     /* this block's dynamic shared memory */
  size_t nshared;
  CUresult fault;
} kctx;

typedef void kfn(kctx *c);

/* A host version of a kernel: body[1], if any, runs after every thread of
   the block has run body[0] (a __syncthreads()). */
typedef struct kimpl {
  const char *name;
  kfn *body[2];        /* body[0] NULL: the kernel does nothing */
  size_t nparams;
  unsigned char size[8];
} kimpl;

static void arg(const kctx *c, size_t i, void *v, size_t n) {
  memcpy(v, c->args + c->off[i], n);
}

/* The host address of an n-byte global access at p, or NULL after a fault. */
static void *global(kctx *c, uint64_t p, size_t n) {
  void *h = dev_range(p, n);
  if (!h) c->fault = CUDA_ERROR_ILLEGAL_ADDRESS;
  else if (p % n) c->fault = CUDA_ERROR_MISALIGNED_ADDRESS;
  return c->fault ? NULL : h;
}

static int ld(kctx *c, uint64_t p, void *v, size_t n) {
  void *h = global(c, p, n);
  if (h) memcpy(v, h, n);
  return h != NULL;
}

static void st(kctx *c, uint64_t p, const void *v, size_t n) {
  void *h = global(c, p, n);
  if (h) memcpy(h, v, n);
}

/* The shared-memory word at byte offset at, or NULL after a fault. */
static unsigned char *shared_at(kctx *c, size_t at, size_t n) {
  if (at > c->nshared || n > c->nshared - at) {
    c->fault = CUDA_ERROR_ILLEGAL_ADDRESS;
    return NULL;
  }
  return c->shared + at;
}

/* blockIdx.x * blockDim.x + threadIdx.x, stored in an int as CUDA C does. */
static int flat_x(const kctx *c) {
  return (int)(c->bid[0] * c->block[0] + c->tid[0]);
}

/* Byte offset of element i of a T[] indexed by an int (mul.wide.s32). */
static uint64_t at_index(int i, size_t elem) {
  return (uint64_t)((int64_t)i * (int64_t)elem);
}

/* fmaf without libm, which the build does not link: the product is exact in
   double; when rounding the double sum to float would meet a tie that the
   first rounding made, step the sum one ulp towards the exact value (the
   method of musl's fmaf). This is the GPU's fma.rn.f32 but for subnormal
   results. */
static float fma_f32(float x, float y, float z) {
  double xy = (double)x * y, r = xy + z;
  uint64_t u;
  memcpy(&u, &r, sizeof u);
  if ((u & 0x1fffffff) != 0x10000000 || (u >> 52 & 0x7ff) == 0x7ff
      || (r - xy == z && r - z == xy))
    return (float)r;
  int neg = (int)(u >> 63);
  double err = neg == (z > xy) ? xy - r + z : z - r + xy;
  if (neg == (err < 0)) u++;
  else u--;
  memcpy(&r, &u, sizeof r);
  return (float)r;
}

/* saxpy and _Z4axpyfPKfPfi: y[i] = a * x[i] + y[i], fused as nvcc emits it */
static void k_saxpy(kctx *c) {
  float a, xv, yv;
  uint64_t x, y;
  int n, i = flat_x(c);
  arg(c, 0, &a, 4), arg(c, 1, &x, 8), arg(c, 2, &y, 8), arg(c, 3, &n, 4);
  if (i >= n) return;
  uint64_t o = at_index(i, 4);
  if (ld(c, x + o, &xv, 4) && ld(c, y + o, &yv, 4)) {
    yv = fma_f32(xv, a, yv);
    st(c, y + o, &yv, 4);
  }
}

/* out[i] = base + i */
static void k_iota_u32(kctx *c) {
  uint64_t out;
  uint32_t base;
  int n, i = flat_x(c);
  arg(c, 0, &out, 8), arg(c, 1, &base, 4), arg(c, 2, &n, 4);
  if (i >= n) return;
  uint32_t v = base + (uint32_t)i;
  st(c, out + at_index(i, 4), &v, 4);
}

/* y[i] += *s */
static void k_add_scalar_f32(kctx *c) {
  uint64_t y, s;
  float yv, sv;
  int n, i = flat_x(c);
  arg(c, 0, &y, 8), arg(c, 1, &s, 8), arg(c, 2, &n, 4);
  if (i >= n) return;
  uint64_t o = at_index(i, 4);
  if (ld(c, y + o, &yv, 4) && ld(c, s, &sv, 4)) {
    yv += sv;
    st(c, y + o, &yv, 4);
  }
}

/* out[*pos] = *pos + 1 in thread 0 of block 0 (in x) */
static void k_mark_u32(kctx *c) {
  uint64_t out, pos;
  uint32_t p;
  int n;
  arg(c, 0, &out, 8), arg(c, 1, &pos, 8), arg(c, 2, &n, 4);
  if (c->bid[0] != 0 || c->tid[0] != 0 || !ld(c, pos, &p, 4)
      || p >= (uint32_t)n)
    return;
  uint32_t v = p + 1u;
  st(c, out + (uint64_t)p * 4, &v, 4);
}

/* x[i] += 1 */
static void k_inc_i32(kctx *c) {
  uint64_t x;
  uint32_t v;
  int n, i = flat_x(c);
  arg(c, 0, &x, 8), arg(c, 1, &n, 4);
  if (i >= n) return;
  uint64_t o = at_index(i, 4);
  if (ld(c, x + o, &v, 4)) {
    v += 1u; /* the GPU's add wraps */
    st(c, x + o, &v, 4);
  }
}

/* dst[i] = src[i] * k */
static void k_scale_f64(kctx *c) {
  uint64_t dst, src;
  double k, v;
  int n, i = flat_x(c);
  arg(c, 0, &dst, 8), arg(c, 1, &src, 8), arg(c, 2, &k, 8), arg(c, 3, &n, 4);
  if (i >= n) return;
  uint64_t o = at_index(i, 8);
  if (ld(c, src + o, &v, 8)) {
    v *= k;
    st(c, dst + o, &v, 8);
  }
}

/* out[i] = in[i] at the ends, else the mean of in[i - 1] and in[i + 1] */
static void k_jacobi_f64(kctx *c) {
  uint64_t out, in;
  double a, b;
  int n, i = flat_x(c);
  arg(c, 0, &out, 8), arg(c, 1, &in, 8), arg(c, 2, &n, 4);
  if (i >= n) return;
  if (i == 0 || i == n - 1) {
    if (ld(c, in + at_index(i, 8), &a, 8)) st(c, out + at_index(i, 8), &a, 8);
    return;
  }
  if (ld(c, in + at_index(i - 1, 8), &a, 8) &&
      ld(c, in + at_index(i + 1, 8), &b, 8)) {
    a = 0.5 * (a + b);
    st(c, out + at_index(i, 8), &a, 8);
  }
}

/* dst[i] = src[i] + v, 64-bit, wrapping */
static void k_add_i64(kctx *c) {
  uint64_t dst, src, v, s;
  int n, i = flat_x(c);
  arg(c, 0, &dst, 8), arg(c, 1, &src, 8), arg(c, 2, &v, 8), arg(c, 3, &n, 4);
  if (i >= n) return;
  uint64_t o = at_index(i, 8);
  if (ld(c, src + o, &s, 8)) {
    s += v;
    st(c, dst + o, &s, 8);
  }
}

/* out[i] = threads in the launch, i = flat 3D thread index */
static void k_dims_u32(kctx *c) {
  uint64_t out;
  int n;
  arg(c, 0, &out, 8), arg(c, 1, &n, 4);
  const unsigned *g = c->grid, *b = c->block;
  unsigned bx = c->bid[0] + g[0] * (c->bid[1] + g[1] * c->bid[2]);
  unsigned tx = c->tid[0] + b[0] * (c->tid[1] + b[1] * c->tid[2]);
  unsigned nt = b[0] * b[1] * b[2];
  unsigned i = bx * nt + tx;
  if (i >= (unsigned)n) return;
  unsigned v = nt * g[0] * g[1] * g[2];
  st(c, out + (uint64_t)i * 4, &v, 4);
}

/* shared_u32, before __syncthreads(): tile[threadIdx.x] = i * 2 */
static void k_shared_store(kctx *c) {
  unsigned v = (unsigned)flat_x(c) * 2u;
  unsigned char *t = shared_at(c, (size_t)c->tid[0] * 4, 4);
  if (t) memcpy(t, &v, 4);
}

/* shared_u32, after: out[i] = tile[threadIdx.x] */
static void k_shared_load(kctx *c) {
  uint64_t out;
  int n, i = flat_x(c);
  arg(c, 0, &out, 8), arg(c, 1, &n, 4);
  unsigned char *t = shared_at(c, (size_t)c->tid[0] * 4, 4);
  if (t && i < n) st(c, out + at_index(i, 4), t, 4);
}

/* out[0] = p.a + p.b for a struct of two doubles passed by value */
static void k_pair_sum(kctx *c) {
  uint64_t out;
  double p[2];
  arg(c, 0, &out, 8), arg(c, 1, p, 16);
  if (c->bid[0] != 0 || c->tid[0] != 0) return;
  double v = p[0] + p[1];
  st(c, out, &v, 8);
}

/* x[2^40] = 1.0f */
static void k_oob_write(kctx *c) {
  uint64_t x;
  float one = 1.0f;
  arg(c, 0, &x, 8);
  st(c, x + ((uint64_t)1 << 40) * 4, &one, 4);
}

/* The host twin of cudaGraphSetConditional: sets the handle in the graph
   being launched; a handle it does not have is a fault. */
static void set_conditional(kctx *c, uint64_t h, unsigned v);

/* count_to: x[0] += 1; cond = x[0] < limit (one thread) */
static void k_count_to(kctx *c) {
  uint64_t x, h;
  uint32_t limit, v;
  arg(c, 0, &x, 8), arg(c, 1, &h, 8), arg(c, 2, &limit, 4);
  if (c->bid[0] || c->tid[0] || !ld(c, x, &v, 4)) return;
  v += 1u;
  st(c, x, &v, 4);
  set_conditional(c, h, v < limit);
}

/* set_cond: cond = *v (one thread) */
static void k_set_cond(kctx *c) {
  uint64_t h, p;
  uint32_t v;
  arg(c, 0, &h, 8), arg(c, 1, &p, 8);
  if (c->bid[0] || c->tid[0] || !ld(c, p, &v, 4)) return;
  set_conditional(c, h, v);
}

/* The setters of src/setters.cu. */
static void k_cond_set(kctx *c) {
  uint64_t h;
  uint32_t v;
  arg(c, 0, &h, 8), arg(c, 1, &v, 4);
  set_conditional(c, h, v);
}

static void k_cond_when(kctx *c) {
  static const unsigned char size[] = {4, 8, 1, 1, 2, 2, 4, 4, 8, 8};
  uint64_t h, p, bits;
  uint32_t type, op;
  int lt, eq, gt;
  arg(c, 0, &h, 8), arg(c, 1, &p, 8), arg(c, 2, &type, 4), arg(c, 3, &op, 4);
  arg(c, 4, &bits, 8);
  unsigned char raw[8] = {0};
  if (type > 9 || !ld(c, p, raw, size[type])) return;
  if (type <= 1) {
    float f;
    double a, b;
    memcpy(&f, raw, 4);
    if (type == 0) a = f;
    else memcpy(&a, raw, 8);
    memcpy(&b, &bits, 8);
    lt = a < b, eq = a == b, gt = a > b;
  } else if (type % 2 == 0) {
    int64_t a = 0, b = (int64_t)bits;
    int8_t i8; int16_t i16; int32_t i32;
    if (type == 2) memcpy(&i8, raw, 1), a = i8;
    else if (type == 4) memcpy(&i16, raw, 2), a = i16;
    else if (type == 6) memcpy(&i32, raw, 4), a = i32;
    else memcpy(&a, raw, 8);
    lt = a < b, eq = a == b, gt = a > b;
  } else {
    uint64_t a = 0;
    memcpy(&a, raw, size[type]); /* little-endian host */
    lt = a < bits, eq = a == bits, gt = a > bits;
  }
  unsigned r = op == 0 ? lt : op == 1 ? lt | eq : op == 2 ? gt
             : op == 3 ? gt | eq : op == 4 ? eq : !eq;
  set_conditional(c, h, r);
}

static void k_cond_countdown(kctx *c) {
  uint64_t h, cell;
  uint32_t n, v;
  arg(c, 0, &h, 8), arg(c, 1, &cell, 8), arg(c, 2, &n, 4);
  if (!ld(c, cell, &v, 4)) return;
  if (v == 0) v = n;
  v -= 1;
  st(c, cell, &v, 4);
  set_conditional(c, h, v != 0);
}

static const kimpl kernels[] = {
  {"count_to", {k_count_to, NULL}, 3, {8, 8, 4}},
  {"set_cond", {k_set_cond, NULL}, 2, {8, 8}},
  {"cg_cond_set", {k_cond_set, NULL}, 2, {8, 4}},
  {"cg_cond_when", {k_cond_when, NULL}, 5, {8, 8, 4, 4, 8}},
  {"cg_cond_countdown", {k_cond_countdown, NULL}, 3, {8, 8, 4}},
  {"saxpy", {k_saxpy, NULL}, 4, {4, 8, 8, 4}},
  {"_Z4axpyfPKfPfi", {k_saxpy, NULL}, 4, {4, 8, 8, 4}},
  {"iota_u32", {k_iota_u32, NULL}, 3, {8, 4, 4}},
  {"add_scalar_f32", {k_add_scalar_f32, NULL}, 3, {8, 8, 4}},
  {"mark_u32", {k_mark_u32, NULL}, 3, {8, 8, 4}},
  {"inc_i32", {k_inc_i32, NULL}, 2, {8, 4}},
  {"scale_f64", {k_scale_f64, NULL}, 4, {8, 8, 8, 4}},
  {"jacobi_f64", {k_jacobi_f64, NULL}, 3, {8, 8, 4}},
  {"add_i64", {k_add_i64, NULL}, 4, {8, 8, 8, 4}},
  {"dims_u32", {k_dims_u32, NULL}, 2, {8, 4}},
  {"shared_u32", {k_shared_store, k_shared_load}, 2, {8, 4}},
  {"oob_write", {k_oob_write, NULL}, 1, {8}},
  {"pair_sum", {k_pair_sum, NULL}, 2, {8, 16}},
  {"noop", {NULL, NULL}, 0, {0}},
};

static const kimpl *find_kernel(const char *name) {
#ifdef CUDA_SIM
  return NULL; /* every kernel runs from its PTX */
#endif
  for (size_t i = 0; i < sizeof kernels / sizeof *kernels; i++)
    if (!strcmp(kernels[i].name, name)) return &kernels[i];
  return NULL;
}

/* -- modules and functions ------------------------------------------------ */

struct CUfunc_st {
  char *name;
  const kimpl *impl;    /* NULL: no host version; launches are refused */
  int layout;           /* nparams, off and size are known */
  size_t nparams;
  size_t *off, *size;   /* one block: off[nparams], then size[nparams] */
  size_t argbytes;      /* end of the last parameter */
  int max_dynamic;      /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
#ifdef CUDA_SIM
  const sim_kernel *sim; /* the entry, decoded */
#endif
};

struct CUmod_st {
  obj h;
  unsigned char *image; /* a copy of a binary image (searched for names) */
  size_t nimage;
  CUfunction *funcs;    /* PTX: every entry; binary: those asked for */
  size_t nfuncs, cfuncs;
#ifdef CUDA_SIM
  sim_module *sim;
#endif
};

static void free_function(CUfunction f) {
  free(f->name);
  free(f->off);
  free(f);
}

/* Lays the parameters out: pair[2i] is the size of parameter i and
   pair[2i + 1] its alignment. */
static int set_layout(CUfunction f, size_t n, const size_t *pair) {
  f->off = n ? malloc(2 * n * sizeof *f->off) : NULL;
  if (n && !f->off) return 1;
  f->size = n ? f->off + n : NULL;
  f->nparams = n;
  f->layout = 1;
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    at = (at + pair[2 * i + 1] - 1) / pair[2 * i + 1] * pair[2 * i + 1];
    f->off[i] = at;
    f->size[i] = pair[2 * i];
    at += pair[2 * i];
  }
  f->argbytes = at;
  return 0;
}

/* Adds a function to m. With a parameter list from PTX (n (size, align)
   pairs), a host version whose parameters differ is not used. */
static CUfunction add_function(CUmodule m, const char *name, size_t len,
                               int from_ptx, size_t n, const size_t *pair) {
  if (m->nfuncs == m->cfuncs) {
    size_t cap = m->cfuncs ? 2 * m->cfuncs : 8;
    CUfunction *v = realloc(m->funcs, cap * sizeof *v);
    if (!v) return NULL;
    m->funcs = v;
    m->cfuncs = cap;
  }
  CUfunction f = calloc(1, sizeof *f);
  if (!f || !(f->name = malloc(len + 1))) {
    free(f);
    return NULL;
  }
  memcpy(f->name, name, len);
  f->name[len] = '\0';
  f->max_dynamic = SHARED_DEFAULT;
  f->impl = find_kernel(f->name);
  if (f->impl && from_ptx) {
    int same = f->impl->nparams == n;
    for (size_t i = 0; same && i < n; i++)
      same = f->impl->size[i] == pair[2 * i] &&
             pair[2 * i + 1] == (pair[2 * i] > 8 ? 8 : pair[2 * i]);
    if (!same) f->impl = NULL;
  }
  int bad = 0;
  if (from_ptx) {
    bad = set_layout(f, n, pair);
  } else if (f->impl) { /* naturally aligned; aggregates to 8 bytes */
    size_t own[16];
    for (size_t i = 0; i < f->impl->nparams; i++) {
      own[2 * i] = f->impl->size[i];
      own[2 * i + 1] = own[2 * i] > 8 ? 8 : own[2 * i];
    }
    bad = set_layout(f, f->impl->nparams, own);
  }
  if (bad) {
    free_function(f);
    return NULL;
  }
  m->funcs[m->nfuncs++] = f;
  return f;
}

static void free_module(CUmodule m) {
  for (size_t i = 0; i < m->nfuncs; i++) free_function(m->funcs[i]);
  free(m->funcs);
  free(m->image);
#ifdef CUDA_SIM
  sim_unload(m->sim);
#endif
  free_obj(m);
}

static int blank(int ch) {
  return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f'
         || ch == '\v';
}

static int ident(int ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')
         || (ch >= '0' && ch <= '9') || ch == '_' || ch == '$' || ch == '%';
}

/* Bytes of a PTX type (".u32"), or 0. */
static size_t ptx_type_size(const char *t, size_t len) {
  static const struct { const char *name; size_t size; } types[] = {
    {".b8", 1}, {".s8", 1}, {".u8", 1}, {".b16", 2}, {".s16", 2},
    {".u16", 2}, {".f16", 2}, {".bf16", 2}, {".b32", 4}, {".s32", 4},
    {".u32", 4}, {".f32", 4}, {".f16x2", 4}, {".bf16x2", 4}, {".b64", 8},
    {".s64", 8}, {".u64", 8}, {".f64", 8},
  };
  for (size_t i = 0; i < sizeof types / sizeof *types; i++)
    if (strlen(types[i].name) == len && !memcmp(types[i].name, t, len))
      return types[i].size;
  return 0;
}

/* Size and alignment of one ".param" declaration in [s, e): ".param .align
   A .b8 name[N]" or ".param .u64 [.ptr .global .align A] name"; an .align
   after the type is the pointee's. Zero when it is not one. */
static int ptx_param(const char *s, const char *e, size_t *size,
                     size_t *align) {
  size_t elem = 0, al = 0, count = 1;
  while (s < e) {
    while (s < e && blank(*s)) s++;
    const char *t = s;
    while (s < e && !blank(*s)) s++;
    size_t len = (size_t)(s - t);
    if (!len) break;
    const char *bracket = memchr(t, '[', len);
    if (len == 6 && !memcmp(t, ".align", 6)) {
      while (s < e && blank(*s)) s++;
      size_t a = strtoul(s, NULL, 10);
      if (!elem) al = a;
      while (s < e && !blank(*s)) s++;
    } else if (!elem && ptx_type_size(t, len)) {
      elem = ptx_type_size(t, len);
    } else if (bracket) {
      count = strtoul(bracket + 1, NULL, 10);
    }
  }
  if (!elem || !count || (al & (al - 1))) return 0;
  *size = elem * count;
  *align = al ? al : elem;
  return 1;
}

/* Base names (up to the first '.') of the instructions of the PTX ISA. */
static const char *const opcodes[] = {
  "abs", "activemask", "add", "addc", "alloca", "and", "applypriority",
  "atom", "bar", "barrier", "bfe", "bfi", "bfind", "bmsk", "bra", "brev",
  "brkpt", "brx", "call", "clusterlaunchcontrol", "clz", "cnot", "copysign",
  "cos", "cp", "createpolicy", "cvt", "cvta", "discard", "div", "dp2a",
  "dp4a", "elect", "ex2", "exit", "fence", "fma", "fns", "getctarank",
  "griddepcontrol", "isspacep", "istypeof", "ld", "ldmatrix", "ldu", "lg2",
  "lop3", "mad", "mad24", "madc", "mapa", "match", "max", "mbarrier",
  "membar", "min", "mma", "mov", "movmatrix", "mul", "mul24", "multimem",
  "nanosleep", "neg", "not", "or", "pmevent", "popc", "prefetch",
  "prefetchu", "prmt", "rcp", "red", "redux", "rem", "ret", "rsqrt", "sad",
  "selp", "set", "setmaxnreg", "setp", "shf", "shfl", "shl", "shr", "sin",
  "slct", "sqrt", "st", "stackrestore", "stacksave", "stmatrix", "sub",
  "subc", "suld", "suq", "sured", "sust", "szext", "tanh", "tcgen05",
  "tensormap", "testp", "tex", "tld4", "trap", "txq", "vabsdiff",
  "vabsdiff2", "vabsdiff4", "vadd", "vadd2", "vadd4", "vavrg2", "vavrg4",
  "vmad", "vmax", "vmax2", "vmax4", "vmin", "vmin2", "vmin4", "vote",
  "vset", "vset2", "vset4", "vshl", "vshr", "vsub", "vsub2", "vsub4",
  "wgmma", "wmma", "xor",
};

static const char *skip_blanks(const char *p, const char *end) {
  while (p < end && blank(*p)) p++;
  return p;
}

/* What follows the labels ("$L__BB0_2:") at the start of [p, end). */
static const char *skip_labels(const char *p, const char *end) {
  for (;;) {
    p = skip_blanks(p, end);
    const char *q = p;
    while (q < end && ident(*q)) q++;
    const char *colon = skip_blanks(q, end);
    if (q == p || colon == end || *colon != ':') return p;
    p = colon + 1;
  }
}

/* Whether a statement of a function body in [p, end) is empty, a directive
   (.reg, .loc, ...) or a known instruction, after labels and a predicate. */
static int known_statement(const char *p, const char *end) {
  p = skip_labels(p, end);
  if (p < end && *p == '@') /* guard predicate */
    while (p < end && !blank(*p)) p++;
  p = skip_blanks(p, end);
  if (p == end || *p == '.') return 1;
  const char *op = p;
  while (p < end && ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')
                     || *p == '_'))
    p++;
  if (p < end && *p != '.' && !blank(*p)) return 0;
  for (size_t i = 0; i < sizeof opcodes / sizeof *opcodes; i++)
    if (strlen(opcodes[i]) == (size_t)(p - op)
        && !memcmp(opcodes[i], op, (size_t)(p - op)))
      return 1;
  return 0;
}

/* Whether the word w (".entry") occurs in [p, end) between blanks. */
static int has_word(const char *p, const char *end, const char *w) {
  size_t n = strlen(w);
  for (; (size_t)(end - p) >= n; p++)
    if (!memcmp(p, w, n) && (p + n == end || blank(p[n]) || p[n] == '('))
      return 1;
  return 0;
}

/* Copies PTX text with its comments and strings blanked out, line breaks
   kept, so that braces and semicolons in them do not count. */
static char *uncomment(const char *text) {
  size_t n = strlen(text);
  char *s = malloc(n + 1);
  if (!s) return NULL;
  memcpy(s, text, n + 1);
  for (char *p = s; *p; ) {
    if (p[0] == '/' && p[1] == '/') {
      while (*p && *p != '\n') *p++ = ' ';
    } else if (p[0] == '/' && p[1] == '*') {
      *p++ = ' ', *p++ = ' ';
      while (*p && !(p[0] == '*' && p[1] == '/')) {
        if (*p != '\n') *p = ' ';
        p++;
      }
      if (*p) *p++ = ' ', *p++ = ' ';
    } else if (*p == '"') {
      do *p++ = ' '; while (*p && *p != '"' && *p != '\n');
      if (*p == '"') *p++ = ' ';
    } else {
      p++;
    }
  }
  return s;
}

static int line_of(const char *text, const char *p) {
  int line = 1;
  for (; text < p; text++) line += *text == '\n';
  return line;
}

/* Checks that every statement of every .entry and .func body is a known
   instruction, as the JIT would; the reason goes into msg. */
static int check_bodies(const char *s, char *msg, size_t nmsg) {
  const char *header = s, *stmt = s;
  int depth = 0, body = 0;
  for (const char *p = s; *p; p++) {
    if (!depth) {
      if (*p == ';' || *p == '}') header = p + 1;
      if (*p != '{') continue;
      body = !memchr(header, '=', (size_t)(p - header))
             && (has_word(header, p, ".entry") || has_word(header, p, ".func"));
      depth = 1;
      stmt = p + 1;
      continue;
    }
    if (*p == '{' && skip_labels(stmt, p) != p) { /* a vector operand */
      while (p[1] && p[1] != '}') p++;
      if (p[1]) p++; /* at its '}' */
      continue;
    }
    if (*p != '{' && *p != '}' && *p != ';') continue;
    if (body && !known_statement(stmt, p)) {
      const char *op = skip_labels(stmt, p);
      if (op < p && *op == '@')
        while (op < p && !blank(*op)) op++;
      op = skip_blanks(op, p);
      int len = 0;
      while (op + len < p && ident(op[len]) && len < 40) len++;
      snprintf(msg, nmsg, "ptxas application ptx input, line %d; error   : "
               "Not a name of any known instruction: '%.*s'",
               line_of(s, op), len, op);
      return 0;
    }
    depth += (*p == '{') - (*p == '}');
    stmt = p + 1;
    if (!depth) header = p + 1;
  }
  return 1;
}

static char reason[200]; /* why the last PTX failed to load */

/* Adds the .entry functions of comment-free PTX text to m. */
static CUresult collect_entries(CUmodule m, const char *text,
                                const char **why) {
  for (const char *p = text; (p = strstr(p, ".entry")); ) {
    p += 6;
    if ((p - 6 > text && !blank(p[-7])) || !blank(*p)) continue;
    while (blank(*p)) p++;
    const char *name = p;
    while (ident(*p)) p++;
    int len = (int)(p - name);
    const char *syntax = "ptxas application ptx input, line %d; fatal   : "
                         "Parsing error: %s of .entry '%.*s'";
    if (!len) {
      snprintf(reason, sizeof reason, syntax, line_of(text, name), "no name",
               0, "");
      return CUDA_ERROR_INVALID_PTX;
    }
    while (blank(*p)) p++;
    size_t n = 0, cap = 0, *pair = NULL;
    if (*p == '(') {
      const char *close = p + 1;
      for (int depth = 1; depth; close++) {
        if (!*close) {
          snprintf(reason, sizeof reason, syntax, line_of(text, name),
                   "unbalanced parameter list", len, name);
          return CUDA_ERROR_INVALID_PTX;
        }
        depth += (*close == '(') - (*close == ')');
      }
      close--; /* at the matching ')' */
      for (const char *q = p + 1; q < close; n++) {
        const char *comma = memchr(q, ',', (size_t)(close - q));
        const char *end = comma ? comma : close;
        if (n == cap) {
          cap = cap ? 2 * cap : 8;
          size_t *v = realloc(pair, 2 * cap * sizeof *v);
          if (!v) {
            free(pair);
            return *why = "out of memory", CUDA_ERROR_OUT_OF_MEMORY;
          }
          pair = v;
        }
        if (!ptx_param(q, end, &pair[2 * n], &pair[2 * n + 1])) {
          const char *s = q;
          while (s < end && blank(*s)) s++;
          if (s == end && !comma && !n) break; /* "( )" */
          free(pair);
          snprintf(reason, sizeof reason, syntax, line_of(text, q),
                   "malformed .param", len, name);
          return CUDA_ERROR_INVALID_PTX;
        }
        q = comma ? comma + 1 : close;
      }
      p = close + 1;
    }
    CUfunction f = add_function(m, name, (size_t)len, 1, n, pair);
    free(pair);
    if (!f) return *why = "out of memory", CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

/* Loads NUL-terminated PTX text into m. Returns CUDA_ERROR_INVALID_PTX with
   the JIT's kind of reason in *why where the JIT would fail. */
static CUresult load_ptx(CUmodule m, const char *text, const char **why) {
  *why = reason;
  if (!strstr(text, ".target")) {
    snprintf(reason, sizeof reason, "ptxas fatal   : Missing .target "
             "directive at start of file 'application ptx input'");
    return CUDA_ERROR_INVALID_PTX;
  }
  char *plain = uncomment(text);
  if (!plain) return *why = "out of memory", CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = check_bodies(plain, reason, sizeof reason)
                 ? collect_entries(m, plain, why)
                 : CUDA_ERROR_INVALID_PTX;
  free(plain);
#ifdef CUDA_SIM
  if (!r && !(m->sim = sim_load(text, reason, sizeof reason)))
    r = strcmp(reason, "out of memory") ? CUDA_ERROR_INVALID_PTX
                                        : CUDA_ERROR_OUT_OF_MEMORY;
  for (size_t i = 0; !r && i < m->nfuncs; i++)
    m->funcs[i]->sim = sim_kernel_find(m->sim, m->funcs[i]->name);
#endif
  return r;
}

static uint64_t rd_le(const unsigned char *p, int n) {
  uint64_t v = 0;
  while (n--) v = v << 8 | p[n];
  return v;
}

/* Length of a little-endian ELF64 image: the furthest of its headers and
   sections. Zero when it is not one (or claims 4 GiB or more). */
static size_t elf_size(const unsigned char *p) {
  const uint64_t most = (uint64_t)1 << 32;
  if (p[4] != 2 || p[5] != 1 || p[6] != 1) return 0; /* 64-bit, LE, v1 */
  uint64_t phoff = rd_le(p + 0x20, 8), shoff = rd_le(p + 0x28, 8);
  uint64_t phsz = rd_le(p + 0x36, 2), phn = rd_le(p + 0x38, 2);
  uint64_t shsz = rd_le(p + 0x3a, 2), shn = rd_le(p + 0x3c, 2);
  if (phoff >= most || shoff >= most) return 0;
  uint64_t end = 0x40;
  if (phoff + phn * phsz > end) end = phoff + phn * phsz;
  if (shoff + shn * shsz > end) end = shoff + shn * shsz;
  for (uint64_t i = 0; shoff && shsz >= 0x28 && i < shn; i++) {
    const unsigned char *sh = p + shoff + i * shsz;
    uint64_t off = rd_le(sh + 0x18, 8), size = rd_le(sh + 0x20, 8);
    if (rd_le(sh + 4, 4) != 8 /* SHT_NOBITS */ && off + size > end)
      end = off + size;
  }
  return end < ((uint64_t)1 << 32) ? (size_t)end : 0;
}

/* Length of a fatbin: its header (magic, version, header size, fat size). */
static size_t fatbin_size(const unsigned char *p) {
  uint64_t header = rd_le(p + 6, 2), body = rd_le(p + 8, 8);
  return header >= 16 && body < ((uint64_t)1 << 32) ? (size_t)(header + body)
                                                   : 0;
}

/* Whether name occurs in the binary image as a whole NUL-terminated string. */
static int image_has(CUmodule m, const char *name) {
  size_t len = strlen(name) + 1;
  const unsigned char *p = m->image, *end = m->image + m->nimage;
  while (len <= (size_t)(end - p)) {
    const unsigned char *hit = memchr(p, name[0], (size_t)(end - p) - len + 1);
    if (!hit) return 0;
    if ((hit == m->image || hit[-1] == '\0') && !memcmp(hit, name, len))
      return 1;
    p = hit + 1;
  }
  return 0;
}

/* Text as a PTX file holds it: printable bytes and blanks up to a NUL. */
static int is_text(const unsigned char *p) {
  if (!*p) return 0;
  for (; *p; p++)
    if ((*p < 0x20 && !blank(*p)) || *p == 0x7f) return 0;
  return 1;
}

/* Writes the reason of a failed load ("" after success) where
   CU_JIT_ERROR_LOG_BUFFER asks, and its length back into
   CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, as the driver does. */
static void jit_log(unsigned n, const CUjit_option *options, void **values,
                    const char *why) {
  char *buf = NULL;
  size_t size = 0;
  unsigned at = 0;
  for (unsigned i = 0; i < n; i++) {
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER) buf = values[i];
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
      size = (uintptr_t)values[i], at = i;
  }
  if (!buf || !size) return;
  snprintf(buf, size, "%s", why);
  values[at] = (void *)(uintptr_t)strlen(buf);
}

/* -- work: kernel launches, copies and memsets ---------------------------- */

/* One unit of stream work, as run at once or held by a graph node. */
typedef struct op {
  CUgraphNodeType type;     /* KERNEL, MEMCPY or MEMSET */
  CUfunction f;             /* kernel */
  unsigned grid[3], block[3], shared;
  unsigned char *args;      /* owned copy of f->argbytes parameter bytes */
  CUdeviceptr dst, src;     /* memcpy and memset: device memory, unless */
  void *hdst;               /* memcpy: ... host memory takes a side; it is */
  const void *hsrc;         /* read and written when the copy runs */
  size_t bytes;             /* memcpy */
  size_t pitch, width, height; /* memset: height rows of width elements */
  unsigned value, elem;     /* memset: the element and its size in bytes */
  CUgraphConditionalNodeType ctype; /* CONDITIONAL: if, while or switch */
  CUgraphConditionalHandle handle;  /* CONDITIONAL */
  unsigned nbodies;         /* CONDITIONAL: its bodies; GRAPH: 1, the child */
  struct CUgraph_st **bodies; /* a node's: owned body graphs */
  struct plan *plans;       /* an instantiated node's: owned body plans */
  int disabled;             /* an instantiated node's: cuGraphNodeSetEnabled */
  CUhostFn fn;              /* HOST: cuLaunchHostFunc's function and data */
  void *data;
} op;

static unsigned char shared_mem[SHARED_OPTIN];

/* Runs every thread of the grid, block by block; a fault makes the context
   sticky and stops the kernel. */
#ifdef CUDA_SIM
static void run_sim(const op *o);
#endif
static void run_kernel(const op *o) {
#ifdef CUDA_SIM
  if (o->f->sim) { /* always: launches need it */
    run_sim(o);
    return;
  }
#endif
  const kimpl *k = o->f->impl;
  if (!k->body[0]) return;
  kctx c = {o->args, o->f->off, {0}, {0}, {0}, {0}, shared_mem, o->shared,
            CUDA_SUCCESS};
  memcpy(c.grid, o->grid, sizeof c.grid);
  memcpy(c.block, o->block, sizeof c.block);
  unsigned *b = c.bid, *t = c.tid;
  for (b[2] = 0; b[2] < c.grid[2]; b[2]++)
    for (b[1] = 0; b[1] < c.grid[1]; b[1]++)
      for (b[0] = 0; b[0] < c.grid[0]; b[0]++) {
        memset(shared_mem, 0xCD, o->shared); /* shared memory is not zeroed */
        for (int phase = 0; phase < 2 && k->body[phase]; phase++)
          for (t[2] = 0; t[2] < c.block[2]; t[2]++)
            for (t[1] = 0; t[1] < c.block[1]; t[1]++)
              for (t[0] = 0; t[0] < c.block[0]; t[0]++) {
                k->body[phase](&c);
                if (c.fault) {
                  sticky = c.fault;
                  return;
                }
              }
      }
}

static CUresult run_memory_node(const op *o);

/* Checks o's memory ranges and, unless dry, does it. A kernel's accesses are
   checked as it runs: their faults are sticky, not returned. */
static CUresult run_op(const op *o, int dry) {
  if (o->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC
      || o->type == CU_GRAPH_NODE_TYPE_MEM_FREE)
    return dry ? CUDA_SUCCESS : run_memory_node(o);
  if (o->type == CU_GRAPH_NODE_TYPE_KERNEL) {
    if (!dry) run_kernel(o);
    return CUDA_SUCCESS;
  }
  if (o->type == CU_GRAPH_NODE_TYPE_HOST) {
    if (!dry) o->fn(o->data);
    return CUDA_SUCCESS;
  }
  if (o->type == CU_GRAPH_NODE_TYPE_MEMCPY) {
    void *d = o->hdst ? o->hdst : dev_range(o->dst, o->bytes);
    const void *s = o->hsrc ? o->hsrc : dev_range(o->src, o->bytes);
    if (!d || !s) return CUDA_ERROR_INVALID_VALUE;
    if (!dry) memmove(d, s, o->bytes);
    return CUDA_SUCCESS;
  }
  for (size_t r = 0; r < o->height; r++) {
    unsigned char *d = dev_range(o->dst + r * o->pitch, o->width * o->elem);
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; !dry && i < o->width; i++)
      memcpy(d + i * o->elem, &o->value, o->elem); /* little-endian host */
  }
  return CUDA_SUCCESS;
}

static int copy_op(op *dst, const op *src) {
  *dst = *src;
  if (src->type != CU_GRAPH_NODE_TYPE_KERNEL || !src->f->argbytes) return 0;
  if (!(dst->args = malloc(src->f->argbytes))) return 1;
  memcpy(dst->args, src->args, src->f->argbytes);
  return 0;
}

/* -- graphs --------------------------------------------------------------- */

struct CUgraphNode_st {
  op op;
  struct CUgraph_st *graph; /* the graph it belongs to */
  nodeset deps;   /* nodes of the same graph, each added before this one */
  size_t idx;     /* position in the graph */
  void **argv;    /* a kernel's parameters as cuGraphKernelNodeGetParams
                     gives them: pointers into op.args, made on demand */
};

/* A conditional handle, made in a graph for a node of it or of a body;
   value is the instantiated graph's. */
typedef struct cond {
  CUgraphConditionalHandle id; /* unique in the process; never 0 */
  unsigned dflt, flags, value;
  int used;                 /* a node has it */
} cond;

/* Nodes in the order they were added, which is a topological order. A body
   graph (of a conditional or child graph node) has the graph of that node
   as parent. */
struct CUgraph_st {
  obj h;
  nodeset nodes;
  struct CUgraph_st *parent;
  cond *conds;              /* handles made in this graph */
  size_t nconds;
};

static void free_graph(CUgraph g) {
  for (size_t i = 0; i < g->nodes.n; i++) {
    op *o = &g->nodes.v[i]->op;
    for (unsigned j = 0; o->bodies && j < o->nbodies; j++)
      if (o->bodies[j]) free_graph(o->bodies[j]);
    free(o->bodies);
    free(o->args);
    free(g->nodes.v[i]->argv);
    free(g->nodes.v[i]->deps.v);
    free(g->nodes.v[i]);
  }
  free(g->nodes.v);
  free(g->conds);
  free_obj(g);
}

/* Adds a node running o (whose args it takes) after deps. */
static CUgraphNode add_node(CUgraph g, const op *o, const nodeset *deps) {
  CUgraphNode n = calloc(1, sizeof *n);
  if (!n || set_union(&n->deps, deps) || set_push(&g->nodes, n, 1)) {
    if (n) free(n->deps.v);
    free(n);
    return NULL;
  }
  n->op = *o;
  n->idx = g->nodes.n - 1;
  n->graph = g;
  return n;
}

/* Dependencies of every node as sorted indices: node i's are
   dep[start[i] .. start[i + 1]). */
typedef struct edges { size_t *start, *dep; } edges;

static int cmp_size(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return (x > y) - (x < y);
}

static int make_edges(CUgraph g, edges *e) {
  size_t n = g->nodes.n, total = 0;
  for (size_t i = 0; i < n; i++) total += g->nodes.v[i]->deps.n;
  e->start = malloc((n + 1) * sizeof *e->start);
  e->dep = malloc((total ? total : 1) * sizeof *e->dep);
  if (!e->start || !e->dep) {
    free(e->start);
    free(e->dep);
    return 1;
  }
  e->start[0] = 0;
  for (size_t i = 0; i < n; i++) {
    const nodeset *d = &g->nodes.v[i]->deps;
    size_t *out = e->dep + e->start[i];
    for (size_t j = 0; j < d->n; j++) out[j] = d->v[j]->idx;
    qsort(out, d->n, sizeof *out, cmp_size);
    e->start[i + 1] = e->start[i] + d->n;
  }
  return 0;
}

/* An instantiated graph, or body: copies of the nodes' work and edges. */
typedef struct plan {
  size_t n;
  op *ops;        /* in topological order */
  edges e;
} plan;

static void free_plan(plan *p) {
  for (size_t i = 0; i < p->n; i++) {
    op *o = &p->ops[i];
    for (unsigned j = 0; o->plans && j < o->nbodies; j++)
      free_plan(&o->plans[j]);
    free(o->plans);
    free(o->args);
  }
  free(p->ops);
  free(p->e.start);
  free(p->e.dep);
  memset(p, 0, sizeof *p);
}

/* Copies g's nodes into p, bodies too. Nonzero when out of memory. */
static int build_plan(plan *p, CUgraph g) {
  size_t n = g->nodes.n;
  memset(p, 0, sizeof *p);
  if (!(p->ops = calloc(n ? n : 1, sizeof *p->ops)) || make_edges(g, &p->e)) {
    free(p->ops);
    p->ops = NULL;
    return 1;
  }
  for (; p->n < n; p->n++) {
    op *o = &p->ops[p->n];
    const op *src = &g->nodes.v[p->n]->op;
    if (copy_op(o, src)) return free_plan(p), 1;
    o->bodies = NULL;
    o->plans = NULL;
    if (!src->nbodies) continue;
    if (!(o->plans = calloc(src->nbodies, sizeof *o->plans))) {
      p->n++;
      return free_plan(p), 1;
    }
    for (unsigned j = 0; j < src->nbodies; j++)
      if (build_plan(&o->plans[j], src->bodies[j])) {
        p->n++;
        return free_plan(p), 1;
      }
  }
  return 0;
}

/* An instantiated graph owns its plan and the values of its handles. */
struct CUgraphExec_st {
  obj h;
  CUgraph from;   /* the graph instantiated: its nodes name the plan's */
  int auto_free;  /* AUTO_FREE_ON_LAUNCH: a launch frees what the last one
                     allocated and left */
  plan p;
  cond *conds;
  size_t nconds;
};

static void free_exec(CUgraphExec x) {
  free_plan(&x->p);
  free(x->conds);
  free_obj(x);
}

/* Appends the handles of g and of its bodies to *v (n of them, room for
   cap). Nonzero when out of memory. */
static int gather_conds(CUgraph g, cond **v, size_t *n, size_t *cap) {
  for (size_t i = 0; i < g->nconds; i++) {
    if (*n == *cap) {
      size_t c = *cap ? 2 * *cap : 4;
      cond *w = realloc(*v, c * sizeof *w);
      if (!w) return 1;
      *v = w;
      *cap = c;
    }
    (*v)[*n] = g->conds[i];
    (*v)[(*n)++].value = g->conds[i].dflt;
  }
  for (size_t i = 0; i < g->nodes.n; i++) {
    const op *o = &g->nodes.v[i]->op;
    for (unsigned j = 0; j < o->nbodies; j++)
      if (gather_conds(o->bodies[j], v, n, cap)) return 1;
  }
  return 0;
}

/* Whether g or a body of it has a conditional node. */
static int has_conditional(CUgraph g) {
  for (size_t i = 0; i < g->nodes.n; i++) {
    const op *o = &g->nodes.v[i]->op;
    if (o->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) return 1;
    for (unsigned j = 0; j < o->nbodies; j++)
      if (has_conditional(o->bodies[j])) return 1;
  }
  return 0;
}

/* -- streams, events and capture ------------------------------------------ */

/* A capture sequence: begun on origin, joined by the streams that waited on
   its events. Its nodes go into g. */
typedef struct capture {
  struct capture *next;
  CUstream origin;
  CUstreamCaptureMode mode;
  int invalid;          /* a rule was broken: ending it yields no graph */
  unsigned long id;
  CUgraph g;
  int owned;            /* g was made by the capture (not ...ToGraph) */
  nodeset orphans;      /* tips of joined streams destroyed meanwhile */
} capture;

static capture *captures; /* in progress */
static unsigned long capture_ids;

struct CUstream_st {
  obj h;
  unsigned flags;
  capture *cap;         /* the capture this stream takes part in, or NULL */
  nodeset tips;         /* while capturing: what new work depends on; has
                           room for one node from creation on */
};

struct CUevent_st {
  obj h;
  unsigned flags;
  int recorded;         /* recorded outside capture: t is its time */
  struct timespec t;
  unsigned long cap_id; /* last recorded in this capture (0: not in one); it
                           stays set after the capture */
  nodeset tips;         /* that stream's tips then */
};

static capture *find_capture(unsigned long id) {
  capture *c = captures;
  while (c && c->id != id) c = c->next;
  return c;
}

#define EACH_STREAM(s)                                                      \
  for (obj *o_ = live.next; o_ != &live; o_ = o_->next)                     \
    if (o_->kind == O_STREAM && ((s) = (CUstream)o_))

/* Ends c: its streams leave capture mode; its graph is the caller's. */
static void end_capture(capture *c) {
  CUstream s;
  EACH_STREAM(s) if (s->cap == c) {
    s->cap = NULL;
    s->tips.n = 0;
  }
  capture **p = &captures;
  while (*p != c) p = &(*p)->next;
  *p = c->next;
  free(c->orphans.v);
  free(c);
}

/* Calls the driver deems potentially unsafe during capture (allocation,
   unloading, waiting on or querying other work, instantiation): refused
   while a capture not begun RELAXED is in progress, which is then
   invalidated. */
static CUresult unsafe_call(void) {
  CUresult r = CUDA_SUCCESS;
  for (capture *c = captures; c; c = c->next)
    if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
      c->invalid = 1;
      r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
  return r;
}

/* The legacy stream waits on every blocking stream, so it cannot be used
   while one captures (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT); work sent to it
   invalidates those captures. */
static CUresult legacy_blocked(int invalidate) {
  CUresult r = CUDA_SUCCESS;
  CUstream s;
  EACH_STREAM(s) if (s->cap && !(s->flags & CU_STREAM_NON_BLOCKING)) {
    if (invalidate) s->cap->invalid = 1;
    r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  }
  return r;
}

/* NULL and CU_STREAM_LEGACY are the legacy stream. */
static CUstream stream_of(CUstream s) {
  return s == CU_STREAM_LEGACY ? NULL : s;
}

/* Whether work may be sent to s: a stream of the current context. */
static CUresult stream_usable(CUstream s) {
  if (!s) return legacy_blocked(1);
  if (s->h.dev != cur_dev()) return CUDA_ERROR_INVALID_HANDLE;
  if (s->cap && s->cap->invalid) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  return CUDA_SUCCESS;
}

/* Waiting on or querying a stream: refused for a capturing one, whose
   capture is invalidated; an unsafe call for any other. */
static CUresult no_sync(CUstream s) {
  CUresult r = s ? CUDA_SUCCESS : legacy_blocked(1);
  if (r) return r;
  if (!s || !s->cap) return unsafe_call();
  s->cap->invalid = 1;
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* Runs o on s now or, while s captures, records it as a node after s's tips.
   Takes o->args either way. */
static CUresult submit(CUstream s, op *o) {
  CUresult r = stream_usable(s);
  capture_check = s && s->cap;
  if (!r) r = run_op(o, 1);
  capture_check = 0;
  if (!r && s && s->cap) {
    CUgraphNode n = add_node(s->cap->g, o, &s->tips);
    if (n) {
      s->tips.n = 0;
      set_push(&s->tips, n, 0); /* cannot fail: tips has room for one */
      return CUDA_SUCCESS;
    }
    r = CUDA_ERROR_OUT_OF_MEMORY;
  } else if (!r) {
    r = run_op(o, 0);
  }
  free(o->args);
  return r;
}

static void free_stream(CUstream s) {
  free(s->tips.v);
  free_obj(s);
}

static void free_event(CUevent e) {
  free(e->tips.v);
  free_obj(e);
}

/* Frees everything made in device dev's context, which is being destroyed:
   all but the graphs, which belong to no context. */
static void destroy_context(int dev) {
  for (capture *c = captures, *next; c; c = next) {
    next = c->next;
    if (c->origin && c->origin->h.dev != dev) continue;
    if (c->owned) free_graph(c->g);
    end_capture(c);
  }
  memset(primary[dev].peer, 0, sizeof primary[dev].peer);
  for (int d = 0; d < ndevices; d++) primary[d].peer[dev] = 0;
  for (obj *o = live.next, *next; o != &live; o = next) {
    next = o->next;
    if (o->dev != dev) continue;
    switch (o->kind) {
    case O_STREAM: free_stream((CUstream)o); break;
    case O_EVENT: free_event((CUevent)o); break;
    case O_MODULE: free_module((CUmodule)o); break;
    case O_EXEC: free_exec((CUgraphExec)o); break;
    default: break;
    }
  }
  free_all_memory(dev);
}

/* -- initialization, device, context -------------------------------------- */

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
  mem_limit = limit && *limit && !*end && v ? (size_t)v : DEVICE_MEMORY;
  const char *n = getenv("CUDA_DOUBLE_DEVICES");
  v = n && *n ? strtoull(n, &end, 10) : 1;
  ndevices = n && *n && !*end && v >= 1 && v <= MAX_DEVICES ? (int)v : 1;
  const char *np = getenv("CUDA_DOUBLE_NO_PEER");
  no_peer = np && *np && strcmp(np, "0");
  for (int d = 0; d < MAX_DEVICES; d++) primary[d].dev = d;
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
  CUresult r = enter_device(0);
  if (r) return r;
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = ndevices;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal) {
  ENTRY(cuDeviceGet);
  CUresult r = enter_device(ordinal);
  if (r) return r;
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev) {
  ENTRY(cuDeviceGetName);
  CUresult r = enter_device(dev);
  if (r) return r;
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  snprintf(name, (size_t)len, "%s", DEVICE_NAME);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib,
                                      CUdevice dev) {
  ENTRY(cuDeviceGetAttribute);
  CUresult r = enter_device(dev);
  if (r) return r;
  if (!pi || attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
    return CUDA_ERROR_INVALID_VALUE;
  *pi = attribute(attrib);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem(size_t *bytes, CUdevice dev) {
  ENTRY(cuDeviceTotalMem);
  CUresult r = enter_device(dev);
  if (r) return r;
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  *bytes = mem_limit;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  ENTRY(cuDevicePrimaryCtxRetain);
  CUresult r = enter_device(dev);
  if (r) return r;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (!primary[dev].refs && sticky) return sticky; /* no new context */
  primary[dev].refs++;
  *pctx = &primary[dev];
  return CUDA_SUCCESS;
}

/* Works after a sticky error too. */
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) {
  ENTRY(cuDevicePrimaryCtxRelease);
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || dev >= ndevices) return CUDA_ERROR_INVALID_DEVICE;
  if (!primary[dev].refs) return CUDA_ERROR_INVALID_CONTEXT;
  if (!--primary[dev].refs) destroy_context(dev);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  ENTRY(cuCtxSetCurrent);
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx && !is_primary(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  current = ctx;
  return CUDA_SUCCESS;
}

/* Waits for all work, which is done; refused during any capture. */
CUresult CUDAAPI cuCtxSynchronize(void) {
  ENTRY(cuCtxSynchronize);
  CUresult r = enter();
  if (r) return r;
  for (capture *c = captures; c; c = c->next) {
    c->invalid = 1;
    r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return r;
}

/* -- memory --------------------------------------------------------------- */

CUresult CUDAAPI cuMemGetInfo(size_t *free_bytes, size_t *total) {
  ENTRY(cuMemGetInfo);
  CUresult r = enter();
  if (r) return r;
  if (!free_bytes || !total) return CUDA_ERROR_INVALID_VALUE;
  *free_bytes = mem_limit - mem_used[cur_dev()];
  *total = mem_limit;
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
   is mapped only when its allocation node runs. */
static CUresult alloc_span(CUdeviceptr *dptr, size_t bytesize, int kind) {
  if (bytesize > mem_limit - mem_used[cur_dev()]
      || bytesize > SIZE_MAX - ALLOC_ALIGN)
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (nspans == cspans) {
    size_t cap = cspans ? 2 * cspans : 64;
    span *v = realloc(spans, cap * sizeof *v);
    if (!v) return CUDA_ERROR_OUT_OF_MEMORY;
    spans = v;
    cspans = cap;
  }
  size_t rounded = (bytesize + ALLOC_ALIGN - 1) / ALLOC_ALIGN * ALLOC_ALIGN;
  void *p = aligned_alloc(ALLOC_ALIGN, rounded);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  memset(p, 0xCD, rounded); /* device memory is not zeroed */
  size_t i = spans_upto((uintptr_t)p);
  memmove(spans + i + 1, spans + i, (nspans - i) * sizeof *spans);
  spans[i] = (span){(uintptr_t)p, bytesize, kind, kind != SPAN_GRAPH,
                    cur_dev()};
  nspans++;
  mem_used[cur_dev()] += bytesize;
  if (kind != SPAN_GRAPH) map_span(&spans[i], 1);
  *dptr = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

/* The span that begins at dptr, or -1. */
static long span_at(CUdeviceptr dptr) {
  size_t i = spans_upto((uintptr_t)dptr);
  return i && spans[i - 1].base == (uintptr_t)dptr ? (long)i - 1 : -1;
}

static CUresult free_span(CUdeviceptr dptr) {
  long i = span_at(dptr);
  if (i < 0 || !spans[i].mapped) return CUDA_ERROR_INVALID_VALUE;
  map_span(&spans[i], 0);
  if (spans[i].kind == SPAN_GRAPH) return CUDA_SUCCESS;
  free((void *)spans[i].base);
  mem_used[spans[i].dev] -= spans[i].size;
  memmove(spans + i, spans + i + 1, (nspans - (size_t)i - 1) * sizeof *spans);
  nspans--;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytesize) {
  ENTRY(cuMemAlloc);
  CUresult r = enter();
  if (r) return r;
  if (!dptr || !bytesize) return CUDA_ERROR_INVALID_VALUE;
  if ((r = unsafe_call())) return r;
  return alloc_span(dptr, bytesize, SPAN_PLAIN);
}

/* Frees any kind of device memory, graph allocations too. */
CUresult CUDAAPI cuMemFree(CUdeviceptr dptr) {
  ENTRY(cuMemFree);
  CUresult r = enter();
  if (r || !dptr) return r;
  if ((r = unsafe_call())) return r;
  return free_span(dptr);
}

CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize,
                                unsigned int Flags) {
  ENTRY(cuMemHostAlloc);
  CUresult r = enter();
  if (r) return r;
  if (!pp || !bytesize || (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE |
                                               CU_MEMHOSTALLOC_DEVICEMAP |
                                               CU_MEMHOSTALLOC_WRITECOMBINED)))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = unsafe_call())) return r;
  if (nhosts == chosts) {
    size_t cap = chosts ? 2 * chosts : 16;
    void **v = realloc(hosts, cap * sizeof *v);
    if (!v) return CUDA_ERROR_OUT_OF_MEMORY;
    hosts = v;
    chosts = cap;
  }
  void *p = malloc(bytesize);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  memset(p, 0xCD, bytesize); /* not zeroed */
  hosts[nhosts++] = p;
  *pp = p;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFreeHost(void *p) {
  ENTRY(cuMemFreeHost);
  CUresult r = enter();
  if (r) return r;
  if ((r = unsafe_call())) return r;
  for (size_t i = 0; i < nhosts; i++)
    if (hosts[i] == p) {
      free(p);
      hosts[i] = hosts[--nhosts];
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_VALUE;
}

/* A copy; a NULL host pointer stands for device memory, so a NULL host
   side fails the range check. A copy of nothing is no work. */
static CUresult memcpy_op(CUdeviceptr dst, void *hdst, CUdeviceptr src,
                          const void *hsrc, size_t n, CUstream s) {
  CUresult r = enter();
  if (r) return r;
  if (!n) return stream_usable(stream_of(s));
  op o = {.type = CU_GRAPH_NODE_TYPE_MEMCPY, .dst = dst, .hdst = hdst,
          .src = src, .hsrc = hsrc, .bytes = n};
  return submit(stream_of(s), &o);
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

/* The device of the allocation that holds [p, p + n), or -1. */
static int dev_of(CUdeviceptr p, size_t n) {
  size_t i = spans_upto((uintptr_t)p);
  if (!i || !dev_range(p, n ? n : 1)) return -1;
  return spans[i - 1].dev;
}

/* Each pointer must lie in memory of its context's device; no peer access
   is needed. */
CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext,
                                   CUdeviceptr srcDevice, CUcontext srcContext,
                                   size_t ByteCount, CUstream hStream) {
  ENTRY(cuMemcpyPeerAsync);
  CUresult r = enter();
  if (r) return r;
  if (!is_primary(dstContext) || !is_primary(srcContext) ||
      !dstContext->refs || !srcContext->refs)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (ByteCount && (dev_of(dstDevice, ByteCount) != dstContext->dev ||
                    dev_of(srcDevice, ByteCount) != srcContext->dev))
    return CUDA_ERROR_INVALID_VALUE;
  CUstream s = stream_of(hStream);
  if (s && s->cap) { /* as the driver: not capturable, and the capture fails */
    s->cap->invalid = 1;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return memcpy_op(dstDevice, NULL, srcDevice, NULL, ByteCount, hStream);
}

/* -- peer access ------------------------------------------------------------ */

CUresult CUDAAPI cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev,
                                       CUdevice peerDev) {
  ENTRY(cuDeviceCanAccessPeer);
  CUresult r = enter_device(dev);
  if (!r) r = enter_device(peerDev);
  if (r) return r;
  if (!canAccessPeer) return CUDA_ERROR_INVALID_VALUE;
  *canAccessPeer = dev != peerDev && !no_peer;
  return CUDA_SUCCESS;
}

/* Access from the current context to memory of peerContext's device. */
CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peerContext,
                                       unsigned int Flags) {
  ENTRY(cuCtxEnablePeerAccess);
  CUresult r = enter();
  if (r) return r;
  if (Flags) return CUDA_ERROR_INVALID_VALUE;
  if (!is_primary(peerContext) || !peerContext->refs ||
      peerContext == current)
    return CUDA_ERROR_INVALID_DEVICE;
  if (no_peer) return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
  if (current->peer[peerContext->dev])
    return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  current->peer[peerContext->dev] = 1;
  return CUDA_SUCCESS;
}

/* -- host functions ------------------------------------------------------------ */

/* fn(userData) runs in stream order: at once here, or as a host node of the
   graph a capture records. */
CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn,
                                  void *userData) {
  ENTRY(cuLaunchHostFunc);
  CUresult r = enter();
  if (r) return r;
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  op o = {.type = CU_GRAPH_NODE_TYPE_HOST, .fn = fn, .data = userData};
  return submit(stream_of(hStream), &o);
}

static CUresult memset_op(CUdeviceptr dst, size_t pitch, unsigned value,
                          unsigned elem, size_t width, size_t height,
                          CUstream s) {
  CUresult r = enter();
  if (r) return r;
  if (!width || !height) return stream_usable(stream_of(s));
  if (dst % elem || (height > 1 && pitch < width * elem))
    return CUDA_ERROR_INVALID_VALUE;
  op o = {.type = CU_GRAPH_NODE_TYPE_MEMSET, .dst = dst, .pitch = pitch,
          .width = width, .height = height, .value = value, .elem = elem};
  return submit(stream_of(s), &o);
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

/* -- stream-ordered and graph memory ------------------------------------- */

static CUresult graph_memory_node(CUstream s, CUgraphNodeType type,
                                  CUdeviceptr p, size_t bytes);

/* On a capturing stream an allocation node whose memory the double makes
   at once (its address is fixed from capture on, as the driver's is); else
   memory of the device's default pool. */
CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize,
                                 CUstream hStream) {
  ENTRY(cuMemAllocAsync);
  CUresult r = enter();
  if (r) return r;
  CUstream s = stream_of(hStream);
  if (!dptr || !bytesize) return CUDA_ERROR_INVALID_VALUE;
  if ((r = stream_usable(s))) return r;
  if (!s || !s->cap) return alloc_span(dptr, bytesize, SPAN_POOL);
  if ((r = alloc_span(dptr, bytesize, SPAN_GRAPH))) return r;
  if ((r = graph_memory_node(s, CU_GRAPH_NODE_TYPE_MEM_ALLOC, *dptr,
                             bytesize)))
    free_span(*dptr);
  return r;
}

/* On a capturing stream a free node, of graph memory only; else frees. */
CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  ENTRY(cuMemFreeAsync);
  CUresult r = enter();
  if (r) return r;
  CUstream s = stream_of(hStream);
  if ((r = stream_usable(s))) return r;
  long i = span_at(dptr);
  if (i < 0) return CUDA_ERROR_INVALID_VALUE;
  if (!s || !s->cap) return free_span(dptr);
  if (spans[i].kind != SPAN_GRAPH) return CUDA_ERROR_INVALID_VALUE;
  return graph_memory_node(s, CU_GRAPH_NODE_TYPE_MEM_FREE, dptr,
                           spans[i].size);
}

struct CUmemPoolHandle_st { int unused; };
static struct CUmemPoolHandle_st default_pool;

CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out,
                                           CUdevice dev) {
  ENTRY(cuDeviceGetDefaultMemPool);
  CUresult r = enter_device(dev);
  if (r) return r;
  if (!pool_out) return CUDA_ERROR_INVALID_VALUE;
  *pool_out = &default_pool;
  return CUDA_SUCCESS;
}

/* The pool keeps no memory once freed: reserved is what is used. */
CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool,
                                       CUmemPool_attribute attr, void *value) {
  ENTRY(cuMemPoolGetAttribute);
  CUresult r = enter();
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
  CUresult r = enter();
  if (r) return r;
  return pool == &default_pool ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuDeviceGetGraphMemAttribute(CUdevice device,
                                              CUgraphMem_attribute attr,
                                              void *value) {
  ENTRY(cuDeviceGetGraphMemAttribute);
  CUresult r = enter_device(device);
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
  return enter_device(device);
}

/* -- streams -------------------------------------------------------------- */

CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags) {
  ENTRY(cuStreamCreate);
  CUresult r = enter();
  if (r) return r;
  if (!phStream || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
    return CUDA_ERROR_INVALID_VALUE;
  CUstream s = new_obj(sizeof *s, O_STREAM);
  if (!s || set_push(&s->tips, NULL, 1)) {
    if (s) free_obj(s);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  s->tips.n = 0;
  s->flags = Flags;
  *phStream = s;
  return CUDA_SUCCESS;
}

/* A joined stream that is destroyed leaves its work in the capture, never
   to be joined; the origin takes its capture with it. */
CUresult CUDAAPI cuStreamDestroy(CUstream hStream) {
  ENTRY(cuStreamDestroy);
  CUresult r = enter();
  if (r) return r;
  if (!hStream) return CUDA_ERROR_INVALID_HANDLE;
  capture *c = hStream->cap;
  if (c && c->origin == hStream) {
    if (c->owned) free_graph(c->g);
    end_capture(c);
  } else if (c && set_union(&c->orphans, &hStream->tips)) {
    c->invalid = 1; /* out of memory: the capture cannot be trusted */
  }
  free_stream(hStream);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) {
  ENTRY(cuStreamSynchronize);
  CUresult r = enter();
  return r ? r : no_sync(stream_of(hStream));
}

/* All work is done when it is sent, so a stream is never busy. */
CUresult CUDAAPI cuStreamQuery(CUstream hStream) {
  ENTRY(cuStreamQuery);
  CUresult r = enter();
  return r ? r : no_sync(stream_of(hStream));
}

CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream,
                                      CUstreamCaptureMode mode) {
  ENTRY(cuStreamBeginCapture);
  CUresult r = enter();
  if (r) return r;
  CUstream s = stream_of(hStream);
  if (!s) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL
      && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
      && mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  if (s->cap) return CUDA_ERROR_ILLEGAL_STATE;
  capture *c = calloc(1, sizeof *c);
  if (!c || !(c->g = new_obj(sizeof *c->g, O_GRAPH))) {
    free(c);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  c->origin = s;
  c->mode = mode;
  c->owned = 1;
  c->id = ++capture_ids;
  c->next = captures;
  captures = c;
  s->cap = c;
  s->tips.n = 0;
  return CUDA_SUCCESS;
}

/* Marks the nodes of from and everything they depend on (by index), with
   a stack of its own: chains of nodes can be long. */
static int mark_ancestors(const nodeset *from, unsigned char *mark) {
  nodeset todo = {NULL, 0, 0};
  int bad = set_union(&todo, from);
  while (!bad && todo.n) {
    CUgraphNode n = todo.v[--todo.n];
    mark[n->idx] = 1;
    for (size_t i = 0; i < n->deps.n && !bad; i++)
      if (!mark[n->deps.v[i]->idx]) bad = set_push(&todo, n->deps.v[i], 1);
  }
  free(todo.v);
  return bad;
}

/* Whether all work of c has been joined back into its origin: the tips of
   the other streams (and of destroyed ones) are among the origin's tips or
   their ancestors. */
static CUresult joined(capture *c) {
  unsigned char *mark = calloc(c->g->nodes.n + 1, 1);
  if (!mark || mark_ancestors(&c->origin->tips, mark)) {
    free(mark);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUresult r = CUDA_SUCCESS;
  for (size_t i = 0; i < c->orphans.n; i++)
    if (!mark[c->orphans.v[i]->idx]) r = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
  CUstream s;
  EACH_STREAM(s) if (s->cap == c)
    for (size_t i = 0; i < s->tips.n; i++)
      if (!mark[s->tips.v[i]->idx]) r = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
  free(mark);
  return r;
}

/* Ends the capture begun on hStream, however it went: its streams leave
   capture mode, and only a capture that kept the rules yields a graph (not
   kept when phGraph is NULL). Ending it from another of its streams breaks
   it instead. An injected fault ends the capture too, yielding no graph. */
CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph *phGraph) {
  ENTRY_THEN(cuStreamEndCapture);
  CUresult r = enter();
  if (r) return r;
  CUstream s = stream_of(hStream);
  if (phGraph) *phGraph = NULL;
  if (!s || !s->cap) return fault_ ? fault_ : CUDA_ERROR_ILLEGAL_STATE;
  capture *c = s->cap;
  if (c->origin != s) {
    c->invalid = 1;
    return fault_ ? fault_ : CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
  }
  /* as from another thread: the capture goes on, to be ended on its own */
  if (fault_ == CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD) return fault_;
  r = fault_ ? fault_
      : c->invalid ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : joined(c);
  if (r || !phGraph) {
    if (c->owned) free_graph(c->g);
  } else {
    *phGraph = c->g;
  }
  end_capture(c);
  return r;
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream,
                                     CUstreamCaptureStatus *captureStatus) {
  ENTRY(cuStreamIsCapturing);
  CUresult r = enter();
  if (r) return r;
  CUstream s = stream_of(hStream);
  if (!captureStatus) return CUDA_ERROR_INVALID_VALUE;
  if (!s && (r = legacy_blocked(0))) return r; /* not invalidated */
  *captureStatus = !s || !s->cap ? CU_STREAM_CAPTURE_STATUS_NONE
                   : s->cap->invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                     : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  return CUDA_SUCCESS;
}

/* Whether every one of the n nodes is a node of g, none twice. */
static int nodes_of(CUgraph g, const CUgraphNode *v, size_t n) {
  if (n && !v) return 0;
  for (size_t i = 0; i < n; i++) {
    if (!v[i] || !set_has(&g->nodes, v[i])) return 0;
    for (size_t j = 0; j < i; j++)
      if (v[j] == v[i]) return 0;
  }
  return 1;
}

/* Edge data the double has: none, or all default. */
static int default_edges(const CUgraphEdgeData *d, size_t n) {
  static const CUgraphEdgeData zero;
  for (size_t i = 0; d && i < n; i++)
    if (memcmp(&d[i], &zero, sizeof zero)) return 0;
  return 1;
}

/* Begins a capture into hGraph, whose new work depends on the given nodes
   of it; the graph stays the caller's however the capture ends. */
CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
                                             const CUgraphNode *dependencies,
                                             const CUgraphEdgeData *dependencyData,
                                             size_t numDependencies,
                                             CUstreamCaptureMode mode) {
  ENTRY(cuStreamBeginCaptureToGraph);
  CUresult r = enter();
  if (r) return r;
  CUstream s = stream_of(hStream);
  if (!s) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (!hGraph || !nodes_of(hGraph, dependencies, numDependencies)
      || !default_edges(dependencyData, numDependencies)
      || (mode != CU_STREAM_CAPTURE_MODE_GLOBAL
          && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
          && mode != CU_STREAM_CAPTURE_MODE_RELAXED))
    return CUDA_ERROR_INVALID_VALUE;
  if (s->cap) return CUDA_ERROR_ILLEGAL_STATE;
  capture *c = calloc(1, sizeof *c);
  if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
  s->tips.n = 0;
  for (size_t i = 0; i < numDependencies; i++)
    if (set_push(&s->tips, dependencies[i], 0)) {
      free(c);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  c->origin = s;
  c->mode = mode;
  c->g = hGraph;
  c->id = ++capture_ids;
  c->next = captures;
  captures = c;
  s->cap = c;
  return CUDA_SUCCESS;
}

/* The capture's state; while it is active, its id, its graph, and what
   the stream's next work will depend on (the stream's own array, valid
   until the next call on the stream). The double keeps no edge data. */
CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream hStream,
                                        CUstreamCaptureStatus *captureStatus_out,
                                        cuuint64_t *id_out, CUgraph *graph_out,
                                        const CUgraphNode **dependencies_out,
                                        const CUgraphEdgeData **edgeData_out,
                                        size_t *numDependencies_out) {
  ENTRY(cuStreamGetCaptureInfo);
  CUresult r = enter();
  if (r) return r;
  CUstream s = stream_of(hStream);
  if (!captureStatus_out || (edgeData_out && !dependencies_out))
    return CUDA_ERROR_INVALID_VALUE;
  if (!s && (r = legacy_blocked(0))) return r;
  capture *c = s ? s->cap : NULL;
  *captureStatus_out = !c ? CU_STREAM_CAPTURE_STATUS_NONE
                       : c->invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                    : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  if (!c || c->invalid) return CUDA_SUCCESS;
  if (id_out) *id_out = c->id;
  if (graph_out) *graph_out = c->g;
  if (dependencies_out) *dependencies_out = s->tips.v;
  if (edgeData_out) *edgeData_out = NULL;
  if (numDependencies_out) *numDependencies_out = s->tips.n;
  return CUDA_SUCCESS;
}

/* Adds nodes of the capture's graph to what the stream's next work depends
   on, or makes them all of it. */
CUresult CUDAAPI cuStreamUpdateCaptureDependencies(CUstream hStream,
                                                   CUgraphNode *dependencies,
                                                   const CUgraphEdgeData *dependencyData,
                                                   size_t numDependencies,
                                                   unsigned int flags) {
  ENTRY(cuStreamUpdateCaptureDependencies);
  CUresult r = enter();
  if (r) return r;
  CUstream s = stream_of(hStream);
  if (!s || !s->cap) return CUDA_ERROR_ILLEGAL_STATE;
  if (s->cap->invalid) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  if ((flags != CU_STREAM_ADD_CAPTURE_DEPENDENCIES
       && flags != CU_STREAM_SET_CAPTURE_DEPENDENCIES)
      || !nodes_of(s->cap->g, dependencies, numDependencies)
      || !default_edges(dependencyData, numDependencies))
    return CUDA_ERROR_INVALID_VALUE;
  if (flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES) s->tips.n = 0;
  for (size_t i = 0; i < numDependencies; i++)
    if (set_push(&s->tips, dependencies[i], 0))
      return CUDA_ERROR_OUT_OF_MEMORY;
  return CUDA_SUCCESS;
}

/* Orders hStream after hEvent's work. In a capture that is how streams fork
   and join: a stream that waits on an event recorded in a capture joins it
   with the event's tips; a capturing stream adds them to its own. A
   capturing stream may not wait on work outside its capture, and an event
   whose capture is over can no longer be waited on. */
CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent,
                                   unsigned int Flags) {
  ENTRY(cuStreamWaitEvent);
  CUresult r = enter();
  if (r) return r;
  CUstream s = stream_of(hStream);
  if (!hEvent) return CUDA_ERROR_INVALID_HANDLE;
  if (Flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = stream_usable(s))) return r;
  capture *mine = s ? s->cap : NULL;
  if (!hEvent->cap_id) { /* never recorded, or recorded outside capture */
    if (!mine || !hEvent->recorded) return CUDA_SUCCESS;
    mine->invalid = 1;
    return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  }
  capture *ec = find_capture(hEvent->cap_id);
  if (!ec || !s) {
    if (mine) mine->invalid = 1;
    if (ec) ec->invalid = 1; /* the legacy stream cannot join a capture */
    return ec ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_ERROR_INVALID_VALUE;
  }
  if (!mine) {
    if (ec->invalid) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (set_assign(&s->tips, &hEvent->tips)) return CUDA_ERROR_OUT_OF_MEMORY;
    s->cap = ec;
    return CUDA_SUCCESS;
  }
  if (ec != mine) {
    mine->invalid = ec->invalid = 1;
    return CUDA_ERROR_STREAM_CAPTURE_MERGE;
  }
  return set_union(&s->tips, &hEvent->tips) ? CUDA_ERROR_OUT_OF_MEMORY
                                             : CUDA_SUCCESS;
}

/* -- events --------------------------------------------------------------- */

CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags) {
  ENTRY(cuEventCreate);
  CUresult r = enter();
  if (r) return r;
  unsigned ipc = CU_EVENT_INTERPROCESS, untimed = CU_EVENT_DISABLE_TIMING;
  if (!phEvent || (Flags & ~(CU_EVENT_BLOCKING_SYNC | untimed | ipc))
      || ((Flags & ipc) && !(Flags & untimed))) /* IPC events are untimed */
    return CUDA_ERROR_INVALID_VALUE;
  CUevent e = new_obj(sizeof *e, O_EVENT);
  if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
  e->flags = Flags;
  *phEvent = e;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy(CUevent hEvent) {
  ENTRY(cuEventDestroy);
  CUresult r = enter();
  if (r) return r;
  if (!hEvent) return CUDA_ERROR_INVALID_HANDLE;
  free_event(hEvent);
  return CUDA_SUCCESS;
}

/* In a capture, keeps the stream's tips for streams that will wait on it;
   otherwise takes the time. */
CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) {
  ENTRY(cuEventRecord);
  CUresult r = enter();
  if (r) return r;
  CUstream s = stream_of(hStream);
  if (!hEvent) return CUDA_ERROR_INVALID_HANDLE;
  if ((r = stream_usable(s))) return r;
  if (s && s->cap) {
    if (set_assign(&hEvent->tips, &s->tips)) return CUDA_ERROR_OUT_OF_MEMORY;
    hEvent->cap_id = s->cap->id;
    hEvent->recorded = 0;
    return CUDA_SUCCESS;
  }
  clock_gettime(CLOCK_MONOTONIC, &hEvent->t);
  hEvent->recorded = 1;
  hEvent->cap_id = 0;
  return CUDA_SUCCESS;
}

/* Waiting on or querying an event: an unsafe call, and one that conflicts
   with the capture in which the event was last recorded (which is then
   invalidated); once that capture is broken or over, the event is invalid. */
static CUresult event_done(CUevent e) {
  CUresult r = enter();
  if (r) return r;
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  if (!e->cap_id) return unsafe_call();
  capture *c = find_capture(e->cap_id);
  if (!c || c->invalid) return CUDA_ERROR_INVALID_VALUE;
  c->invalid = 1;
  return CUDA_ERROR_CAPTURED_EVENT;
}

CUresult CUDAAPI cuEventSynchronize(CUevent hEvent) {
  ENTRY(cuEventSynchronize);
  return event_done(hEvent);
}

CUresult CUDAAPI cuEventQuery(CUevent hEvent) {
  ENTRY(cuEventQuery);
  return event_done(hEvent);
}

CUresult CUDAAPI cuEventElapsedTime(float *pMilliseconds, CUevent hStart,
                                    CUevent hEnd) {
  ENTRY(cuEventElapsedTime);
  CUresult r = enter();
  if (r) return r;
  if (!hStart || !hEnd) return CUDA_ERROR_INVALID_HANDLE;
  if (hStart->cap_id || hEnd->cap_id) return CUDA_ERROR_INVALID_VALUE;
  if (!pMilliseconds || !hStart->recorded || !hEnd->recorded
      || ((hStart->flags | hEnd->flags) & CU_EVENT_DISABLE_TIMING))
    return CUDA_ERROR_INVALID_HANDLE;
  double ms = (double)(hEnd->t.tv_sec - hStart->t.tv_sec) * 1e3
              + (double)(hEnd->t.tv_nsec - hStart->t.tv_nsec) / 1e6;
  *pMilliseconds = (float)ms;
  return CUDA_SUCCESS;
}

/* -- modules -------------------------------------------------------------- */

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *module, const void *image,
                                    unsigned int numOptions,
                                    CUjit_option *options,
                                    void **optionValues) {
  ENTRY(cuModuleLoadDataEx);
  CUresult r = enter();
  if (r) return r;
  if (!module || !image || (numOptions && (!options || !optionValues)))
    return CUDA_ERROR_INVALID_VALUE;
  const unsigned char *p = image;
  CUmodule m = new_obj(sizeof *m, O_MODULE);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  const char *why = "error   : Binary format for key='0', ident='' is not "
                    "recognized";
  if (p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F')
    m->nimage = elf_size(p);
  else if (p[0] == 0x50 && p[1] == 0xed && p[2] == 0x55 && p[3] == 0xba)
    m->nimage = fatbin_size(p);
#ifdef CUDA_SIM
  if (m->nimage) {
    char *ptx = p[0] == 0x7f ? NULL : sim_fatbin_ptx(p, m->nimage, reason,
                                                     sizeof reason);
    if (p[0] == 0x7f)
      snprintf(reason, sizeof reason, "no PTX in this image; the simulator "
               "runs PTX");
    why = reason;
    r = ptx ? load_ptx(m, ptx, &why) : CUDA_ERROR_NO_BINARY_FOR_GPU;
    free(ptx);
  } else if
#else
  if (m->nimage) {
    if (!(m->image = malloc(m->nimage))) r = CUDA_ERROR_OUT_OF_MEMORY;
    else memcpy(m->image, p, m->nimage);
  } else if
#endif
  (is_text(p) && strstr(image, ".version")) { /* PTX */
    r = load_ptx(m, image, &why);
  } else {
    r = CUDA_ERROR_INVALID_IMAGE;
  }
  if (r) {
    jit_log(numOptions, options, optionValues, why);
    free_module(m);
    return r;
  }
  jit_log(numOptions, options, optionValues, "");
  *module = m;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod) {
  ENTRY(cuModuleUnload);
  CUresult r = enter();
  if (r) return r;
  if (!hmod) return CUDA_ERROR_INVALID_HANDLE;
  if ((r = unsafe_call())) return r;
  free_module(hmod);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod,
                                     const char *name) {
  ENTRY(cuModuleGetFunction);
  CUresult r = enter();
  if (r) return r;
  if (!hmod) return CUDA_ERROR_INVALID_HANDLE;
  if (!hfunc || !name) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < hmod->nfuncs; i++)
    if (!strcmp(hmod->funcs[i]->name, name)) {
      *hfunc = hmod->funcs[i];
      return CUDA_SUCCESS;
    }
  if (!hmod->image || !*name || !image_has(hmod, name))
    return CUDA_ERROR_NOT_FOUND;
  CUfunction f = add_function(hmod, name, strlen(name), 0, 0, NULL);
  if (!f) return CUDA_ERROR_OUT_OF_MEMORY;
  *hfunc = f;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc,
                                    CUfunction_attribute attrib, int value) {
  ENTRY(cuFuncSetAttribute);
  CUresult r = enter();
  if (r) return r;
  if (!hfunc) return CUDA_ERROR_INVALID_HANDLE;
  switch (attrib) {
  case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
    if (value < 0 || value > SHARED_OPTIN) return CUDA_ERROR_INVALID_VALUE;
    hfunc->max_dynamic = value;
    return CUDA_SUCCESS;
  case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
    return value < -1 || value > 100 ? CUDA_ERROR_INVALID_VALUE
                                     : CUDA_SUCCESS;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
}

/* The parameter layout of the host version, or of the PTX entry. A binary
   image's layout is not read: CUDA_ERROR_NOT_SUPPORTED. */
CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t paramIndex,
                                    size_t *paramOffset, size_t *paramSize) {
  ENTRY(cuFuncGetParamInfo);
  CUresult r = enter();
  if (r) return r;
  if (!func) return CUDA_ERROR_INVALID_HANDLE;
  if (!paramOffset) return CUDA_ERROR_INVALID_VALUE;
  if (!func->layout) return CUDA_ERROR_NOT_SUPPORTED;
  if (paramIndex >= func->nparams) return CUDA_ERROR_INVALID_VALUE;
  *paramOffset = func->off[paramIndex];
  if (paramSize) *paramSize = func->size[paramIndex];
  return CUDA_SUCCESS;
}

/* Checks a launch and copies its parameters into o->args (the caller may
   reuse its own storage at once). */
static CUresult prepare_launch(op *o, void **params, void **extra) {
  const CUfunction f = o->f;
  for (int i = 0; i < 3; i++)
    if (!o->grid[i] || o->grid[i] > max_grid[i] || !o->block[i]
        || o->block[i] > max_block[i])
      return CUDA_ERROR_INVALID_VALUE;
  if ((uint64_t)o->block[0] * o->block[1] * o->block[2] > MAX_THREADS
      || o->shared > (unsigned)f->max_dynamic)
    return CUDA_ERROR_INVALID_VALUE;
#ifdef CUDA_SIM
  if (extra || !f->sim) return CUDA_ERROR_NOT_SUPPORTED;
#else
  if (extra || !f->impl) /* the double reads only kernelParams, and runs */
    return CUDA_ERROR_NOT_SUPPORTED; /* only the kernels it has */
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

/* A launch that fails its checks also breaks the capture it was sent to. */
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX,
                                unsigned int gridDimY, unsigned int gridDimZ,
                                unsigned int blockDimX, unsigned int blockDimY,
                                unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream,
                                void **kernelParams, void **extra) {
  ENTRY(cuLaunchKernel);
  CUresult r = enter();
  if (r) return r;
  CUstream s = stream_of(hStream);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if ((r = stream_usable(s))) return r;
  op o = {.type = CU_GRAPH_NODE_TYPE_KERNEL, .f = f,
          .grid = {gridDimX, gridDimY, gridDimZ},
          .block = {blockDimX, blockDimY, blockDimZ},
          .shared = sharedMemBytes};
  if ((r = prepare_launch(&o, kernelParams, extra))) {
    if (s && s->cap) s->cap->invalid = 1;
    return r;
  }
  return submit(s, &o);
}

/* -- graphs --------------------------------------------------------------- */

CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph,
                                    unsigned long long flags) {
  ENTRY(cuGraphInstantiate);
  CUresult r = enter();
  if (r) return r;
  if (!hGraph) return CUDA_ERROR_INVALID_HANDLE;
  unsigned long long
    auto_free = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,
    device = CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH,
    priority = CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
  if (!phGraphExec || (flags & ~(auto_free | device | priority))
      || ((flags & auto_free) && (flags & device))) /* UPLOAD: ...WithParams */
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = unsafe_call())) return r;
  CUgraphExec x = new_obj(sizeof *x, O_EXEC);
  size_t cap = 0;
  if (!x || build_plan(&x->p, hGraph)
      || gather_conds(hGraph, &x->conds, &x->nconds, &cap)) {
    if (x) free_exec(x);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  for (size_t i = 0; i < x->nconds; i++)
    if (!x->conds[i].used) { /* CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED */
      free_exec(x);
      return CUDA_ERROR_INVALID_VALUE;
    }
  x->from = hGraph;
  x->auto_free = (flags & auto_free) != 0;
  *phGraphExec = x;
  return CUDA_SUCCESS;
}

/* The instantiated graph that cuGraphLaunch runs, for set_conditional. */
static CUgraphExec running;

static void set_conditional(kctx *c, uint64_t h, unsigned v) {
  for (size_t i = 0; running && i < running->nconds; i++)
    if (running->conds[i].id == h) {
      running->conds[i].value = v;
      return;
    }
  c->fault = CUDA_ERROR_LAUNCH_FAILED;
}

static unsigned cond_value(CUgraphConditionalHandle h) {
  for (size_t i = 0; i < running->nconds; i++)
    if (running->conds[i].id == h) return running->conds[i].value;
  return 0;
}

#ifdef CUDA_SIM
/* The live allocation holding [p, p + n), for the simulator's checks. */
static int sim_live(void *ud, uint64_t p, size_t n, uint64_t *lo,
                    uint64_t *hi) {
  size_t i = spans_upto((uintptr_t)p);
  if (!i || !dev_range(p, n)) return 0;
  *lo = spans[i - 1].base;
  *hi = spans[i - 1].base + spans[i - 1].size;
  return 1;
}

static int sim_cond(void *ud, uint64_t h, unsigned v) {
  for (size_t i = 0; running && i < running->nconds; i++)
    if (running->conds[i].id == h) {
      running->conds[i].value = v;
      return 0;
    }
  return 1;
}

/* CUDA_SIM_STATS=1: thread-instructions run and the seconds kernels took,
   on stderr at exit. */
static uint64_t sim_executed;
static double sim_seconds;

static void sim_stats(void) {
  fprintf(stderr, "cuda sim: %llu thread-instructions in %.3f s of kernel "
          "time: %.1f M/s\n", (unsigned long long)sim_executed, sim_seconds,
          sim_seconds > 0 ? (double)sim_executed / sim_seconds / 1e6 : 0.0);
}

/* Runs a kernel from its PTX; a fault makes the context sticky and is
   told on stderr, as a memory checker would. */
static void run_sim(const op *o) {
  static int stats = -1;
  if (stats < 0) {
    const char *e = getenv("CUDA_SIM_STATS");
    if ((stats = e && *e && strcmp(e, "0"))) atexit(sim_stats);
  }
  sim_launch l = {{o->grid[0], o->grid[1], o->grid[2]},
                  {o->block[0], o->block[1], o->block[2]}, o->shared,
                  o->args, o->f->argbytes, sim_live, sim_cond, NULL, 0, 0};
  char diag[400];
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int code = sim_run(o->f->sim, &l, diag, sizeof diag);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  sim_executed += l.executed;
  sim_seconds += (double)(t1.tv_sec - t0.tv_sec)
                 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  if (code) {
    fprintf(stderr, "cuda sim: %s\n", diag);
    sticky = (CUresult)code;
  }
}
#endif

#define WATCHDOG (1ul << 24) /* turns of a while loop */

/* Runs a plan's nodes in order, bodies as their conditions say; a kernel's
   fault stops the rest, as it stops a GPU. */
static CUresult run_plan(const plan *p) {
  CUresult r = CUDA_SUCCESS;
  for (size_t i = 0; i < p->n && !sticky && !r; i++) {
    const op *o = &p->ops[i];
    unsigned long turns = 0;
    unsigned v;
    if (o->disabled) {
      continue;
    } else if (o->type == CU_GRAPH_NODE_TYPE_GRAPH) {
      r = run_plan(&o->plans[0]);
    } else if (o->type != CU_GRAPH_NODE_TYPE_CONDITIONAL) {
      r = run_op(o, 0);
    } else if (o->ctype == CU_GRAPH_COND_TYPE_WHILE) {
      while (!r && !sticky && cond_value(o->handle)) {
        if (++turns > WATCHDOG) sticky = CUDA_ERROR_LAUNCH_TIMEOUT;
        else r = run_plan(&o->plans[0]);
      }
    } else if ((v = cond_value(o->handle)), o->ctype == CU_GRAPH_COND_TYPE_IF) {
      if (v || o->nbodies == 2) r = run_plan(&o->plans[v ? 0 : 1]);
    } else if (v < o->nbodies) {
      r = run_plan(&o->plans[v]);
    }
  }
  return r;
}

/* Graphs belong to no context and are host data: sticky errors spare them. */
static CUresult enter_graph(void) {
  return initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph) {
  ENTRY(cuGraphDestroy);
  CUresult r = enter_graph();
  if (r) return r;
  if (!hGraph) return CUDA_ERROR_INVALID_HANDLE;
  free_graph(hGraph);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec) {
  ENTRY(cuGraphExecDestroy);
  CUresult r = enter_context();
  if (r) return r;
  if (!hGraphExec) return CUDA_ERROR_INVALID_HANDLE;
  if ((r = unsafe_call())) return r;
  free_exec(hGraphExec);
  return CUDA_SUCCESS;
}

/* Launches and uploads of graphs are not captured: refused, and the capture
   is invalidated. */
static CUresult graph_stream(CUstream s) {
  CUresult r = stream_usable(s);
  if (r || !s || !s->cap) return r;
  s->cap->invalid = 1;
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* Runs the nodes in order, at once, as eager work would; a kernel's fault
   stops the rest, as it stops a GPU. */
CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  ENTRY(cuGraphLaunch);
  CUresult r = enter();
  if (r) return r;
  if (!hGraphExec) return CUDA_ERROR_INVALID_HANDLE;
  if ((r = graph_stream(stream_of(hStream)))) return r;
  for (size_t i = 0; i < hGraphExec->nconds; i++)
    if (hGraphExec->conds[i].flags & CU_GRAPH_COND_ASSIGN_DEFAULT)
      hGraphExec->conds[i].value = hGraphExec->conds[i].dflt;
  running = hGraphExec;
  r = run_plan(&hGraphExec->p);
  running = NULL;
  return r;
}

CUresult CUDAAPI cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream) {
  ENTRY(cuGraphUpload);
  CUresult r = enter();
  if (r) return r;
  if (!hGraphExec) return CUDA_ERROR_INVALID_HANDLE;
  return graph_stream(stream_of(hStream));
}

static CUgraphConditionalHandle cond_ids = 0x100;

CUresult CUDAAPI cuGraphConditionalHandleCreate(CUgraphConditionalHandle *pHandle_out,
                                                CUgraph hGraph, CUcontext ctx,
                                                unsigned int defaultLaunchValue,
                                                unsigned int flags) {
  ENTRY(cuGraphConditionalHandleCreate);
  CUresult r = enter();
  if (r) return r;
  if (!pHandle_out || !hGraph || !is_primary(ctx)
      || (flags & ~(unsigned)CU_GRAPH_COND_ASSIGN_DEFAULT))
    return CUDA_ERROR_INVALID_VALUE;
  cond *v = realloc(hGraph->conds, (hGraph->nconds + 1) * sizeof *v);
  if (!v) return CUDA_ERROR_OUT_OF_MEMORY;
  hGraph->conds = v;
  v[hGraph->nconds++] = (cond){++cond_ids, defaultLaunchValue, flags,
                               defaultLaunchValue, 0};
  *pHandle_out = cond_ids;
  return CUDA_SUCCESS;
}

/* The handle h of g or of a graph g is a body of, or NULL. */
static cond *find_cond(CUgraph g, CUgraphConditionalHandle h) {
  for (; g; g = g->parent)
    for (size_t i = 0; i < g->nconds; i++)
      if (g->conds[i].id == h) return &g->conds[i];
  return NULL;
}

/* A copy of g as a body of parent (NULL: a graph of its own), nodes,
   edges, bodies and condition handles alike. */
static CUgraph clone_graph(CUgraph g, CUgraph parent) {
  CUgraph c = new_obj(sizeof *c, O_GRAPH);
  if (!c) return NULL;
  c->parent = parent;
  if (g->nconds && !(c->conds = malloc(g->nconds * sizeof *c->conds))) {
    free_graph(c);
    return NULL;
  }
  if (g->nconds) memcpy(c->conds, g->conds, g->nconds * sizeof *c->conds);
  c->nconds = g->nconds;
  for (size_t i = 0; i < g->nodes.n; i++) {
    const CUgraphNode from = g->nodes.v[i];
    nodeset deps = {NULL, 0, 0};
    op o;
    int bad = copy_op(&o, &from->op);
    o.bodies = NULL;
    o.nbodies = 0;
    for (size_t j = 0; !bad && j < from->deps.n; j++)
      bad = set_push(&deps, c->nodes.v[from->deps.v[j]->idx], 1);
    if (!bad && from->op.nbodies
        && !(o.bodies = calloc(from->op.nbodies, sizeof *o.bodies)))
      bad = 1;
    for (unsigned j = 0; !bad && j < from->op.nbodies; j++, o.nbodies++)
      bad = !(o.bodies[j] = clone_graph(from->op.bodies[j], c));
    CUgraphNode n = bad ? NULL : add_node(c, &o, &deps);
    free(deps.v);
    if (!n) {
      for (unsigned j = 0; o.bodies && j < o.nbodies; j++)
        if (o.bodies[j]) free_graph(o.bodies[j]);
      free(o.bodies);
      free(o.args);
      free_graph(c);
      return NULL;
    }
  }
  return c;
}

/* Adds a conditional node (with new, empty body graphs, given back in
   phGraph_out) or a child graph node (a copy of the graph); the other
   types are not modelled. */
CUresult CUDAAPI cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                const CUgraphNode *dependencies,
                                const CUgraphEdgeData *dependencyData,
                                size_t numDependencies,
                                CUgraphNodeParams *nodeParams) {
  ENTRY(cuGraphAddNode);
  CUresult r = enter_graph();
  if (r) return r;
  if (!phGraphNode || !hGraph || !nodeParams
      || !nodes_of(hGraph, dependencies, numDependencies))
    return CUDA_ERROR_INVALID_VALUE;
  if (!default_edges(dependencyData, numDependencies))
    return CUDA_ERROR_NOT_SUPPORTED;
  op o = {.type = nodeParams->type};
  cond *c = NULL;
  if (o.type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
    CUDA_CONDITIONAL_NODE_PARAMS *p = &nodeParams->conditional;
    c = find_cond(hGraph, p->handle);
    unsigned n = p->size;
    if (!c || c->used || !is_primary(p->ctx) || !n
        || (p->type == CU_GRAPH_COND_TYPE_WHILE && n != 1)
        || (p->type == CU_GRAPH_COND_TYPE_IF && n > 2)
        || (p->type != CU_GRAPH_COND_TYPE_WHILE
            && p->type != CU_GRAPH_COND_TYPE_IF
            && p->type != CU_GRAPH_COND_TYPE_SWITCH))
      return CUDA_ERROR_INVALID_VALUE;
    o.ctype = p->type;
    o.handle = p->handle;
    if (!(o.bodies = calloc(n, sizeof *o.bodies))) return CUDA_ERROR_OUT_OF_MEMORY;
    for (; o.nbodies < n; o.nbodies++)
      if (!(o.bodies[o.nbodies] = new_obj(sizeof **o.bodies, O_GRAPH))) break;
      else o.bodies[o.nbodies]->parent = hGraph;
  } else if (o.type == CU_GRAPH_NODE_TYPE_GRAPH) {
    CUgraph child = nodeParams->graph.graph;
    if (!child || has_conditional(child)) return CUDA_ERROR_INVALID_VALUE;
    if (nodeParams->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE)
      return CUDA_ERROR_NOT_SUPPORTED;
    if (!(o.bodies = calloc(1, sizeof *o.bodies))) return CUDA_ERROR_OUT_OF_MEMORY;
    if ((o.bodies[0] = clone_graph(child, hGraph))) o.nbodies = 1;
  } else {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  nodeset deps = {NULL, 0, 0};
  int bad = o.nbodies != (o.type == CU_GRAPH_NODE_TYPE_GRAPH
                          ? 1 : nodeParams->conditional.size);
  for (size_t i = 0; !bad && i < numDependencies; i++)
    bad = set_push(&deps, dependencies[i], 1);
  CUgraphNode n = bad ? NULL : add_node(hGraph, &o, &deps);
  free(deps.v);
  if (!n) {
    for (unsigned j = 0; j < o.nbodies; j++) free_graph(o.bodies[j]);
    free(o.bodies);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (c) {
    c->used = 1;
    nodeParams->conditional.phGraph_out = n->op.bodies;
  }
  *phGraphNode = n;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes,
                                 size_t *numNodes) {
  ENTRY(cuGraphGetNodes);
  CUresult r = enter_graph();
  if (r) return r;
  if (!hGraph) return CUDA_ERROR_INVALID_HANDLE;
  if (!numNodes) return CUDA_ERROR_INVALID_VALUE;
  size_t n = hGraph->nodes.n;
  if (nodes) {
    for (size_t i = 0; i < *numNodes; i++)
      nodes[i] = i < n ? hGraph->nodes.v[i] : NULL;
    if (*numNodes < n) n = *numNodes;
  }
  *numNodes = n;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type) {
  ENTRY(cuGraphNodeGetType);
  CUresult r = enter_graph();
  if (r) return r;
  if (!hNode) return CUDA_ERROR_INVALID_HANDLE;
  if (!type) return CUDA_ERROR_INVALID_VALUE;
  *type = hNode->op.type;
  return CUDA_SUCCESS;
}

/* A copy of hGraph, node for node and edge for edge. */
CUresult CUDAAPI cuGraphClone(CUgraph *phGraphClone, CUgraph hGraph) {
  ENTRY(cuGraphClone);
  CUresult r = enter_graph();
  if (r) return r;
  if (!hGraph) return CUDA_ERROR_INVALID_HANDLE;
  if (!phGraphClone) return CUDA_ERROR_INVALID_VALUE;
  CUgraph g = clone_graph(hGraph, NULL);
  if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
  *phGraphClone = g;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphKernelNodeGetParams(CUgraphNode hNode,
                                            CUDA_KERNEL_NODE_PARAMS *p) {
  ENTRY(cuGraphKernelNodeGetParams);
  CUresult r = enter_graph();
  if (r) return r;
  if (!hNode) return CUDA_ERROR_INVALID_HANDLE;
  if (!p || hNode->op.type != CU_GRAPH_NODE_TYPE_KERNEL)
    return CUDA_ERROR_INVALID_VALUE;
  const op *o = &hNode->op;
  const CUfunction f = o->f;
  if (f->nparams && !hNode->argv) {
    if (!(hNode->argv = malloc(f->nparams * sizeof *hNode->argv)))
      return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < f->nparams; i++)
      hNode->argv[i] = o->args + f->off[i];
  }
  memset(p, 0, sizeof *p);
  p->func = f;
  p->gridDimX = o->grid[0];
  p->gridDimY = o->grid[1];
  p->gridDimZ = o->grid[2];
  p->blockDimX = o->block[0];
  p->blockDimY = o->block[1];
  p->blockDimZ = o->block[2];
  p->sharedMemBytes = o->shared;
  p->kernelParams = hNode->argv;
  return CUDA_SUCCESS;
}

/* Takes a new function (the double runs functions, not CUkernels) and
   copies the parameters, as a launch does. */
CUresult CUDAAPI cuGraphKernelNodeSetParams(CUgraphNode hNode,
                                            const CUDA_KERNEL_NODE_PARAMS *p) {
  ENTRY(cuGraphKernelNodeSetParams);
  CUresult r = enter();
  if (r) return r;
  if (!hNode) return CUDA_ERROR_INVALID_HANDLE;
  if (!p || !p->func || hNode->op.type != CU_GRAPH_NODE_TYPE_KERNEL)
    return CUDA_ERROR_INVALID_VALUE;
  op o = {.type = CU_GRAPH_NODE_TYPE_KERNEL, .f = p->func,
          .grid = {p->gridDimX, p->gridDimY, p->gridDimZ},
          .block = {p->blockDimX, p->blockDimY, p->blockDimZ},
          .shared = p->sharedMemBytes};
  if ((r = prepare_launch(&o, p->kernelParams, p->extra))) return r;
  free(hNode->op.args);
  free(hNode->argv);
  hNode->argv = NULL;
  hNode->op = o;
  return CUDA_SUCCESS;
}

/* Why a node running new_op cannot replace one running old: its type or a
   parameter the driver cannot change. A kernel node may take another
   function of the same context (drivers since 11.2). */
static CUgraphExecUpdateResult node_change(const op *old, const op *new_op) {
  if (old->type != new_op->type)
    return CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
  if (old->type == CU_GRAPH_NODE_TYPE_MEMCPY
      && (!old->hdst != !new_op->hdst || !old->hsrc != !new_op->hsrc))
    return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED; /* memory type */
  if (old->type == CU_GRAPH_NODE_TYPE_MEMSET
      && (old->height > 1 || new_op->height > 1)
      && (old->height != new_op->height || old->width != new_op->width
          || old->pitch != new_op->pitch || old->elem != new_op->elem))
    return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED; /* 2D shape */
  return CU_GRAPH_EXEC_UPDATE_SUCCESS;
}

/* Whether graph g has the nodes and edges of plan p, node for node, its
   bodies too, with changes the driver can apply; why not in *info.
   Nonzero when out of memory. */
static int same_shape(const plan *p, CUgraph g,
                      CUgraphExecUpdateResultInfo *info) {
  const nodeset *v = &g->nodes;
  edges e = {NULL, NULL};
  if (v->n != p->n) {
    info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    return 0;
  }
  if (make_edges(g, &e)) return 1;
  const edges *old = &p->e;
  for (size_t i = 0; i < v->n && !info->result; i++) {
    size_t a = old->start[i], na = old->start[i + 1] - a;
    size_t b = e.start[i], nb = e.start[i + 1] - b;
    if (na == nb && !memcmp(old->dep + a, e.dep + b, na * sizeof *e.dep))
      continue;
    info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    info->errorNode = v->v[i];
    for (size_t j = 0; na == nb && !info->errorFromNode; j++)
      if (old->dep[a + j] != e.dep[b + j]) /* the first that differs */
        info->errorFromNode = v->v[e.dep[b + j]];
  }
  free(e.start);
  free(e.dep);
  int oom = 0;
  for (size_t i = 0; i < v->n && !info->result && !oom; i++) {
    const op *o = &p->ops[i], *n = &v->v[i]->op;
    info->result = node_change(o, n);
    if (!info->result && o->type == CU_GRAPH_NODE_TYPE_CONDITIONAL
        && (o->ctype != n->ctype || o->nbodies != n->nbodies))
      info->result = CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    for (unsigned j = 0; !info->result && !oom && j < o->nbodies; j++)
      oom = same_shape(&o->plans[j], n->bodies[j], info);
    if (info->result && !info->errorNode) info->errorNode = v->v[i];
  }
  return oom;
}

/* Copies hGraph's parameters into hGraphExec when both have the same nodes
   and edges, node for node; else leaves it as it was and says why. Handles
   take hGraph's defaults. */
CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph,
                                   CUgraphExecUpdateResultInfo *resultInfo) {
  ENTRY(cuGraphExecUpdate);
  CUresult r = enter();
  if (r) return r;
  if (!hGraphExec || !hGraph) return CUDA_ERROR_INVALID_HANDLE;
  if (!resultInfo) return CUDA_ERROR_INVALID_VALUE;
  CUgraphExecUpdateResultInfo info = {CU_GRAPH_EXEC_UPDATE_SUCCESS, NULL, NULL};
  plan p;
  cond *conds = NULL;
  size_t nconds = 0, cap = 0;
  if (same_shape(&hGraphExec->p, hGraph, &info)) return CUDA_ERROR_OUT_OF_MEMORY;
  if (!info.result) { /* all or none */
    if (build_plan(&p, hGraph) || gather_conds(hGraph, &conds, &nconds, &cap)) {
      free(conds);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    free_plan(&hGraphExec->p);
    free(hGraphExec->conds);
    hGraphExec->p = p;
    hGraphExec->conds = conds;
    hGraphExec->nconds = nconds;
  }
  *resultInfo = info;
  return info.result ? CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE : CUDA_SUCCESS;
}

static const char *const cond_names[] = {"IF", "WHILE", "SWITCH"};

/* Writes g's nodes and edges, numbering nodes from *id on; bodies follow
   their node as clusters, with a dashed edge to each. */
static void dot_graph(FILE *out, CUgraph g, size_t *id) {
  size_t base = *id;
  *id += g->nodes.n;
  for (size_t i = 0; i < g->nodes.n; i++) {
    const op *o = &g->nodes.v[i]->op;
    fprintf(out, "  node%zu [label=\"%s", base + i,
            o->type == CU_GRAPH_NODE_TYPE_KERNEL        ? "KERNEL"
            : o->type == CU_GRAPH_NODE_TYPE_MEMSET      ? "MEMSET"
            : o->type == CU_GRAPH_NODE_TYPE_MEMCPY      ? "MEMCPY"
            : o->type == CU_GRAPH_NODE_TYPE_GRAPH       ? "CHILD_GRAPH"
                                                        : "CONDITIONAL");
    if (o->type == CU_GRAPH_NODE_TYPE_KERNEL) fprintf(out, "\\n%s", o->f->name);
    if (o->type == CU_GRAPH_NODE_TYPE_MEMCPY)
      fprintf(out, "\\n%s", o->hsrc ? "HtoD" : o->hdst ? "DtoH" : "DtoD");
    if (o->type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
      fprintf(out, "\\n%s", cond_names[o->ctype]);
    fprintf(out, "\"];\n");
    for (unsigned j = 0; j < o->nbodies; j++) {
      size_t first = *id;
      fprintf(out, "  subgraph cluster_%zu_%u {\n  label=\"body %u\";\n",
              base + i, j, j);
      dot_graph(out, o->bodies[j], id);
      fprintf(out, "  }\n");
      if (o->bodies[j]->nodes.n)
        fprintf(out, "  node%zu -> node%zu [style=dashed];\n", base + i,
                first);
    }
  }
  for (size_t i = 0; i < g->nodes.n; i++) {
    const nodeset *d = &g->nodes.v[i]->deps;
    for (size_t j = 0; j < d->n; j++)
      fprintf(out, "  node%zu -> node%zu;\n", base + d->v[j]->idx, base + i);
  }
}

/* Writes a Graphviz digraph: one line per node (type, and kernel name, copy
   direction or condition type), one per edge, bodies as clusters. flags ask
   for detail the double does not keep. */
CUresult CUDAAPI cuGraphDebugDotPrint(CUgraph hGraph, const char *path,
                                      unsigned int flags) {
  ENTRY(cuGraphDebugDotPrint);
  CUresult r = enter_graph();
  if (r) return r;
  (void)flags;
  if (!hGraph) return CUDA_ERROR_INVALID_HANDLE;
  if (!path) return CUDA_ERROR_INVALID_VALUE;
  FILE *out = fopen(path, "w");
  if (!out) return CUDA_ERROR_OPERATING_SYSTEM;
  size_t id = 0;
  fprintf(out, "digraph dot {\n");
  dot_graph(out, hGraph, &id);
  fprintf(out, "}\n");
  return fclose(out) ? CUDA_ERROR_OPERATING_SYSTEM : CUDA_SUCCESS;
}

/* -- node records: allocation nodes, edges, setters, enabled flags -------- */

/* An allocation node maps its memory, refused while it is mapped from an
   earlier launch (unless the graph frees it on launch); a free node
   unmaps it. */
static CUresult run_memory_node(const op *o) {
  long i = span_at(o->dst);
  if (i < 0 || spans[i].kind != SPAN_GRAPH) return CUDA_ERROR_INVALID_VALUE;
  int alloc = o->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  if (alloc && spans[i].mapped && !(running && running->auto_free))
    return CUDA_ERROR_INVALID_VALUE;
  if (spans[i].mapped != alloc) map_span(&spans[i], alloc);
  return CUDA_SUCCESS;
}

static CUresult graph_memory_node(CUstream s, CUgraphNodeType type,
                                  CUdeviceptr p, size_t bytes) {
  op o = {.type = type, .dst = p, .bytes = bytes};
  CUgraphNode n = add_node(s->cap->g, &o, &s->tips);
  if (!n) return CUDA_ERROR_OUT_OF_MEMORY;
  s->tips.n = 0;
  set_push(&s->tips, n, 0); /* cannot fail: tips has room for one */
  return CUDA_SUCCESS;
}

/* Every edge (dependency -> node), in node order. The double keeps no
   edge data: it reads as default edges. */
CUresult CUDAAPI cuGraphGetEdges(CUgraph hGraph, CUgraphNode *from,
                                 CUgraphNode *to, CUgraphEdgeData *edgeData,
                                 size_t *numEdges) {
  ENTRY(cuGraphGetEdges);
  CUresult r = enter_graph();
  if (r) return r;
  if (!hGraph) return CUDA_ERROR_INVALID_HANDLE;
  if (!numEdges || (!from != !to) || (edgeData && !from))
    return CUDA_ERROR_INVALID_VALUE;
  size_t n = 0;
  for (size_t i = 0; i < hGraph->nodes.n; i++) {
    const CUgraphNode node = hGraph->nodes.v[i];
    for (size_t j = 0; j < node->deps.n; j++, n++) {
      if (!from || n >= *numEdges) continue;
      from[n] = node->deps.v[j];
      to[n] = node;
      if (edgeData) memset(&edgeData[n], 0, sizeof *edgeData);
    }
  }
  if (from)
    for (size_t i = n; i < *numEdges; i++) from[i] = to[i] = NULL;
  if (!from || n < *numEdges) *numEdges = n;
  return CUDA_SUCCESS;
}

/* The instantiated op of hNode: a node of the graph x was made from. */
static op *exec_op(CUgraphExec x, CUgraphNode hNode) {
  if (!x || !hNode || hNode->graph != x->from || hNode->idx >= x->p.n)
    return NULL;
  return &x->p.ops[hNode->idx];
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec,
                                                CUgraphNode hNode,
                                                const CUDA_KERNEL_NODE_PARAMS *p) {
  ENTRY(cuGraphExecKernelNodeSetParams);
  CUresult r = enter();
  if (r) return r;
  op *o = exec_op(hGraphExec, hNode);
  if (!o || !p || !p->func || o->type != CU_GRAPH_NODE_TYPE_KERNEL)
    return CUDA_ERROR_INVALID_VALUE;
  op n = {.type = CU_GRAPH_NODE_TYPE_KERNEL, .f = p->func,
          .grid = {p->gridDimX, p->gridDimY, p->gridDimZ},
          .block = {p->blockDimX, p->blockDimY, p->blockDimZ},
          .shared = p->sharedMemBytes, .disabled = o->disabled};
  if ((r = prepare_launch(&n, p->kernelParams, p->extra))) return r;
  free(o->args);
  *o = n;
  return CUDA_SUCCESS;
}

/* A 1D memset of device memory, as the exec setter takes it. */
static CUresult memset_params(op *o, const CUDA_MEMSET_NODE_PARAMS *p) {
  if (!p || !p->width || p->height != 1 || (p->elementSize != 1
      && p->elementSize != 2 && p->elementSize != 4) || p->dst % p->elementSize)
    return CUDA_ERROR_INVALID_VALUE;
  op n = {.type = CU_GRAPH_NODE_TYPE_MEMSET, .dst = p->dst, .pitch = p->pitch,
          .width = p->width, .height = 1, .value = p->value,
          .elem = p->elementSize, .disabled = o->disabled};
  CUresult r = run_op(&n, 1);
  if (!r) *o = n;
  return r;
}

/* Only 1D memsets change: the instantiated one and the new one. */
CUresult CUDAAPI cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec,
                                                CUgraphNode hNode,
                                                const CUDA_MEMSET_NODE_PARAMS *p,
                                                CUcontext ctx) {
  ENTRY(cuGraphExecMemsetNodeSetParams);
  CUresult r = enter();
  if (r) return r;
  op *o = exec_op(hGraphExec, hNode);
  if (!o || o->type != CU_GRAPH_NODE_TYPE_MEMSET || o->height != 1
      || !is_primary(ctx))
    return CUDA_ERROR_INVALID_VALUE;
  return memset_params(o, p);
}

CUresult CUDAAPI cuGraphMemsetNodeSetParams(CUgraphNode hNode,
                                            const CUDA_MEMSET_NODE_PARAMS *p) {
  ENTRY(cuGraphMemsetNodeSetParams);
  CUresult r = enter();
  if (r) return r;
  if (!hNode || hNode->op.type != CU_GRAPH_NODE_TYPE_MEMSET)
    return CUDA_ERROR_INVALID_VALUE;
  return memset_params(&hNode->op, p);
}

/* A 1D device-to-device copy, the only kind the binding captures. */
static CUresult memcpy_params(op *o, const CUDA_MEMCPY3D *p) {
  if (!p || o->hdst || o->hsrc || p->srcMemoryType != CU_MEMORYTYPE_DEVICE
      || p->dstMemoryType != CU_MEMORYTYPE_DEVICE || p->Height != 1
      || p->Depth != 1 || !p->WidthInBytes || p->srcXInBytes || p->dstXInBytes)
    return CUDA_ERROR_INVALID_VALUE;
  op n = {.type = CU_GRAPH_NODE_TYPE_MEMCPY, .dst = p->dstDevice,
          .src = p->srcDevice, .bytes = p->WidthInBytes,
          .disabled = o->disabled};
  CUresult r = run_op(&n, 1);
  if (!r) *o = n;
  return r;
}

CUresult CUDAAPI cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec,
                                                CUgraphNode hNode,
                                                const CUDA_MEMCPY3D *p,
                                                CUcontext ctx) {
  ENTRY(cuGraphExecMemcpyNodeSetParams);
  CUresult r = enter();
  if (r) return r;
  op *o = exec_op(hGraphExec, hNode);
  if (!o || o->type != CU_GRAPH_NODE_TYPE_MEMCPY || !is_primary(ctx))
    return CUDA_ERROR_INVALID_VALUE;
  return memcpy_params(o, p);
}

CUresult CUDAAPI cuGraphMemcpyNodeSetParams(CUgraphNode hNode,
                                            const CUDA_MEMCPY3D *p) {
  ENTRY(cuGraphMemcpyNodeSetParams);
  CUresult r = enter();
  if (r) return r;
  if (!hNode || hNode->op.type != CU_GRAPH_NODE_TYPE_MEMCPY)
    return CUDA_ERROR_INVALID_VALUE;
  return memcpy_params(&hNode->op, p);
}

/* Kernel, memcpy and memset nodes may be disabled: launches skip them. */
CUresult CUDAAPI cuGraphNodeSetEnabled(CUgraphExec hGraphExec,
                                       CUgraphNode hNode,
                                       unsigned int isEnabled) {
  ENTRY(cuGraphNodeSetEnabled);
  CUresult r = enter();
  if (r) return r;
  op *o = exec_op(hGraphExec, hNode);
  if (!o || (o->type != CU_GRAPH_NODE_TYPE_KERNEL
             && o->type != CU_GRAPH_NODE_TYPE_MEMCPY
             && o->type != CU_GRAPH_NODE_TYPE_MEMSET))
    return CUDA_ERROR_INVALID_VALUE;
  o->disabled = !isEnabled;
  return CUDA_SUCCESS;
}

/* The synchronous forms an embedding host may call itself: work of the
   legacy stream, done at once. */
CUresult CUDAAPI cuMemsetD32(CUdeviceptr dstDevice, unsigned int ui,
                             size_t N) {
  ENTRY(cuMemsetD32);
  return memset_op(dstDevice, 0, ui, 4, N, 1, NULL);
}

CUresult CUDAAPI cuMemcpyDtoH(void *dstHost, CUdeviceptr srcDevice,
                              size_t ByteCount) {
  ENTRY(cuMemcpyDtoH);
  return memcpy_op(0, dstHost, srcDevice, NULL, ByteCount, NULL);
}
