/* Internal declarations shared by the files of cugraph.core. One file per
   Lua type; each exports <type>_open(L), called from lcugraph.c. */
#ifndef CUGRAPH_CORE_H
#define CUGRAPH_CORE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <lua.h>
#include <lauxlib.h>
#include "base/driver.h"

/* Element types of buffers and scalars, in the order of their names; the
   16-bit floats (IEEE binary16 and bfloat16) come last. */
typedef enum cg_type {
  CG_F32, CG_F64, CG_I8, CG_U8, CG_I16, CG_U16, CG_I32, CG_U32, CG_I64,
  CG_U64, CG_F16, CG_BF16, CG_NTYPES
} cg_type;
extern const char *const cg_type_names[];
extern const unsigned char cg_type_size[];

/* The Lua types; cg_obj.kind. */
typedef enum cg_kind {
  CG_STREAM, CG_BUFFER, CG_SCALAR, CG_EVENT, CG_MODULE, CG_KERNEL, CG_GRAPH,
  CG_GLRESOURCE, CG_CONDITION, CG_HOSTBUF, CG_NODE, CG_COMM, CG_NKINDS
} cg_kind;
extern const char *const cg_kind_names[]; /* "cugraph.Buffer", ... */

typedef struct cg_capture cg_capture;
typedef struct cg_recs cg_recs; /* node.c: the nodes a capture recorded */
typedef struct cg_share cg_share;
typedef struct cg_obj cg_obj;
typedef struct cg_graph cg_graph;
/* Frees an object's driver handles (it checks owned itself); cg_close calls
   it once, when the object can go. */
typedef void (*cg_releaser)(lua_State *L, cg_obj *o);

/* A capture in progress: the top level (s:capture, g:update), or the body
   of a conditional node, captured into its body graph while the node's
   stream object stands for the body's stream. Bodies share the top level's
   pins, serial and id. */
struct cg_capture {
  CUstream origin;      /* the stream this level began on */
  unsigned id;          /* the graph's id, for messages */
  unsigned serial;      /* this capture's number: cg_obj.pinned */
  int pins;             /* registry ref: set of pinned objects */
  int scalars;          /* top: scalars among them */
  CUstreamCaptureMode mode;
  cg_capture *top;      /* the top level (itself there) */
  int depth;            /* 0 at the top, n in a body nested n deep */
  cuuint64_t seq;       /* bodies: the driver's id of this capture */
  CUgraph root;         /* top: the graph captured into, once asked for */
  unsigned handles;     /* top: condition handles made in this capture */
  unsigned conds;       /* top: conditional nodes made in it */
  cg_recs *recs;        /* top: its nodes so far (node.c), made on demand */
  const void *fn;       /* top: the closure captured */
};


/* Peer access from one device to another, as far as the core knows. */
enum { CG_PEER_UNKNOWN, CG_PEER_ON, CG_PEER_NONE };
enum { CG_MAXPEER = 64 }; /* ordinals below this have their access cached */

/* One per device a lua_State uses: its primary context. The first, the
   sentinel, is a userdata created first in luaopen so it is finalized last;
   it is the root of the others (plain userdata anchored in the registry,
   released by the sentinel's finalizer) and holds what the whole state
   shares: the capture in progress is set in every device's record alike,
   the counters, metatables and finalizer errors are the root's. The driver
   is touched only when the first GPU object of a device is made. */
typedef struct cg_ctx cg_ctx;
struct cg_ctx {
  cg_ctx *root;         /* the sentinel (itself there) */
  cg_ctx *next;         /* root: the other devices' records, a list */
  cg_ctx *active;       /* root: the device constructors use (cuda.on) */
  unsigned char peer[CG_MAXPEER]; /* access to memory of device i */
  int retained;         /* the primary context is held */
  int ready;            /* ... and the device's limits and stream known */
  int closed;           /* sentinel finalized: children skip the driver */
  CUresult poison;      /* sticky error: the context can never work again */
  const char *poison_api;
  int ordinal;
  CUdevice dev;
  CUcontext cu;
  CUstream stream;      /* default stream for calls that name none */
  int max_threads, max_block[3], max_grid[3], max_shared, max_shared_optin;
  cg_capture *capture;  /* the capture in progress, or NULL */
  int nccl_group;       /* root: depth of cuda.nccl_group calls */
  unsigned graph_ids, captures;
  const void *mt[CG_NKINDS]; /* metatable identities, for fast type tests */
  int mtref[CG_NKINDS]; /* root: the metatables' registry references */
  cg_releaser release[CG_NKINDS]; /* of each kind, from cg_newtype */
  struct cg_deferred { int kind; void *h; } *deferred; /* frees held back */
  size_t ndeferred, cdeferred;                        /* during a capture */
  unsigned gc_errors;   /* driver errors seen in finalizers */
  char gc_error[200];   /* the last of them */
  size_t rec_hint[3];   /* sizes of the last capture's records (node.c) */
  cg_recs *spare_recs;  /* root: records a capture may reuse (node.c) */
  cg_graph *graphs;     /* root: the live graphs, a list (reload.c) */
  int pins_slot;        /* root: registry slot of capture pins (graph.c) */
};

/* Header of every object. open == 0 once freed; the handle is then gone. */
struct cg_obj {
  cg_ctx *ctx;
  unsigned char kind, open, owned;
  unsigned char zombie; /* collected while a graph used it: released by the
                           last unpin */
  unsigned uses;        /* live graphs that captured this object */
  unsigned graph;       /* id of one of them (0: unknown), for messages */
  unsigned pinned;      /* serial of the capture whose pins hold it */
  cg_share *share;      /* set once a C handle holds the driver handle: the
                           share frees it, not the releaser (handle.c) */
};

/* cg_obj.owned of a buffer: memory it frees (cuMemAlloc, or a stream-ordered
   allocation outside captures), or memory a graph's allocation node makes,
   live (from a launch of the graph until freed) or not. */
enum { CG_BORROWED, CG_OWNED, CG_GRAPHMEM_LIVE, CG_GRAPHMEM_GONE };

typedef struct cg_stream {
  cg_obj h;
  CUstream s;
  CUevent join;         /* private event for s2:wait(s1), made on demand */
} cg_stream;

typedef struct cg_event {
  cg_obj h;
  CUevent e;
  int timing;
} cg_event;

/* A view (b:view) is a buffer that does not own its memory: parent is the
   buffer it was made from (also its user value 1, so the parent outlives
   it), and the parent counts its open views, refusing :free() while any
   is open. */
typedef struct cg_buffer {
  cg_obj h;
  CUdeviceptr ptr;
  size_t n;
  cg_type type;
  unsigned views;       /* open views of this buffer */
  struct cg_buffer *parent; /* NULL unless a view */
} cg_buffer;

/* cugraph.HostBuffer: page-locked host memory (cuMemHostAlloc). */
typedef struct cg_hostbuf {
  cg_obj h;
  void *p;
  size_t n;
  cg_type type;
} cg_hostbuf;

typedef struct cg_scalar {
  cg_obj h;
  CUdeviceptr ptr;
  uint64_t bits;        /* value set on the host ... */
  int pending;          /* ... and not yet written to the device */
  cg_type type;
} cg_scalar;

/* Checked driver call that keeps the API's name for the error object. */
#define CU(L, ctx, fn, ...) cg_check((L), (ctx), #fn, cg_drv.fn(__VA_ARGS__))
void cg_fail(lua_State *L, cg_ctx *ctx, const char *api, CUresult r);
static inline void cg_check(lua_State *L, cg_ctx *ctx, const char *api,
                            CUresult r) {
  if (r != CUDA_SUCCESS) cg_fail(L, ctx, api, r);
}
/* Marks the context unusable when r is sticky (the first such error stays). */
void cg_poison(cg_ctx *ctx, const char *api, CUresult r);

/* context.c */
cg_ctx *cg_context(lua_State *L);           /* ready for driver calls: the
                                               device cuda.on chose */
cg_ctx *cg_device(lua_State *L, int ordinal); /* that device's, ready */
void cg_current(lua_State *L, cg_ctx *ctx); /* makes ctx current, raising */
/* Raises unless a launch on device ctx may read memory of device other:
   enables peer access on demand; the message names both devices. */
void cg_reach(lua_State *L, cg_ctx *ctx, cg_ctx *other, const char *what);
/* Raises "what: objects of device a and device b" for work that must stay
   on one device. */
int cg_mixed(lua_State *L, cg_ctx *a, cg_ctx *b, const char *what);
void cg_set_capture(cg_ctx *ctx, cg_capture *c); /* in every device's */
cg_ctx *cg_sentinel(lua_State *L);          /* no driver call */
int cg_alive(cg_ctx *ctx);                  /* finalizers may call driver */
void *cg_newobj(lua_State *L, cg_ctx *ctx, size_t size, cg_kind kind);
void *cg_checkobj(lua_State *L, int idx, cg_kind kind); /* open, ctx sane */
void *cg_toobj(lua_State *L, int idx, cg_kind kind);    /* freed is fine */
void *cg_checkself(lua_State *L, cg_kind kind); /* cg_checkobj of argument
  1, fast, in functions of the methods table given to cg_newtype */
void *cg_checkself_keep(lua_State *L, cg_kind kind); /* the same, leaving one
  value pushed: for hot paths that count their arguments first */
void *cg_testobj(lua_State *L, int idx, cg_kind kind);  /* NULL if other */
/* Finalizers of the binding run so far, in every state: while the count
   stands still, a userdata address seen before is the same object. */
extern atomic_uint cg_epoch;
static inline unsigned cg_epoch_now(void) {
  return atomic_load_explicit(&cg_epoch, memory_order_relaxed);
}
void cg_collected(void); /* a finalizer ran */
/* The checks of cg_checkobj after the type test (open, context sane and
   current on this thread), inline: for an object known by its address. */
extern _Thread_local CUcontext cg_bound;
void cg_ready_slow(lua_State *L, cg_obj *o);
static inline void cg_ready(lua_State *L, cg_obj *o) {
  if (!o->open || o->ctx->poison || o->ctx->cu != cg_bound) cg_ready_slow(L, o);
}
/* Raises "attempt to use a freed ..." unless o is open. Any Lua allocation
   can run a finalizer that frees an object explicitly: a C function looks
   up driver handles only after its last allocation, or checks again. */
void cg_isopen(lua_State *L, const cg_obj *o);
void cg_guard(lua_State *L, cg_ctx *ctx, const char *what, const char *fix);
void cg_canfree(lua_State *L, cg_obj *o);
/* Releases a driver handle for a finalizer or :free(): never raises; held
   back while a capture runs (a free would break it); skipped when the
   context is gone or poisoned; driver errors are recorded (cuda.status). */
enum { CG_FREE_MEM, CG_FREE_MODULE, CG_FREE_STREAM, CG_FREE_EVENT,
       CG_FREE_EXEC, CG_FREE_GRAPH, CG_FREE_HOST };
void cg_release(lua_State *L, cg_ctx *ctx, int what, void *h);
/* An error of a finalizer or :free(), "api: name": counted in cuda.status()
   and given as a warning, never raised. */
void cg_record(lua_State *L, cg_ctx *ctx, const char *api, const char *name);
void cg_flush_deferred(lua_State *L, cg_ctx *ctx);
int cg_method(lua_State *L); /* in __index: pushes methods[key], or 0 */
int cg_tostring(lua_State *L, cg_obj *o, const char *fmt, ...);
/* Registers a type in this state, with its releaser. */
void cg_newtype(lua_State *L, cg_kind kind, const luaL_Reg *methods,
                const luaL_Reg *meta, cg_releaser release);
/* :free(), :close(), __close (collected = 0) and __gc (collected = 1) of
   every type: one idempotent function. An object a live graph uses is
   refused, or when collected kept until the last graph lets it go. */
int cg_close(lua_State *L, cg_kind kind, int collected);
void cg_unpinned(lua_State *L, cg_obj *o); /* uses fell to 0 */
CUstream cg_optstream(lua_State *L, int idx, cg_ctx *ctx);
void cg_sync(lua_State *L, cg_ctx *ctx); /* cuCtxSynchronize, checked */

/* buffer.c: Lua values <-> element bits, range-checked */
cg_type cg_checktype(lua_State *L, int idx);
const char *cg_bits(lua_State *L, int idx, cg_type t, void *out);
/* cg_bits, raising: an argument error when what is NULL, else "what: msg" */
void cg_tobits(lua_State *L, int idx, cg_type t, void *out, const char *what);
void cg_pushbits(lua_State *L, cg_type t, const void *p);
/* buffer.c: a count of elements of type t at idx, positive, whose byte
   size fits */
size_t cg_checkcount(lua_State *L, int idx, cg_type t);
size_t cg_checkinit(lua_State *L, int idx, cg_type t, int *init,
                    const char *msg);

/* context.c: makes cu current on this thread unless the core knows it is
   (the thread-local compare every path to the driver makes); no Lua */
CUresult cg_make_current(CUcontext cu);

/* One kernel switched to new code by a reload: nodes launching from launch
   to, with the same parameters (nparams of size[i] bytes). */
typedef struct cg_swap {
  CUfunction from, to;
  int nparams;
  const unsigned *size;
} cg_swap;

/* handle.c: the Lua object o lets go of its share; the last holder frees */
void cg_share_drop_lua(lua_State *L, cg_obj *o);
/* handle.c: the C graphs that launch module share sh's code switch as sw
   says; then sh owns module newmod. The first failure, or SUCCESS. */
CUresult cg_share_swap(cg_share *sh, CUmodule newmod, const cg_swap *sw,
                       int n, const char **api);

/* reload.c: the state's open graphs, for reload (cg_ctx.graphs) */
void cg_track_graph(cg_graph *gr);   /* one opened */
void cg_untrack_graph(cg_graph *gr); /* one closed */
/* reload.c: the kernel nodes of g switch as sw says, then x (if not NULL)
   is updated from g. No Lua call. On failure *api names the call. */
CUresult cg_swap_kernels(CUgraph g, CUgraphExec x, const cg_swap *sw, int n,
                         const char **api);
/* reload.c: every live graph of this state that pins the module at midx,
   and every C graph of its share, switch as sw says; on a failure the
   switched ones switch back and the error is raised. */
void cg_reload_graphs(lua_State *L, cg_ctx *ctx, int midx, const cg_swap *sw,
                      int n, CUmodule newmod, CUmodule oldmod);

/* module.c: a module's CUmodule */
CUmodule cg_module_handle(const cg_obj *o);

/* graph.c: the driver graph and executable graph of the Graph at idx
   (NULL when it is freed) */
void cg_graph_parts(lua_State *L, int idx, CUgraph *g, CUgraphExec *x);

struct cg_graph {
  cg_obj h;
  CUgraph g;
  CUgraphExec exec;
  CUstream stream;      /* the capture stream: launches default to it */
  CUstreamCaptureMode mode;
  unsigned id;
  lua_Integer launches;
  unsigned conds;       /* conditional nodes, at any depth */
  int nscalars;
  cg_scalar **scalars;  /* pinned scalars, flushed before each launch */
  cg_recs *recs;        /* the nodes its capture recorded (node.c) */
  unsigned allocs;      /* allocation nodes whose memory it does not free */
  unsigned char auto_free; /* instantiated with AUTO_FREE_ON_LAUNCH */
  unsigned char updated;   /* g:update ran: exec's nodes are not recs' */
  cg_graph *prev, *next;   /* while open: cg_ctx.graphs */
};

/* graph.c: collects the scalars among the pins of the graph at gidx again
   (after a rebind) */
void cg_graph_rescan(lua_State *L, cg_graph *gr, int gidx);
/* graph.c: releases every pin of graph id in the set at idx (emptied when
   empty is set) */
void cg_unpin_set(lua_State *L, cg_ctx *ctx, int idx, unsigned id,
                  int empty);

/* module.c: a kernel's function, name and signature, and the argument slots
   its launches marshal into */
typedef struct cg_kinfo {
  CUfunction f;
  const char *name;
  cg_obj *module;
  int nparams;
  const struct ptx_param *params;
  void *const *argp;
  cg_obj *const *seen;  /* the buffer or scalar each pointer slot took */
} cg_kinfo;
void cg_kernel_info(const cg_obj *k, cg_kinfo *out);
/* module.c: the values at idx.. into the kernel's slots (k at kidx), checked
   as a launch checks them (count, types, ranges); no pin, no scalar flush */
void cg_kernel_args(lua_State *L, int kidx, int idx, int nargs);

/* node.c: notes the node that work just sent to s (a capture's stream) made:
   a launch of kernel (at kidx; arguments from kidx + 4), a memset of dst
   at byte offset off, a copy, or a node made with cuGraphAddNode */
void cg_note_kernel(lua_State *L, cg_ctx *ctx, CUstream s, cg_obj *kernel,
                    int kidx, const unsigned grid[3], const unsigned block[3],
                    unsigned shared);
void cg_note_fill(lua_State *L, cg_ctx *ctx, CUstream s, cg_obj *dst,
                  size_t off, unsigned value, unsigned elem, size_t width,
                  size_t height, size_t pitch);
void cg_note_copy(lua_State *L, cg_ctx *ctx, CUstream s, cg_obj *dst,
                  cg_obj *src, size_t bytes, size_t doff, size_t soff);
/* a copy between device and pinned host memory: recorded so that g:rebind
   refuses its buffer (the driver's host copy nodes are not changed here) */
void cg_note_hostcopy(lua_State *L, cg_ctx *ctx, CUstream s, cg_obj *dev,
                      cg_obj *host);
void cg_note_node(lua_State *L, cg_ctx *ctx, CUgraphNode node,
                  CUgraphNodeType type);
/* Message handler of the closures a capture runs: a string error gains
   the traceback; others stay as they are (graph.c). */
int cg_traceback(lua_State *L);
void cg_recs_free(cg_recs *r);
/* Lets go of a graph's records: kept for the state's next capture (one
   set), else freed. Not while a reader marks them busy (cg_recs_busy): a
   close then leaves them to the graph's __gc. */
void cg_recs_release(cg_ctx *ctx, cg_recs *r);
int cg_recs_busy(const cg_recs *r);
size_t cg_recs_count(const cg_recs *r); /* records in r (NULL: 0) */
void cg_recs_done(cg_ctx *ctx, const cg_recs *r);
/* node.c: whether a kernel node of r launches a kernel of module mod */
int cg_recs_launch(const cg_recs *r, const cg_obj *mod);
/* node.c: allocation nodes of r whose memory the graph does not free */
unsigned cg_recs_allocs(const cg_recs *r);
/* node.c: before (after = 0) and after a launch of a graph with allocs */
void cg_graph_allocs(lua_State *L, cg_graph *gr, int after);
/* node.c: g:dot (graph at 1, path at 2) labelled from the records; 0 when
   the driver lacks what it needs (the caller prints the driver's) */
int cg_dot(lua_State *L, cg_graph *gr);
/* node.c: the graph's nodes take what rebinding changed in its exec
   (raising; cg_graph_follow: no Lua, the first failure or SUCCESS) */
void cg_graph_sync(lua_State *L, cg_graph *gr);
CUresult cg_graph_follow(cg_graph *gr, const char **api);
/* node.c: g:nodes("detail") (graph at 1) -> count, {record, ...} */
int cg_nodes_detail(lua_State *L, cg_graph *gr);
/* node.c: buffer.c's stream-ordered allocation (cuda.buffer with opts at
   optidx; 0 when they name no stream) and free (b:free(stream)) */
int cg_buffer_async(lua_State *L, cg_type t, size_t n, int optidx);
int cg_buffer_free_async(lua_State *L, int sidx);

/* scalar.c: write a pending host value on stream s (outside captures) */
void cg_scalar_flush(lua_State *L, cg_scalar *sc, CUstream s);

/* graph.c: record that the capture in progress uses the object at idx */
void cg_pin(lua_State *L, cg_ctx *ctx, int idx);
void cg_pinobj_new(lua_State *L, cg_ctx *ctx, cg_obj *o, int idx);
/* o (at idx) is pinned by the capture in progress, if any: a compare when
   this capture pinned it before */
static inline void cg_pinobj(lua_State *L, cg_ctx *ctx, cg_obj *o, int idx) {
  if (ctx->capture && o->pinned != ctx->capture->serial)
    cg_pinobj_new(L, ctx, o, idx);
}
int cg_capturing_on(lua_State *L, cg_ctx *ctx, CUstream s);
/* graph.c: captures fn (at fnidx) into body, a body graph of a conditional
   node, with the stream object at sidx standing for the body's stream;
   raises fn's error (or the driver's) once the body's capture is over. */
void cg_capture_body(lua_State *L, cg_ctx *ctx, int sidx, int fnidx,
                     CUgraph body);
/* graph.c: the stream that captures bodies nested depth deep, made once
   per state (a cugraph.Stream kept in the registry, never given out). */
CUstream cg_bodystream(lua_State *L, cg_ctx *ctx, int depth);

/* cond.c: a node added to the graph that stream s captures into, after its
   work; the stream's later work depends on it. */
CUgraphNode cg_capture_node(lua_State *L, cg_ctx *ctx, CUstream s,
                            CUgraphNodeParams *p);
/* cond.c: the Condition at idx as a kernel argument (its handle, in slot);
   0 when the value is not a Condition. */
int cg_condition_arg(lua_State *L, cg_ctx *ctx, int idx, void *slot);

void stream_open(lua_State *L);
void buffer_open(lua_State *L);
void scalar_open(lua_State *L);
void event_open(lua_State *L);
void module_open(lua_State *L);
void graph_open(lua_State *L);
void cond_open(lua_State *L);
void nvrtc_open(lua_State *L);
void context_open(lua_State *L);
void reload_open(lua_State *L);
void interop_open(lua_State *L);
void hostbuf_open(lua_State *L);
void node_open(lua_State *L);
void nccl_open(lua_State *L);

#endif
