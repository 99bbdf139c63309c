/* The base layer: the door to the driver, device and context records, the
   object model (creation, the checkers, close three ways), the owner of
   every driver handle (release.c) and value conversion. The layers above
   (capture, types, kernel, graph) include this header; it includes
   nothing of theirs. */
#ifndef CUGRAPH_BASE_H
#define CUGRAPH_BASE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <lua.h>
#include <lauxlib.h>
#include "base/ctype.h"
#include "base/driver.h"

/* The driver handles the runtime holds, by how they are destroyed: the
   enum and the name of the call that destroys each. release.c's destroy
   switch has a case for each and no default, so a kind added here without
   its way of being destroyed does not build (-Wswitch, -Werror in CI). */
#define CG_HKINDS(X) \
  X(NONE, "") X(MEM, "cuMemFree") X(HOST, "cuMemFreeHost") \
  X(MODULE, "cuModuleUnload") X(STREAM, "cuStreamDestroy") \
  X(EVENT, "cuEventDestroy") X(GRAPH, "cuGraphDestroy") \
  X(EXEC, "cuGraphExecDestroy") X(GLRES, "cuGraphicsUnregisterResource") \
  X(COMM, "ncclCommDestroy") X(DLPACK, "DLPack deleter") \
  X(BLAS, "cublasDestroy") X(FFT, "cufftDestroy") \
  X(ARRAY, "cuArrayDestroy") X(TEXOBJ, "cuTexObjectDestroy") \
  X(SURFOBJ, "cuSurfObjectDestroy") X(EXTMEM, "cuDestroyExternalMemory") \
  X(EXTSEM, "cuDestroyExternalSemaphore") \
  X(PRIMARY, "cuDevicePrimaryCtxRelease") /* a device's primary context */
typedef enum cg_hkind {
#define CG_HKIND_ENUM(k, api) CG_H_##k,
  CG_HKINDS(CG_HKIND_ENUM)
#undef CG_HKIND_ENUM
  CG_H_NKINDS
} cg_hkind;

/* The Lua types (cg_obj.kind), one descriptor each: its metatable's name,
   the kind of driver handle it holds in cg_obj.drv, and whether a C graph
   made from a graph that pins such an object holds that handle too (what
   a graph's nodes read or run: memory, host memory, code, events, a
   communicator's resources; a stream's nodes do not refer to it, a graph is
   copied whole, a kernel's code is its module's, a node's records its
   graph's, a GL resource is mapped only inside its map scope, out of which
   a graph that captured it cannot live), and how the docs name one
   (`b:download()`, `#b`). The enum, the names and release.c's table come
   from this one list. */
#define CG_KINDS(X) \
  X(STREAM, "Stream", STREAM, 0, "s") X(BUFFER, "Buffer", MEM, 1, "b") \
  X(SCALAR, "Scalar", MEM, 1, "sc") X(EVENT, "Event", EVENT, 1, "e") \
  X(MODULE, "Module", MODULE, 1, "m") X(KERNEL, "Kernel", NONE, 0, "k") \
  X(GRAPH, "Graph", EXEC, 0, "g") X(GLRESOURCE, "GLResource", GLRES, 0, "r") \
  X(CONDITION, "Condition", MEM, 1, "c") \
  X(HOSTBUF, "HostBuffer", HOST, 1, "h") X(NODE, "Node", NONE, 0, "node") \
  X(COMM, "Comm", COMM, 1, "comm") X(DLTENSOR, "DLTensor", DLPACK, 1, "t") \
  X(BLAS, "Blas", BLAS, 1, "blas") X(FFT, "FFT", FFT, 1, "p") \
  X(ARRAY, "Array", ARRAY, 1, "a") X(TEXTURE, "Texture", TEXOBJ, 1, "tex") \
  X(SURFACE, "Surface", SURFOBJ, 1, "surf") \
  X(EXTMEM, "ExternalMemory", EXTMEM, 1, "mem") \
  X(EXTSEM, "ExternalSemaphore", EXTSEM, 1, "sem") \
  X(GRAPHED, "Graphed", NONE, 0, "f")
typedef enum cg_kind {
#define CG_KIND_ENUM(k, name, hk, shared, recv) CG_##k,
  CG_KINDS(CG_KIND_ENUM)
#undef CG_KIND_ENUM
  CG_NKINDS
} cg_kind;
extern const char *const cg_kind_names[]; /* "cugraph.Buffer", ... */

typedef union cg_handle {
  CUdeviceptr mem;          /* CG_H_MEM: cuMemAlloc, cuMemAllocAsync */
  void *host;               /* CG_H_HOST: cuMemHostAlloc */
  CUmodule module;
  CUstream stream;
  CUevent event;
  CUgraph graph;
  CUgraphExec exec;
  CUgraphicsResource res;   /* CG_H_GLRES: cuGraphicsGLRegisterBuffer */
  void *comm;               /* CG_H_COMM: an ncclComm_t */
  uintptr_t dlpack;         /* CG_H_DLPACK: a DLManagedTensor, or with bit
                               0 set a DLManagedTensorVersioned: destroyed
                               by calling its deleter */
  struct cg_blas_res *blas; /* CG_H_BLAS: a cuBLAS handle and its
                               workspace (base/blas.h) */
  struct cg_fft_res *fft;   /* CG_H_FFT: a cuFFT plan and its work area
                               (base/fft.h) */
  CUarray array;            /* CG_H_ARRAY: cuArray3DCreate */
  CUtexObject tex;          /* CG_H_TEXOBJ: cuTexObjectCreate */
  CUsurfObject surf;        /* CG_H_SURFOBJ: cuSurfObjectCreate */
  struct cg_extmem_res *extmem; /* CG_H_EXTMEM: an imported memory and
                               what was mapped from it (base/external.h) */
  CUexternalSemaphore extsem; /* CG_H_EXTSEM: cuImportExternalSemaphore */
  CUdevice dev;             /* CG_H_PRIMARY: the device whose primary
                               context was retained (cg_destroy only) */
  void *p;                  /* any pointer handle, as release.c sees it */
} cg_handle;

/* An imported external memory and the mipmapped arrays mapped from it,
   destroyed with it (their level arrays are the Arrays' handles); the
   memory itself is the engine's when borrowed. */
struct cg_extmem_res {
  CUexternalMemory mem;
  int borrowed;
  size_t nmips, cmips;
  CUmipmappedArray *mips;
};

typedef struct cg_ctx cg_ctx;
typedef struct cg_obj cg_obj;
typedef struct cg_share cg_share;
typedef struct cg_capture cg_capture;       /* capture/capture.h */
typedef struct cg_capstate cg_capstate;     /* capture/: per state */
typedef struct cg_graphstate cg_graphstate; /* graph/: per state */
typedef struct cg_ctxwait cg_ctxwait;       /* wait.c */
typedef struct cg_trace cg_trace;           /* trace.c */
typedef struct cg_keepq cg_keepq;           /* release.c */

/* What a type frees beside its handle (a stream's private event, a view's
   count in its parent), when the object closes; NULL for nothing. */
typedef void (*cg_releaser)(lua_State *L, cg_obj *o);
/* Run once by the sentinel's finalizer, last, before the devices close. */
typedef void (*cg_closer)(lua_State *L, cg_ctx *root);

/* Peer access from one device to another, as far as the core knows. */
enum { CG_PEER_UNKNOWN, CG_PEER_ON, CG_PEER_NONE };
enum { CG_MAXPEER = 64 }; /* ordinals below this have their access cached */
enum { CG_MAXCLOSERS = 4 };

/* One per device a lua_State uses: its primary context. The first, the
   sentinel, is a userdata created first in luaopen so it is finalized last;
   it is the root of the others (plain userdata anchored in the registry,
   released by the sentinel's finalizer) and holds what the whole state
   shares: the capture in progress is set in every device's record alike,
   the counters, metatables, finalizer errors and the upper layers' state
   are the root's. The driver is touched only when the first GPU object of
   a device is made. */
struct cg_ctx {
  cg_ctx *root;         /* the sentinel (itself there) */
  cg_ctx *next;         /* root: the other devices' records, a list */
  cg_ctx *active;       /* root: the device constructors use (cuda.on) */
  unsigned char peer[CG_MAXPEER]; /* access to memory of device i */
  int retained;         /* the primary context is held */
  int ready;            /* ... and the device's limits and stream known */
  int closed;           /* sentinel finalized: children skip the driver */
  int hung;             /* a wait timed out and its work still runs (as
                           cg_still_hung asks): frees, which would wait for
                           it, are skipped meanwhile */
  CUstream hung_stream; /* ... the stream waited for, or */
  CUevent hung_event;   /* the event, or */
  cg_ctxwait *hung_wait; /* the whole-device wait left running */
  CUresult poison;      /* sticky error: the context can never work again */
  const char *poison_api;
  int ordinal;
  CUdevice dev;
  CUcontext cu;
  CUstream stream;      /* default stream for calls that name none */
  int max_threads, max_block[3], max_grid[3], max_shared, max_shared_optin;
  unsigned char memops; /* the device's stream memory operations, once
                           asked (CG_MEMOPS_*) */
  cg_capture *capture;  /* the capture in progress, or NULL */
  /* root: the first call of the capture in progress that the driver
     refused with a capture error (cg_fail), for the errors after it */
  struct cg_broke { const char *api; CUresult code; char where[120]; } broke;
  int nccl_group;       /* root: depth of cuda.nccl_group calls */
  int mapped;           /* root: GLResource map scopes open (a capture can
                           pin a scoped buffer only inside one) */
  unsigned graph_ids, captures;
  unsigned stream_clock; /* root: advanced by every use of a stream object
                            but k:launch's, and whatever else may make a
                            stream's last kernel (types.h) stale */
  const void *mt[CG_NKINDS]; /* metatable identities, for fast type tests */
  int mtref[CG_NKINDS]; /* root: the metatables' registry references */
  cg_releaser release[CG_NKINDS]; /* of each kind, from cg_newtype */
  struct cg_deferred { unsigned char hk; cg_handle h; } *deferred;
  size_t ndeferred, cdeferred; /* frees held back during a capture */
  unsigned gc_errors;   /* driver errors seen in finalizers */
  char gc_error[200];   /* the last of them */
  cg_capstate *capstate;     /* root: the capture layer's, or NULL */
  cg_graphstate *graphstate; /* root: the graph layer's, or NULL */
  cg_closer closers[CG_MAXCLOSERS]; /* root: the layers' (cg_at_close) */
  int nclosers;
  double timeout;       /* root: waits end after this many seconds (0: never;
                           CUGRAPH_LUA_TIMEOUT) */
  /* root: pushes what is still running on stream s (NULL: on any), for a
     wait that timed out: the graph layer's */
  void (*busy)(lua_State *L, cg_ctx *ctx, CUstream s);
  /* root: told before a stream of ctx is destroyed, so that no graph's
     keep waits on it later: the graph layer's */
  void (*stream_gone)(cg_ctx *ctx, CUstream s);
  cg_trace *trace;      /* root: the script's trace and NVTX ranges, or NULL */
  cg_keepq *keepq;      /* root: its graphs' keeps the driver released, for
                           its thread to drop (release.c), or NULL */
};

enum { CG_MEMOPS_KNOWN = 1, CG_MEMOPS_64 = 2, CG_MEMOPS_NOR = 4 };

/* Header of every object. open == 0 once freed; the handle is then gone.
   An object that uses another's handle or records (a view its buffer's
   memory, a kernel its module's code, a node its graph's records) has it
   as parent, also its user value 1: the parent outlives it, and a capture
   that pins the object pins the parent too. */
struct cg_obj {
  cg_ctx *ctx;
  cg_obj *parent;
  cg_handle drv;        /* the driver handle, of the kind's cg_hkind */
  cg_share *share;      /* set once a C graph holds drv: the share frees it,
                           not the object (release.c) */
  unsigned char kind;   /* cg_kind */
  unsigned char open;
  unsigned char owned;  /* the runtime frees drv; else it is borrowed (the
                           engine's, a view's parent's) */
  unsigned char zombie; /* collected while a graph used it: released by the
                           last unpin */
  unsigned char scoped; /* a buffer over memory mapped for a scope (a
                           GLResource's map): unusable once it ends */
  unsigned char graphmem; /* a buffer a graph's allocation node makes:
                           CG_GRAPHMEM_LIVE from a launch of the graph until
                           freed, CG_GRAPHMEM_GONE otherwise; 0: not one */
  unsigned uses;        /* live graphs that captured this object */
  unsigned graph;       /* id of one of them (0: unknown), for messages */
  unsigned pinned;      /* serial of the capture whose pins hold it */
  unsigned views;       /* open views over its memory: freed after them */
};

enum { CG_GRAPHMEM_LIVE = 1, CG_GRAPHMEM_GONE };

/* -- errors and the driver (context.c) ------------------------------------ */

/* Checked driver call that keeps the API's name for the error object. */
#define CU(L, ctx, fn, ...) cg_check((L), (ctx), #fn, cg_drv.fn(__VA_ARGS__))
void cg_fail(lua_State *L, cg_ctx *ctx, const char *api, CUresult r);
/* "chunk:line" of the Lua code nearest the top of the stack, or "". */
void cg_lua_line(lua_State *L, char *buf, size_t size);
static inline void cg_check(lua_State *L, cg_ctx *ctx, const char *api,
                            CUresult r) {
  if (r != CUDA_SUCCESS) cg_fail(L, ctx, api, r);
}
/* Marks the context unusable when r is sticky (the first such error stays). */
void cg_poison(cg_ctx *ctx, const char *api, CUresult r);
/* Raises the error object of a poisoned context: the sticky error, and
   that the process must restart. */
int cg_error_poisoned(lua_State *L, cg_ctx *ctx);

/* -- devices and contexts (context.c) ------------------------------------- */

cg_ctx *cg_sentinel(lua_State *L);            /* no driver call */
/* Makes the sentinel, first of all objects (luaopen: it is finalized
   last), or returns the one made before. */
cg_ctx *cg_sentinel_new(lua_State *L);
cg_ctx *cg_context(lua_State *L);             /* ready for driver calls: the
                                                 device cuda.on chose */
cg_ctx *cg_device(lua_State *L, int ordinal); /* that device's, ready */
cg_ctx *cg_device_record(lua_State *L, int ordinal); /* made, not started */
void cg_current(lua_State *L, cg_ctx *ctx);   /* makes ctx current, raising */
/* makes cu current on this thread unless the core knows it is (the
   thread-local compare every path to the driver makes); no Lua */
CUresult cg_make_current(CUcontext cu);
extern _Thread_local CUcontext cg_bound;
int cg_alive(cg_ctx *ctx);                    /* finalizers may call driver */
int cg_still_hung(cg_ctx *ctx); /* a timed-out wait's work still runs */
/* Lets go of a whole-device wait left running (its thread keeps its
   own reference). */
void cg_drop_wait(cg_ctxwait *w);
void cg_set_capture(cg_ctx *ctx, cg_capture *c); /* in every device's */
/* Raises "what: objects of device a and device b" for work that must stay
   on one device. */
int cg_error_devices(lua_State *L, cg_ctx *a, cg_ctx *b, const char *what);
/* NULL when work on device ctx may read memory of device other (peer
   access is turned on here when it can be), else why not (pushed, naming
   both devices); cg_check_reach raises "what: why". */
const char *cg_reach_why(lua_State *L, cg_ctx *ctx, cg_ctx *other);
void cg_check_reach(lua_State *L, cg_ctx *ctx, cg_ctx *other,
                    const char *what);
/* Whether device a may access memory of device b (CG_PEER_*), asked once;
   and access from a to b turned on. */
int cg_peer_state(lua_State *L, cg_ctx *a, cg_ctx *b);
void cg_enable_peer(lua_State *L, cg_ctx *a, cg_ctx *b);
/* Raises "what inside a graph capture: fix" while a capture runs. */
void cg_check_outside(lua_State *L, cg_ctx *ctx, const char *what,
                      const char *fix);
/* Registers what a layer frees when the state closes (at most
   CG_MAXCLOSERS). */
void cg_at_close(cg_ctx *root, cg_closer fn);

/* -- waits (wait.c) -------------------------------------------------------- */

/* Waits for all work of the device (cuCtxSynchronize), checked. The driver
   refuses that while any stream of the context captures and breaks those
   captures, in any state of the process: such a wait first waits until no
   capture of the device is open (cg_gate_*), and one made by a thread that
   holds a capture open itself is refused with a message. */
void cg_sync(lua_State *L, cg_ctx *ctx);
/* Waits that can be bounded: for all work of the device (cg_sync with the
   state's default timeout, cg_sync_for with one), of stream s, or until
   event e. A timeout t > 0 ends the wait after t seconds with an error
   object CUDA_ERROR_TIMEOUT that says what is still running; t <= 0 waits
   as long as the work runs. api names the call for errors. */
void cg_sync_for(lua_State *L, cg_ctx *ctx, double t);
void cg_wait_stream(lua_State *L, cg_ctx *ctx, CUstream s, double t);
void cg_wait_event(lua_State *L, cg_ctx *ctx, CUevent e, double t);
/* The timeout argument at idx in seconds (absent: the state's default;
   math.huge: none), positive and not NaN. */
double cg_opttimeout(lua_State *L, int idx);
/* A capture of the device opens and closes (capture.c): whole-device waits
   of other threads hold back meanwhile. Opening waits while another
   thread's whole-device wait runs, as long as the state's timeout allows:
   0 when it ran out (nothing opened; cg_error_gate raises its error). */
int cg_gate_enter(cg_ctx *ctx);
void cg_gate_leave(cg_ctx *ctx);
int cg_error_gate(lua_State *L, cg_ctx *ctx);
/* For a thread of the runtime's own (no state): waits until no capture
   of context cu is open and holds new ones back (as a whole-device wait
   does) until cg_gate_open; no Lua, no timeout. */
void cg_gate_shut(CUcontext cu);
void cg_gate_open(CUcontext cu);
/* Whether a capture of context cu is open, in any state of the process. */
int cg_gate_capturing(CUcontext cu);

/* Simulated work: the software driver runs a kernel's or a graph's work
   inside the call that launches it, so that call is a wait too, bounded by
   the state's timeout (given to the driver before work is sent, once per
   change on a thread: cg_work_bound; on a GPU one compare) and stopped by
   cg_interrupt (async-signal-safe: cugraph_interrupt). A call whose work
   was stopped returns CUDA_ERROR_TIMEOUT, and cg_work_stopped(r) says why
   (CU_SIM_STOP_*; 0: r is no such stop). cg_fail raises a timed-out wait's
   error object for it (an interrupt: "interrupted! ..."), cg_error_stopped
   the same naming what ran on stream s (NULL: the device's last graph). */
extern _Thread_local double cg_work_limit;
void cg_work_limit_set(cg_ctx *ctx);
static inline void cg_work_bound(cg_ctx *ctx) {
  if (cg_drv.cuSimSetWorkLimit && ctx->root->timeout != cg_work_limit)
    cg_work_limit_set(ctx);
}
void cg_interrupt(void);
int cg_work_stopped(CUresult r);
/* The simulator's reports name the Lua line of each call that sends work
   (cuSimSetLuaLine): the script's line nearest the top of the stack, past
   the front end's frames, given when it changes. Called where every path
   to the driver passes (an object's checks, the context's); on a GPU one
   compare. */
void cg_sim_line_(lua_State *L);
static inline void cg_sim_line(lua_State *L) {
  if (cg_drv.cuSimSetLuaLine) cg_sim_line_(L);
}
int cg_error_stopped(lua_State *L, cg_ctx *ctx, const char *api, int why,
                     CUstream s);
/* The same with what ran given (busy: a string after ": ", or ""). */
int cg_error_stopped_busy(lua_State *L, cg_ctx *ctx, const char *api,
                          int why, const char *busy);

/* -- the script's trace (trace.c) ----------------------------------------- */

/* Turns the trace on for a new state when CUGRAPH_LUA_PROFILE names a file
   or an NVTX tool is attached (NVTX_INJECTION64_PATH). */
void cg_trace_open(cg_ctx *root);
int cg_trace_begin_(lua_State *L, cg_ctx *ctx, CUstream s, const char *what,
                    const char *name);
void cg_trace_end_(lua_State *L, cg_ctx *ctx, int tok);
/* Around one eager call on stream s (what: "kernel", "copy", "fill",
   "graph", a literal; name: the kernel's, or NULL): times it when the trace
   is on, outside captures, and puts it in an NVTX range named by the call
   and its Lua line when a tool is attached, while capturing too. One
   compare when neither is on. Calls do not nest. */
static inline int cg_trace_begin(lua_State *L, cg_ctx *ctx, CUstream s,
                                 const char *what, const char *name) {
  return ctx->root->trace ? cg_trace_begin_(L, ctx, s, what, name) : -1;
}
static inline void cg_trace_end(lua_State *L, cg_ctx *ctx, int tok) {
  if (tok != -1) cg_trace_end_(L, ctx, tok);
}
/* A driver error raised inside such a call: its NVTX range is popped now
   (one that raised otherwise is popped at the next call's begin). */
void cg_trace_raised(cg_ctx *ctx);
/* A named NVTX range (s:label's scope) when a tool is attached. */
void cg_trace_push(cg_ctx *ctx, const char *name);
void cg_trace_pop(cg_ctx *ctx);
/* A node of an instantiated graph as the trace names the kernels it runs
   (a table of them by CUPTI's position, graph/positions.c). */
typedef struct cg_trace_node {
  unsigned rec;         /* its record's index + 1, as g:nodes numbers it;
                           0: no record (a library call's node) */
  char name[48], where[80]; /* the kernel's name ("fill", "copy" for
                           those), the Lua line that captured it */
} cg_trace_node;
/* The trace names the kernel runs of exec, graph #graph's instantiation,
   by v[position] (n of them, copied) from now on, and records CUPTI's
   kernel activity from its first such call; v NULL: they go unnamed, for
   the reason why. Called once an exec, and again when its nodes' lines
   change (g:update). */
void cg_trace_graph(cg_ctx *ctx, CUgraphExec exec, unsigned graph,
                    const cg_trace_node *v, size_t n, const char *why);
/* s as a JSON string, quoted and escaped. */
void cg_json_string(FILE *f, const char *s);

/* -- objects (object.c) --------------------------------------------------- */

/* A new object of kind, marked closed (open stays 0 until the driver call
   that fills it succeeds), owning its handle. */
void *cg_newobj(lua_State *L, cg_ctx *ctx, size_t size, cg_kind kind);
/* The same with nuv user values (cg_newobj: 2). */
void *cg_newobjuv(lua_State *L, cg_ctx *ctx, size_t size, cg_kind kind,
                  int nuv);
void *cg_checkobj(lua_State *L, int idx, cg_kind kind); /* open, ctx sane */
void *cg_toobj(lua_State *L, int idx, cg_kind kind);    /* freed is fine */
void *cg_testobj(lua_State *L, int idx, cg_kind kind);  /* NULL if other */
/* The object of any kind at idx, or NULL; ctx: any record of the state
   (its metatables are compared). */
cg_obj *cg_toany(lua_State *L, const cg_ctx *ctx, int idx);
void *cg_checkself(lua_State *L, cg_kind kind); /* cg_checkobj of argument
  1, fast, in functions of the methods table given to cg_newtype */
void *cg_checkself_keep(lua_State *L, cg_kind kind); /* the same, leaving one
  value pushed: for hot paths that count their arguments first */
/* Finalizers of the binding run so far, in every state: while the count
   stands still, a userdata address seen before is the same object. */
extern atomic_uint cg_epoch;
static inline unsigned cg_epoch_now(void) {
  return atomic_load_explicit(&cg_epoch, memory_order_relaxed);
}
void cg_collected(void); /* a finalizer ran */
/* The checks of cg_checkobj after the type test (open, context sane and
   current on this thread), inline: for an object known by its address. */
void cg_ready_slow(lua_State *L, cg_obj *o);
static inline void cg_ready(lua_State *L, cg_obj *o) {
  cg_sim_line(L);
  if (!o->open || o->scoped || o->ctx->poison || o->ctx->cu != cg_bound)
    cg_ready_slow(L, o);
}
/* Holds the collector until the calling C function returns or raises: no
   finalizer runs meanwhile, so nothing the function looked up (objects,
   their handles, a graph's records) is freed under it by a finalizer that
   one of its allocations would have run. Every C function of the runtime
   that allocates after reading an object calls it first (spec/65 checks
   every method); hot paths that allocate nothing need not. Pushes one
   value: a to-be-closed guard, or nil where the collector is not running
   (held by an outer call, stopped by the host, inside a finalizer); the
   function must not pop below it (lua_settop there closes it early). */
void cg_hold(lua_State *L);
int cg_hold_end(lua_State *L); /* the guard's __close (the sentinel's) */
/* Raises "attempt to use a freed ..." unless o is open. Any Lua allocation
   can run a finalizer that frees an object explicitly: a C function looks
   up driver handles only after its last allocation, or checks again. */
void cg_check_open(lua_State *L, const cg_obj *o);
/* Raises "cannot free ...: it is used by live cugraph.Graph #n" while a
   live graph uses o. */
void cg_check_unused(lua_State *L, const cg_obj *o);
int cg_method(lua_State *L); /* in __index: pushes methods[key], or 0 */
/* The edit distance of two short names, for a "did you mean" (99 past 31
   characters). */
size_t cg_distance(const char *a, const char *b);
/* In __index: pushes methods[key], or raises the object model's error for
   an unknown key ("cugraph.Buffer has no field 'size': its element count
   is #b"), which the methods table's own __index raises for every type. */
int cg_index(lua_State *L);
/* core.guard_methods(methods, name, receiver): the same error for the
   front end's own types (cugraph.Rng, ...), whose methods are Lua tables. */
int cg_guard_methods(lua_State *L);
int cg_tostring(lua_State *L, cg_obj *o, const char *fmt, ...);
/* Registers a type in this state, with what it frees beside its handle. */
void cg_newtype(lua_State *L, cg_kind kind, const luaL_Reg *methods,
                const luaL_Reg *meta, cg_releaser release);
/* :free(), :close(), __close (collected = 0) and __gc (collected = 1) of
   every type: one idempotent function. An object a live graph uses is
   refused, or when collected kept until the last graph lets it go; one
   with open views (its __gc run by hand) until the last view closes. */
int cg_close(lua_State *L, cg_kind kind, int collected);
void cg_unpinned(lua_State *L, cg_obj *o); /* uses fell to 0 */
/* A view of parent closed: one fewer, and a parent kept for it goes. */
void cg_unview(lua_State *L, cg_obj *parent);
/* Closes o now, or when the last live graph that uses it lets go: for an
   object whose life ends with another's (a DLPack tensor with its Buffer). */
void cg_close_later(lua_State *L, cg_obj *o);
/* Raises unless the option table at idx has only the keys of the
   NULL-ended list: "what: unknown option 'k' (valid: a, b, c)". */
void cg_check_options(lua_State *L, int idx, const char *what,
                      const char *const *keys);

/* -- the owner of every driver handle (release.c) ------------------------- */

/* The kind of handle objects of kind k hold. */
cg_hkind cg_hkind_of(cg_kind k);
/* Destroys h now, its context current: for what has decided already (a
   device's close, a C graph's release on any thread, a creation undone, a
   scratch instantiation). The driver's (or NCCL's) result; nothing
   recorded. Every destroy of a handle is here or in cg_release. */
int cg_destroy(cg_hkind hk, cg_handle h);
/* Frees memory a graph allocated on ctx's stream, ordered after event ev
   (the launch that allocated it): 1 when done (else the caller's plain
   release frees it). */
int cg_free_after(cg_ctx *ctx, CUdeviceptr mem, CUevent ev);
/* Releases a driver handle for a finalizer or :free(): never raises; held
   back while a capture runs (a free would break it); skipped when the
   context is gone or poisoned; driver errors are recorded (cuda.status). */
void cg_release(lua_State *L, cg_ctx *ctx, cg_hkind hk, cg_handle h);
/* Frees the deferred handles of every device (after a capture ends). */
void cg_flush_deferred(lua_State *L, cg_ctx *ctx);
/* The deferred handles of a device that closes without freeing them now:
   while work a timed-out wait left behind still runs, a thread waits for
   it, then frees them and lets go of the primary context when release is
   set (1 returned: the context is the thread's); else (a poisoned or
   closed context) they are left to the process's end, but for DLPack
   tensors, whose deleters run now. No driver call on this thread. */
int cg_drop_deferred(cg_ctx *ctx, int release);
/* An error of a finalizer or :free(), "api: name": counted in cuda.status()
   and given as a warning, never raised. */
void cg_record(lua_State *L, cg_ctx *ctx, const char *api, const char *name);
/* A driver call of a release failed with r: a sticky code poisons, then it
   is recorded as cg_record does, but for CUDA_ERROR_DEINITIALIZED (the
   driver's own teardown at process exit ran first: what is left goes with
   the process), which is skipped silently. */
void cg_record_cu(lua_State *L, cg_ctx *ctx, const char *api, CUresult r);
/* The object's own handle goes: its share lets go (the last holder frees),
   or it is released when owned. */
void cg_release_obj(lua_State *L, cg_obj *o);

/* A share owns the handle of one object from the moment a C graph (or a C
   scalar) holds it: the Lua object, while open, holds one reference and
   each C holder one; the last to let go frees the handle, so it outlives
   the Lua object and lua_close. Every share retains the device's primary
   context. Fields after creation change only under lock. */
struct cg_share {
  pthread_mutex_t lock;
  unsigned refs;
  unsigned char hk;     /* cg_hkind */
  cg_handle h;          /* the handle the last holder frees (0: gone) */
  CUdevice dev;
  CUcontext cu;
  /* a scalar's (the cugraph_scalar): the value C set, not yet written,
     once C took it (seeded: its bits and type are the script's then) */
  uint64_t bits;
  int pending;
  cg_type type;
  unsigned char seeded;
  /* an exec of a graph with conditional nodes, whose destroy the driver
     makes wait for its launches: the last holder hands it to the reaper
     (base/keep.c), so that no release waits for a launch */
  unsigned char waits;
  /* a module's: the C graphs that launch its code (graph/cgraph.c) */
  void **users;
  size_t nusers, cusers;
};
/* Whether a C graph made from a graph that pins o must hold o's handle:
   owned memory, host memory, modules, events and communicators. */
int cg_shareable(const cg_obj *o);
/* The share of open object o, made on first use, with one more reference
   for the caller; NULL when out of memory or the context cannot be
   retained. On the object's state's thread. */
cg_share *cg_share_of(cg_obj *o);
/* Drops one reference; the last frees the handle and the share. Any
   thread; driver errors are dropped (there may be no state left). */
void cg_share_drop(cg_share *sh);
/* The share of o made on first use, with one more reference, or NULL:
   out of host memory (*r CUDA_SUCCESS), or cuDevicePrimaryCtxRetain
   failed with *r. */
cg_share *cg_share_try(cg_obj *o, CUresult *r);

/* What a graph's nodes use, kept until its last launch is over: a keep
   holds a reference to the share of each object whose memory the graph
   reads or writes (owned device memory: Buffers, Scalars, Conditions'
   cells; page-locked host memory: HostBuffers). A Lua graph keeps its
   keep and hands it over when it goes, behind its last launch
   (cg_keep_after); a C graph, which an engine may launch unseen, and a
   Lua graph with conditional nodes, whose exec the C graphs made from it
   share, have the driver hold it through a user object that the graph
   retains (cuUserObjectCreate, cuGraphRetainUserObject): the executable
   graphs instantiated from it hold references of their own, which the
   driver lets go when the last launch that uses them is over (a user
   object costs each launch device time, which is why other Lua graphs
   hold none).
   Either release runs on a thread of the driver's, which may make no CUDA
   call: it hands the keep to its state, whose thread drops the shares at
   its next free (cg_keep_drain: the last holder frees the memory as any
   free, held back during a capture, errors recorded), or, for a C graph
   or after lua_close, to the reaper, a thread of the runtime that drops
   them once no capture of the device is open (a free would break a
   global-mode capture). So freeing a graph, and then what it used, while
   its launch is in flight neither waits for the launch nor frees the
   memory under it. */
typedef struct cg_keep cg_keep;
/* A new keep, empty, of ctx's state (NULL: a C graph's, for the reaper);
   NULL when out of host memory. */
cg_keep *cg_keep_new(cg_ctx *ctx);
/* Adds a reference to the share of o's handle when o is memory a graph
   keeps (made on first use, as cg_share_of); the same share twice, once.
   On o's state's thread. The failure, its api in *api (NULL: out of host
   memory). */
CUresult cg_keep_add(cg_keep *k, cg_obj *o, const char **api);
/* The same for a share held already (a C graph's pins): one reference
   more, when it is memory's. 0 when out of host memory. */
int cg_keep_share(cg_keep *k, cg_share *sh);
/* Hands k to the driver, retained by graph g (whose instantiations then
   hold it); on failure the failing call's result (*api names it), k then
   the driver's or freed. Without user objects in the driver,
   CUDA_ERROR_NOT_SUPPORTED and k is left to the caller. */
CUresult cg_keep_attach(cg_keep *k, CUgraph g, const char **api);
/* The runtime lets go of the graph k is attached to. With drop set no
   launch of it can be in flight (none was made): the shares go now (the
   driver frees k later); else the driver's release of k, once the last
   launch is over, hands them to the state or the reaper. */
void cg_keep_leave(cg_keep *k, int drop);
/* The runtime lets go of a graph whose launches it made itself (a Lua
   graph, which holds no user object: one costs every launch of it device
   time), k not attached. The launches of one executable graph run in
   order, so once the work queued on s, the stream of the last, is over,
   so are they all: a host function the driver then runs on s hands k to
   the state or the reaper, as a user object's release does. s NULL (no
   launch made, or its stream destroyed since), a capture of ctx open (s
   may be capturing), a context lost or closed, or a driver that takes no
   host function: k goes to the state at once, whose frees then wait for
   the device as cuMemFree does; a failed call is recorded (cg_record_cu) as
   a failed release is, never raised. */
void cg_keep_after(lua_State *L, cg_ctx *ctx, cg_keep *k, CUstream s);
/* The handle of o (the exec of a graph with conditional nodes, whose
   destroy the driver makes wait for its launches) and the graph *g are
   freed after its last launch, on s: o's share, made here, goes in a keep
   of its own with the graph (*g is set to NULL), handed over by
   cg_keep_after, and the state's thread frees them as it frees what keeps
   let go of. A share that cannot be made (recorded as a failed release)
   leaves both to the object's release. */
void cg_keep_exec_after(lua_State *L, cg_ctx *ctx, cg_obj *o, CUgraph *g,
                        CUstream s);
/* Frees a keep that is not attached, its shares dropped now. */
void cg_keep_free(cg_keep *k);
/* On the state's thread: drops the keeps the driver released (cheap when
   there are none: every free calls it). */
void cg_keep_drain(lua_State *L, cg_ctx *ctx);
/* Waits up to t seconds for the driver to release the keeps the state
   let go of, then drains, and for the reaper to finish what it has; 0
   when some were still out. The driver's thread
   releases them as soon as the work is over: cuda.synchronize() and
   lua_close wait CG_KEEP_SETTLE seconds at most (a keep whose graph could
   not be destroyed never comes). */
enum { CG_KEEP_SETTLE_MS = 250 };
#define CG_KEEP_SETTLE (CG_KEEP_SETTLE_MS / 1000.0)
int cg_keep_settle(lua_State *L, cg_ctx *ctx, double t);
/* At lua_close (the sentinel's finalizer): the keeps released within
   CG_KEEP_SETTLE are dropped here, later ones go to the reaper. */
void cg_keep_close(lua_State *L, cg_ctx *root);
/* Waits up to t seconds for the runtime's threads to finish what releases
   and closes left them (keeps let go, not dropped yet; finishers); 0 when
   some was left (cugraph_settle). */
int cg_settle(double t);

/* -- values (value.c) ----------------------------------------------------- */

/* The string at idx that names something (a type, an option, a kernel, a
   label, a file): C reads it up to its first NUL byte, so one that holds
   a NUL byte is refused, as an argument error, or "what: ..." when what is
   given. A number is taken as its text, as luaL_checkstring takes it.
   cg_optname: def when the value is absent or nil. */
const char *cg_checkname(lua_State *L, int idx, const char *what);
const char *cg_optname(lua_State *L, int idx, const char *def,
                       const char *what);
cg_type cg_checktype(lua_State *L, int idx);
/* luaL_checkoption whose error lists the options: "invalid option 'x'
   (expected a, b or c)". */
int cg_checkoption(lua_State *L, int idx, const char *def,
                   const char *const list[]);
/* Converts the number at idx to element type t into out; NULL, or the
   reason it cannot (pushed). */
const char *cg_bits(lua_State *L, int idx, cg_type t, void *out);
/* Whether the value at idx is an integer: a Lua integer or a float with
   an integral value in range (the rule of luaL_checkinteger, but never a
   string); into *out. */
int cg_tointeger(lua_State *L, int idx, lua_Integer *out);
/* The entries of the table at idx when it is a launch's {x [, y [, z]]}:
   keys 1..n with n from 1 to 3 and nothing else (no hole, no fourth);
   else 0. No allocation. */
int cg_xyz_size(lua_State *L, int idx);
/* cg_bits, raising: an argument error when what is NULL, else "what: msg" */
void cg_tobits(lua_State *L, int idx, cg_type t, void *out, const char *what);
void cg_pushbits(lua_State *L, cg_type t, const void *p);
/* a * b and a + b into *out: 1, or 0 (out untouched) when the result
   overflows size_t. Every product of sizes, pitches and offsets from Lua
   goes through these before it reaches a check or the driver. */
static inline int cg_mul_ok(size_t a, size_t b, size_t *out) {
  if (b && a > SIZE_MAX / b) return 0;
  *out = a * b;
  return 1;
}
static inline int cg_add_ok(size_t a, size_t b, size_t *out) {
  if (a > SIZE_MAX - b) return 0;
  *out = a + b;
  return 1;
}
/* A count of elements of type t at idx, positive, whose byte size fits */
size_t cg_checkcount(lua_State *L, int idx, cg_type t);
size_t cg_checkinit(lua_State *L, int idx, cg_type t, int *init,
                    const char *msg);

#endif
