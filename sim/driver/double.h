/* A test double of libcuda.so.1, the CUDA Driver API, so that the specs run
   on machines with CUDA's headers but no GPU. Built as a shared library and
   named by CUGRAPH_LUA_LIBCUDA, it exports the entry points of
   src/base/driver.h under the versioned symbols that cuda.h maps them to,
   and follows the real driver's documented behaviour for what it covers: one
   device whose memory is host memory, streams that run work at once, stream
   capture into graphs (programmatic edges from launches with programmatic
   stream serialization), instantiated graphs, graph clones and kernel nodes
   whose function and parameters change (kernel reload), sticky errors, and
   host versions of the kernels of spec/kernels/kernels.cu
   (spec/support/twins.c) and of the built-in condition setters of
   src/kernel/setters.cu (kernels.c), found by entry name. Conditional nodes
   (while, if/else, switch) and child graph nodes run with the driver's
   semantics; their handles live in the instantiated graph, defaults applied
   at each launch, and a kernel sets one with the host twin of
   cudaGraphSetConditional. A while loop that runs past 2^24 turns stops the
   device as a watchdog would (CUDA_ERROR_LAUNCH_TIMEOUT, sticky): a GPU
   would hang; unless the caller bounded its work (stop.c), which then ends
   it.

   External memory and semaphores (external.c) are file descriptors of the
   OPAQUE_FD kinds (a memfd, say), which the driver owns once imported.
   Memory is the file, mapped shared: what kernels and copies write through
   a mapped buffer or a mipmapped array's levels is what any other mapping
   of the file sees. A semaphore is a file of at least 8 bytes holding a
   little-endian uint64 counter, mapped shared, so that a second import of
   the file, or another process that maps it, sees the same counter: a
   timeline semaphore's signal stores the fence value and its wait waits
   for the counter to reach it; a binary one's signal stores 1 and its wait
   waits for nonzero and stores 0. Work runs at once, so a wait blocks the
   calling thread (the lock given back meanwhile, polling) until then, or
   CUDA_DOUBLE_WAIT_LIMIT seconds (30): past that it stops the device, as
   the watchdog does (CUDA_ERROR_LAUNCH_TIMEOUT, sticky).

   Environment: CUDA_VISIBLE_DEVICES empty (or -1) hides the device, as with
   the driver; CUDA_DOUBLE_MEM_LIMIT=bytes sizes device memory (80 GiB).
   CUDA_DOUBLE_DEVICES=n (1 to 8) gives n devices, each with its primary
   context, its own memory and handles; any two may access each other's
   memory (cuDeviceCanAccessPeer) unless CUDA_DOUBLE_NO_PEER=1.
   CUDA_DOUBLE_NARROW_MEMOPS=1 takes the 64-bit stream memory operations
   and their NOR comparison from the device's attributes.
   CUDA_DOUBLE_FAULT=name:n:code[,...] makes the n-th call of an entry point
   (its plain name, cuMemAlloc, or the versioned symbol, cuMemAlloc_v2) fail
   with code, before it does anything; a sticky code also breaks the device
   for the rest of the process, as a fault on a GPU does.
   CUDA_DOUBLE_TRACE=path writes "name calls" lines, one per entry point
   called, to path at exit. CUDA_DOUBLE_WAIT_LIMIT=seconds bounds a wait on
   an external semaphore (30; 0: fail at once when not signalled).

   User objects (userobj.c) are held by graphs, their copies and their
   instantiations, and released once the last launch is over; their
   destructors run on a thread of the driver's own, where a CUDA call is
   refused, as it is inside a host function.

   Stream memory operations (memops.c) write and wait for 32- and 64-bit
   values in device or page-locked host memory, eager or as batch memory
   operation nodes; a wait polls as a semaphore's does.

   Any thread may call: every entry point holds one lock for its whole body,
   but for the polls of a wait for memory (a semaphore's, a memory
   operation's).
   The current context is per thread, as with the driver.

   Built with -DCUDA_SIM it is the simulator (build/libcuda-sim.so): the
   same driver, with kernels run from their PTX by sim/ptx instead of host
   twins; a fatbin's PTX is run, a cubin refused.

   This header is what the driver's files share: the types of its handles
   and work, the gates and lock of its entry points, and the functions one
   file calls in another (prefixed dbl_); queue.h adds the strict mode's
   queues and race check, programmatic.h the programmatic launch check;
   the rest of each file is static. */
#ifndef DOUBLE_H
#define DOUBLE_H

#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#ifdef CUDA_SIM
#include "ptx/ptx_sim.h"
/* The simulator's entry point of its own: the thread-instructions its
   kernels had run when the event was last recorded (g:profile reads it
   from event record nodes). */
CUresult CUDAAPI cuSimEventInstructions(CUevent hEvent,
                                        unsigned long long *count);
#endif
#include "base/simstop.h" /* its bounds on simulated work (stop.c) */
#include "base/simcheck.h" /* the simulator's checks (queue.c) */

/* What the files share stays inside the library: it exports the driver's
   entry points only, and its calls of one file in another are direct. */
#pragma GCC visibility push(hidden)

/* -- the device (device.c) ------------------------------------------------- */

#define MAX_DEVICES 8
#define MAX_THREADS 1024
#define SHARED_DEFAULT 49152 /* dynamic shared memory without opt-in */
#define SHARED_OPTIN 232448

extern const unsigned dbl_max_block[3], dbl_max_grid[3];
/* The value of a device attribute, alike on every device (0: unknown). */
int dbl_attribute(CUdevice_attribute a);

/* -- entry points: one lock, call counts, injected faults (entry.c) -------- */

/* Calls of one entry point, on the list of those called so far. */
typedef struct dbl_site {
  const char *name;
  unsigned long calls;
  struct dbl_site *next;
} dbl_site;

extern CUresult dbl_sticky;
/* Set by the teardown cuInit registers with atexit, as the driver does:
   from then on every entry point but cuGetErrorName/String returns
   CUDA_ERROR_DEINITIALIZED (finalizers that run later meet a driver that
   is gone). */
extern atomic_int dbl_torn_down;
/* Why this thread's last call returned CUDA_ERROR_NOT_SUPPORTED, when the
   reason is this driver's own (a kernel the test double cannot run):
   cuGetErrorString gives it for that code until the thread's next call of
   another entry point. */
extern _Thread_local char dbl_refusal[256];

/* The lock, or NULL on a thread that runs a callback of the driver's (a
   host function, a user object's destructor): the entry point then
   refuses the call, as the driver forbids CUDA calls there. */
pthread_mutex_t *dbl_take_lock(void);
void dbl_drop_lock(pthread_mutex_t **held);
/* Calls fn(data) as the driver calls a callback: the lock, which the
   caller holds, given back meanwhile (the driver's thread would not hold
   it), and CUDA calls of this thread refused. */
void dbl_callback(CUhostFn fn, void *data);
/* The calling thread is one of the driver's own from now on: its CUDA
   calls are refused (the user objects' destructors'). */
void dbl_callback_thread(void);
/* Sleeps us microseconds with the lock, which the caller holds, given back
   meanwhile: other threads' calls run, and may change anything. */
void dbl_nap(long us);
CUresult dbl_called(dbl_site *s, const char *func);

/* The first statement of every entry point: takes the lock until the
   function returns, counts the call; ENTRY returns an armed fault at once,
   ENTRY_THEN leaves it in fault_ for a call that must still do its work.
   The name is stringized here, before cuda.h's macros version it. */
#define ENTRY_AT(name)                                                      \
  pthread_mutex_t *held_ __attribute__((cleanup(dbl_drop_lock), unused)) = \
    dbl_take_lock();                                                        \
  if (!held_) return CUDA_ERROR_NOT_PERMITTED;                              \
  static dbl_site site_ = {name, 0, NULL};                                  \
  CUresult fault_ = dbl_called(&site_, __func__)
#define ENTRY_THEN(name) ENTRY_AT(#name)
#define ENTRY(name)                                                         \
  ENTRY_AT(#name);                                                          \
  if (fault_) return fault_

/* -- contexts and handles (device.c) --------------------------------------- */

/* A device's primary context: live while refs > 0; destroying it frees
   everything made in it. The handle stays the same across retains. */
struct CUctx_st { int refs, dev; unsigned char peer[MAX_DEVICES]; };

extern int dbl_ndevices;
#define DBL_SMS 132 /* multiprocessors of each device */
/* Blocks of f with threads threads and shared dynamic bytes that one SM
   holds: 2048 threads, 32 blocks and 228 KiB of shared memory an SM. */
int dbl_occupancy(CUfunction f, unsigned threads, size_t shared);
/* CUDA_DOUBLE_HANG=n: a while loop past n turns (0: never) leaves the
   device running for ever, as a GPU runs a loop that never ends: dbl_hung
   is set; queries say NOT_READY and waits never return (the lock held
   given back meanwhile). */
extern unsigned long dbl_hang;
extern int dbl_hung;
void dbl_wait_forever(pthread_mutex_t *held);
/* CUDA_DOUBLE_BUSY=ms: work sent (eager or a graph's launch) keeps the
   device busy that long, as work that takes a while on a GPU: queries say
   NOT_READY meanwhile and waits sleep until it ends (the lock given back
   meanwhile). */
void dbl_keep_busy(void);
int dbl_busy(void);
double dbl_busy_until(void); /* CLOCK_MONOTONIC seconds */
void dbl_wait_busy(pthread_mutex_t *held);
extern size_t dbl_mem_limit; /* device memory of each device, bytes */
extern struct CUctx_st dbl_primary[MAX_DEVICES];

int dbl_cur_dev(void);
int dbl_is_primary(CUcontext ctx);
CUresult dbl_enter_context(void);
CUresult dbl_enter(void);
CUresult dbl_enter_device(CUdevice dev);
CUresult dbl_enter_graph(void);

/* Every live handle is on one ring, so that destroying the context can free
   what the caller did not (all but graphs) and capture can find its
   streams. Each handle struct starts with an obj. The kinds (obj.kind),
   one row each: the free that the destruction of its context makes, and
   the handle's type (graphs belong to no context: dbl_keep). The enum and
   device.c's table of frees come from this one list, so a kind added
   without its free does not build. */
#define DBL_KINDS(X) \
  X(STREAM, dbl_free_stream, CUstream) X(EVENT, dbl_free_event, CUevent) \
  X(MODULE, dbl_free_module, CUmodule) X(GRAPH, dbl_keep, void *) \
  X(EXEC, dbl_free_exec, CUgraphExec) \
  X(RESOURCE, dbl_free_resource, CUgraphicsResource) \
  X(ARRAY, dbl_free_array, CUarray) X(SAMPLER, dbl_free_sampler, void *) \
  X(EXTMEM, dbl_free_external, obj *) X(EXTSEM, dbl_free_external, obj *) \
  X(MIPMAP, dbl_free_external, obj *)
enum {
#define DBL_KIND_ENUM(k, free, type) O_##k,
  DBL_KINDS(DBL_KIND_ENUM)
#undef DBL_KIND_ENUM
  O_NKINDS
};
typedef struct obj { struct obj *prev, *next; int kind, dev; } obj;
static inline void dbl_keep(void *o) { (void)o; }
extern obj dbl_live;

void *dbl_new_obj(size_t size, int kind);
void dbl_free_obj(void *p);

/* -- bounds on simulated work (stop.c) ------------------------------------ */

/* The work a call sends: when its bound passes (CLOCK_MONOTONIC seconds;
   0: none), cuSimInterrupt's count when it began, and why it stopped
   (CU_SIM_STOP_*, 0: it did not). */
typedef struct dbl_work { double deadline; unsigned seen; int why; } dbl_work;
/* A call that runs work begins it (the thread's bound from now on), and
   its work polls, from any thread: CUDA_ERROR_TIMEOUT once the bound
   passed or an interrupt came since. dbl_work_now is the calling
   thread's. */
dbl_work *dbl_work_begin(void);
dbl_work *dbl_work_now(void);
CUresult dbl_work_check(dbl_work *w);
/* Work that waits for memory: polls ready(arg) (the lock given back
   between polls) while it answers CUDA_ERROR_NOT_READY, as long as the
   work's bound and the watchdog (CUDA_DOUBLE_WAIT_LIMIT) allow; its
   answer, or why the wait ended. */
CUresult dbl_poll(CUresult (*ready)(void *arg), void *arg);

/* -- device memory (memory.c) ---------------------------------------------- */

extern int dbl_capture_check;

/* The host address of [p, p + n) when one allocation holds it, else NULL.
   Pure: a host kernel's load and store of one address look it up once. */
void *dbl_dev_range(CUdeviceptr p, size_t n) __attribute__((pure));
/* The host address of [p, p + n) where a stream memory operation may
   reach it: device memory but managed memory, or page-locked host memory
   (whose device address is its host address); else NULL. */
void *dbl_memop_range(CUdeviceptr p, size_t n);
int dbl_dev_of(CUdeviceptr p, size_t n);
void dbl_free_all_memory(int dev);
/* The allocation (device memory) or page-locked host block (cuMemHostAlloc)
   that holds p: 1 with its base and size. */
int dbl_device_block(uint64_t p, uint64_t *base, uint64_t *size);
int dbl_host_block(uint64_t p, uint64_t *base, uint64_t *size);
#ifdef CUDA_SIM
int dbl_sim_live(void *ud, uint64_t p, size_t n, uint64_t *lo, uint64_t *hi);
#endif

/* -- kernels (kernels.c; the spec kernels' twins: spec/support/twins.c) ---- */

/* One thread of a launch. A bad access sets fault and the kernel stops, as
   a GPU stops the context. */
typedef struct dbl_kctx {
  const unsigned char *args; /* parameter bytes, laid out as on the GPU */
  const size_t *off;         /* offset of each parameter in args */
  unsigned grid[3], block[3], bid[3], tid[3];
  unsigned char *shared;     /* this block's dynamic shared memory */
  size_t nshared;
  CUresult fault;
} dbl_kctx;

typedef void dbl_kfn(dbl_kctx *c);

/* A host version of a kernel: body[1], if any, runs after every thread of
   the block has run body[0] (a __syncthreads()). */
typedef struct dbl_kimpl {
  const char *name;
  dbl_kfn *body[2];    /* body[0] NULL: the kernel does nothing */
  size_t nparams;
  unsigned char size[8];
} dbl_kimpl;

/* What a host version reads and writes, for each of its threads: its
   arguments, global memory, shared memory (inline, as each thread's calls
   were in one file with them). */
static inline void dbl_arg(const dbl_kctx *c, size_t i, void *v, size_t n) {
  memcpy(v, c->args + c->off[i], n);
}

/* The host address of an n-byte global access at p, or NULL after a fault. */
static inline void *dbl_global(dbl_kctx *c, uint64_t p, size_t n) {
  void *h = dbl_dev_range(p, n);
  if (!h) c->fault = CUDA_ERROR_ILLEGAL_ADDRESS;
  else if (p % n) c->fault = CUDA_ERROR_MISALIGNED_ADDRESS;
  return c->fault ? NULL : h;
}

static inline int dbl_ld(dbl_kctx *c, uint64_t p, void *v, size_t n) {
  void *h = dbl_global(c, p, n);
  if (h) memcpy(v, h, n);
  return h != NULL;
}

static inline void dbl_st(dbl_kctx *c, uint64_t p, const void *v, size_t n) {
  void *h = dbl_global(c, p, n);
  if (h) memcpy(h, v, n);
}

/* The shared-memory word at byte offset at, or NULL after a fault. */
static inline unsigned char *dbl_shared_at(dbl_kctx *c, size_t at, size_t n) {
  if (at > c->nshared || n > c->nshared - at) {
    c->fault = CUDA_ERROR_ILLEGAL_ADDRESS;
    return NULL;
  }
  return c->shared + at;
}

void dbl_set_conditional(dbl_kctx *c, uint64_t h, unsigned v);
/* tex2D<float4>(tex, x, y): 0 after a fault (not a texture object). */
int dbl_tex2d(dbl_kctx *c, unsigned long long tex, float x, float y,
              float out[4]);
/* surf2Dwrite of n bytes at byte xbytes of row y: 0 after a fault (not a
   surface object, or out of bounds, the trap mode). */
int dbl_surf2d_store(dbl_kctx *c, unsigned long long surf, long xbytes,
                     long y, const void *v, size_t n);
/* The texture unit and surface accesses, as ptx_sim.h's sim_tex_fn and
   sim_surf_fn (1-D and 2-D fetches; a 3-D one faults): the simulator's,
   and under the two above. */
int dbl_tex_fetch(void *ud, uint64_t handle, int dims, const float c[3],
                  float out[4]);
int dbl_surf_access(void *ud, uint64_t handle, int dims, int64_t x, int64_t y,
                    int64_t z, void *v, size_t n, int store, int mode);
const dbl_kimpl *dbl_find_kernel(const char *name);

/* The twins, in the double only. */
extern const dbl_kimpl dbl_twins[];
extern const size_t dbl_ntwins;

/* -- modules and functions (module.c, jit.c) ------------------------------- */

struct CUfunc_st {
  char *name;
  const dbl_kimpl *impl; /* NULL: no host version; launches are refused */
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

CUfunction dbl_add_function(CUmodule m, const char *name, size_t len,
                            int from_ptx, size_t n, const size_t *pair);
void dbl_free_module(CUmodule m);
int dbl_is_text(const unsigned char *p);
CUresult dbl_load_ptx(CUmodule m, const char *text, const char **why);
#ifdef CUDA_SIM
CUresult dbl_load_image_ptx(CUmodule m, const unsigned char *p,
                            const char **why);
#endif

/* -- work: kernel launches, copies and memsets (work.c) -------------------- */

/* One unit of stream work, as run at once or held by a graph node. */
typedef struct op {
  CUgraphNodeType type;     /* KERNEL, MEMCPY, MEMSET, ... (below) */
  CUfunction f;             /* kernel */
  unsigned grid[3], block[3], shared;
  unsigned char *args;      /* owned copy of f->argbytes parameter bytes;
                               EXT_SEMAS_*: of the semaphores and params */
  unsigned nsems;           /* EXT_SEMAS_SIGNAL and _WAIT: how many;
                               BATCH_MEM_OP: its operations (args: a
                               CUstreamBatchMemOpParams each) */
  CUdeviceptr dst, src;     /* memcpy and memset: device memory, unless */
  void *hdst;               /* memcpy: ... host memory takes a side; it is */
  const void *hsrc;         /* read and written when the copy runs */
  size_t bytes;             /* memcpy: bytes, or bytes a row */
  size_t pitch, width, height; /* memset: height rows of width elements;
                                  memcpy: height rows a slice (0: 1-D) */
  size_t depth, dpitch, spitch, dslice, sslice; /* memcpy of a box: slices,
                                  and the sides' row and slice strides */
  unsigned value, elem;     /* memset: the element and its size in bytes */
  CUgraphConditionalNodeType ctype; /* CONDITIONAL: if, while or switch */
  CUgraphConditionalHandle handle;  /* CONDITIONAL */
  unsigned nbodies;         /* CONDITIONAL: its bodies; GRAPH: 1, the child */
  struct CUgraph_st **bodies; /* a node's: owned body graphs */
  struct plan *plans;       /* an instantiated node's: owned body plans */
  int disabled;             /* an instantiated node's: cuGraphNodeSetEnabled */
  CUhostFn fn;              /* HOST: cuLaunchHostFunc's function and data */
  void *data;
  struct CUevent_st *event; /* EVENT_RECORD: the event it records */
  unsigned char prog;       /* KERNEL: launched with programmatic stream
                               serialization (a capture makes its edges
                               from kernel nodes programmatic) */
  uint64_t id;              /* a node's CUPTI id: its graph's id << 32 |
                               its position there; an instantiated graph's
                               copies are renumbered as its own nodes
                               (graph_exec.c); 0 for eager work */
  const char *where;        /* the Lua line of the call that sent it, or
                               captured it (queue.c's interned; NULL) */
} op;
/* Kernel activity records (activity.c): whether they are on, the time in
   ns, and a kernel node's run. */
int dbl_activity_on(void);
uint64_t dbl_activity_now(void);
uint32_t dbl_graph_id(void); /* the next CUPTI graph id */
uint32_t dbl_exec_id(CUgraphExec x); /* an instantiated graph's */
void dbl_activity_kernel(uint64_t node, uint64_t start, uint64_t end);
void dbl_activity_launch(void); /* a graph's launch begins */

CUresult dbl_run_op(const op *o, int dry);
int dbl_copy_op(op *dst, const op *src);
size_t dbl_op_bytes(const op *o); /* the bytes of its args */
CUresult dbl_prepare_launch(op *o, void **params, void **extra);
/* Runs a kernel: SUCCESS, or CUDA_ERROR_TIMEOUT when its work was stopped
   (dbl_work_check); a fault is sticky, not returned. */
CUresult dbl_run_kernel(const op *o);
CUresult dbl_run_memory_node(const op *o); /* memory.c */
void dbl_free_resource(CUgraphicsResource res); /* a GL buffer's (gl.c) */
/* A GL buffer's stand-in memory: device memory kernels reach only while
   it is mapped. */
CUresult dbl_alloc_gl_memory(CUdeviceptr *p, size_t n);
void dbl_map_gl_memory(CUdeviceptr p, int on);
void dbl_free_gl_memory(CUdeviceptr p);
/* A module variable's memory, which the module owns, as device memory. */
CUresult dbl_add_module_memory(void *p, size_t n);
/* A CUDA array's texels: device memory that only copies (and texture and
   surface objects) reach. */
CUresult dbl_alloc_array_memory(CUdeviceptr *p, size_t n);
void dbl_free_array_memory(CUdeviceptr p);
/* The mapping of external memory at p as device memory: a buffer (freed by
   cuMemFree) or a mipmapped array's levels (dropped with it). */
CUresult dbl_add_external_memory(void *p, size_t n, int array);
void dbl_drop_external_memory(void *p);

/* -- CUDA arrays (arrays.c) ------------------------------------------------ */

/* Texels laid out row by row, rows slice by slice, at mem. */
struct CUarray_st {
  obj h;
  CUdeviceptr mem;
  CUDA_ARRAY3D_DESCRIPTOR desc;
  size_t texel, pitch, rows, slices; /* bytes a texel and a row; rows a
                                        slice; slices */
  struct CUmipmappedArray_st *mipmap; /* a level's: the array that owns it
                                         (not on the ring of handles) */
};
void dbl_free_array(CUarray a);
/* A new array of descriptor d (checked), its texels zeroed: cuArray3DCreate's
   and the GL images' stand-ins. */
CUresult dbl_array_new(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d);
/* Checks d (flags: those allowed) and lays a out after it, but for mem. */
CUresult dbl_array_layout(CUarray a, const CUDA_ARRAY3D_DESCRIPTOR *d,
                          unsigned flags);

/* -- external memory and semaphores (external.c) --------------------------- */

/* Frees an external memory, semaphore or mipmapped array (O_EXTMEM, ...). */
void dbl_free_external(obj *o);
void dbl_unmap(uintptr_t p, size_t n); /* a mapping made by external.c */
/* A signal or wait op (type) of n semaphores with their params, checked;
   o->args is the caller's then. */
CUresult dbl_semas_op(op *o, CUgraphNodeType type,
                      const CUexternalSemaphore *sems, const void *params,
                      unsigned n);
size_t dbl_semas_bytes(const op *o);
/* Signals, or waits (polling, the lock given back), unless dry. */
CUresult dbl_run_semas(const op *o, int dry);

/* -- stream memory operations (memops.c) ----------------------------------- */

/* A BATCH_MEM_OP op of the n operations at ops (checked; a copy in its
   args), and what it does: checks their memory and, unless dry, writes
   and waits (polling, the lock given back), in order. */
CUresult dbl_memops_op(op *o, const CUstreamBatchMemOpParams *ops,
                       unsigned n);
CUresult dbl_run_memops(const op *o, int dry);

/* -- texture and surface objects (textures.c) ------------------------------ */

void dbl_free_sampler(void *s);
/* One side of the 3-D copy p, when it is an array (*mt), as device memory:
   its base, pitch and rows a slice, after checking that p's box lies
   inside it from x bytes, row y, slice z. Any other side is left as it
   is. */
CUresult dbl_array_side(const CUDA_MEMCPY3D *p, CUmemorytype *mt, CUarray a,
                        size_t x, size_t y, size_t z, CUdeviceptr *base,
                        size_t *pitch, size_t *rows);
void dbl_drop_module_memory(void *p);
/* An allocation node's op joins (delta 1) or leaves (-1) a graph or an
   instantiated graph; the memory goes when the last leaves, unless it is
   allocated then (memory.c). */
void dbl_hold_graph_memory(const op *o, int delta);

/* -- user objects (userobj.c) ---------------------------------------------- */

/* References to user objects that a graph or an instantiated graph holds. */
typedef struct uoref { struct CUuserObject_st *o; unsigned n; } uoref;
typedef struct uorefs { uoref *v; size_t n, cap; } uorefs;
/* to holds the references from holds, as new ones. Nonzero when out of
   memory. */
int dbl_uo_copy(uorefs *to, const uorefs *from);
/* Lets go of r's references once the work in flight is over: at time done
   (CLOCK_MONOTONIC seconds; 0: at once, as dbl_work_done says). */
void dbl_uo_release(uorefs *r, double done);
/* When the device's work sent so far is over: 0 (it is), or a time. */
double dbl_work_done(void);
/* fn(data) on the destructors' thread at time at, as a host function
   the driver runs once the work sent before it is over; CUDA_SUCCESS, or
   out of memory (no thread could be made). */
CUresult dbl_host_later(CUhostFn fn, void *data, double at);

/* -- graphs (graph.c, graph_exec.c) ---------------------------------------- */

/* A set of graph nodes in insertion order. */
typedef struct nodeset { CUgraphNode *v; size_t n, cap; } nodeset;

int dbl_set_push(nodeset *s, CUgraphNode x, int dup);
int dbl_set_union(nodeset *dst, const nodeset *src);
int dbl_set_assign(nodeset *dst, const nodeset *src);

struct CUgraphNode_st {
  op op;
  struct CUgraph_st *graph; /* the graph it belongs to */
  nodeset deps;   /* nodes of the same graph, each added before this one */
  nodeset prog;   /* those of deps whose edge is programmatic: a kernel
                     node's, from its programmatic port */
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
  uint32_t cupti_id;        /* CUPTI's graph id (activity.c): in the order
                               graphs are made */
  nodeset nodes;
  struct CUgraph_st *parent;
  struct CUgraph_st *origin; /* cuGraphClone's copy: the graph copied */
  cond *conds;              /* handles made in this graph */
  size_t nconds;
  uorefs uos;               /* user objects it holds */
};

/* Dependencies of every node as sorted indices: node i's are
   dep[start[i] .. start[i + 1]), each index times two, plus one for a
   programmatic edge. */
typedef struct edges { size_t *start, *dep; } edges;

void dbl_free_graph(CUgraph g);
/* Its instantiations no longer name it (graph_exec.c). */
void dbl_forget_graph(CUgraph g);
CUgraphNode dbl_add_node(CUgraph g, const op *o, const nodeset *deps);
int dbl_make_edges(CUgraph g, edges *e);
int dbl_nodes_of(CUgraph g, const CUgraphNode *v, size_t n);
int dbl_default_edges(const CUgraphEdgeData *d, size_t n);
/* The data of the edge from dep into node: default, or programmatic. */
void dbl_edge_data(CUgraphNode node, CUgraphNode dep, CUgraphEdgeData *d);

void dbl_free_exec(CUgraphExec x);
op *dbl_exec_op(CUgraphExec x, CUgraphNode hNode);
/* Runs a launch of x (graph_exec.c): cuGraphLaunch's work. */
CUresult dbl_graph_run(CUgraphExec x);
/* Whether x has semaphore nodes (its launch runs when sent), or copy nodes
   with a host side; and whether one of these breaks the rules of an
   access of [p, p + n) (1: it reads the memory and the access writes; 2:
   it writes the memory). */
int dbl_exec_semas(CUgraphExec x);
int dbl_exec_host_side(CUgraphExec x);
int dbl_exec_host_meets(CUgraphExec x, uint64_t p, uint64_t n, int write);
int dbl_set_handle(uint64_t h, unsigned v);
int dbl_auto_free(void);

/* -- streams, events and capture (streams.c, capture.c) -------------------- */

/* A capture sequence: begun on origin, joined by the streams that waited on
   its events. Its nodes go into g. */
typedef struct capture {
  struct capture *next;
  CUstream origin;
  CUstreamCaptureMode mode;
  pthread_t thread;     /* the thread that began it */
  int invalid;          /* a rule was broken: ending it yields no graph */
  unsigned long id;
  CUgraph g;
  int owned;            /* g was made by the capture (not ...ToGraph) */
  nodeset orphans;      /* tips of joined streams destroyed meanwhile */
} capture;

typedef struct queue queue; /* a stream's pending work (queue.c) */
typedef struct task task;   /* one call's work in a queue */

/* Whether [p, p + n) meets [a, a + m). */
static inline int dbl_meets(uint64_t p, uint64_t n, uint64_t a, uint64_t m) {
  return p < a + m && a < p + n;
}

struct CUstream_st {
  obj h;
  unsigned flags;
  int priority;
  queue *q;             /* its work still to run (strict mode) */
  capture *cap;         /* the capture this stream takes part in, or NULL */
  nodeset tips;         /* while capturing: what new work depends on; has
                           room for one node from creation on */
};

struct CUevent_st {
  obj h;
  unsigned flags;
  int recorded;         /* recorded outside capture: t is its time once done */
  int done;             /* its record has run (strict mode: when its queue
                           reached it) */
  struct timespec t;
  unsigned long cap_id; /* last recorded in this capture (0: not in one); it
                           stays set after the capture */
  nodeset tips;         /* that stream's tips then */
  uint64_t executed;    /* the simulator's thread-instructions then */
  queue *rq;            /* strict mode: the queue of its last record, and */
  uint64_t rseq;        /* the record's place there (NULL: nothing to run) */
  struct vclock *vc;    /* what the record follows */
};

extern capture *dbl_captures; /* in progress */

capture *dbl_find_capture(unsigned long id);
void dbl_end_capture(capture *c);
CUresult dbl_unsafe_call(void);
CUresult dbl_legacy_blocked(int invalidate);
CUresult dbl_capture_op(CUstream s, const op *o);

CUstream dbl_stream_of(CUstream s);
CUresult dbl_stream_usable(CUstream s);
CUresult dbl_submit(CUstream s, op *o);
void dbl_free_stream(CUstream s);
void dbl_free_event(CUevent e);
/* e records now: a stream's cuEventRecord, or an event record node. */
void dbl_event_now(CUevent e);
#ifdef CUDA_SIM
uint64_t dbl_sim_executed(void); /* thread-instructions so far (kernels.c) */
#endif
/* The record of e ran (or ran at once): its time taken. */
void dbl_event_done(CUevent e);

#pragma GCC visibility pop

#endif
