/* The types layer: one file per Lua type of memory, streams and events,
   each exporting <type>_open(L). The driver handle of each object is its
   header's drv (base.h); what else a type holds is here. */
#ifndef CUGRAPH_TYPES_H
#define CUGRAPH_TYPES_H

#include "capture/capture.h"

/* cugraph.Stream: h.drv.stream. */
typedef struct cg_stream {
  cg_obj h;
  CUevent join;         /* private event for s2:wait(s1), made on demand */
  int priority;         /* as made (0: the default, the lowest) */
  /* The kernel (a cg_kernel) that k:launch sent last, eagerly: the
     stream's last work while the root's stream_clock stands at clock
     (any other use of a stream object, a kernel's close and a reload
     advance it). lent: its handle went to foreign code (s:handle(),
     cugraph_checkstream), which may send work the runtime never sees. */
  void *last;
  unsigned clock;
  unsigned char lent;
} cg_stream;

/* cugraph.Event: h.drv.event. */
typedef struct cg_event {
  cg_obj h;
  int timing;
} cg_event;

/* cugraph.Buffer: h.drv.mem. A view (b:view) borrows its parent's memory
   (h.parent, its user value 1); the parent counts its open views. A Buffer
   over a DLPack tensor (dlpack.c) is a view of the cugraph.DLTensor that
   holds the tensor, and closes it when it closes. */
typedef struct cg_buffer {
  cg_obj h;
  size_t n;
  cg_type type;
  unsigned char managed; /* managed memory (cuda.managed), or a view of it */
  unsigned char shaped; /* over a DLPack tensor: ndim and shape are its */
  int ndim;
  const int64_t *shape; /* the tensor's own array, which lives with it */
  size_t pitch;         /* cuda.pitched: bytes a row, else 0 */
  size_t width, height, depth; /* cuda.pitched: its shape in elements */
  CUevent allocated; /* graph memory: recorded after the launch that last
                        allocated it, which every free of it waits for */
} cg_buffer;

/* cugraph.DLTensor: a DLPack tensor, h.drv.dlpack (base.h). One from
   b:dlpack() lends a Buffer's memory until it is consumed, taken by C or
   closed; one a Buffer was made from is that Buffer's parent (h.views
   counts it: a tensor is consumed once). */
typedef struct cg_dltensor {
  cg_obj h;
  int taken;            /* given to C (cugraph_todlpack): no longer ours */
} cg_dltensor;

/* cugraph.Array: a CUDA array (h.drv.array) of width x height x depth
   texels of channels elements of type each; height and depth are 0 for
   the dimensions it lacks, as the driver counts them. */
typedef struct cg_array {
  cg_obj h;
  cg_type type;
  int channels;         /* 1, 2 or 4 */
  int surface;          /* made for surface loads and stores */
  size_t width, height, depth;
} cg_array;

static inline size_t cg_array_texel(const cg_array *a) {
  return (size_t)a->channels * cg_type_size[a->type];
}
/* The bytes of its texels (the driver may lay them out in more). */
static inline size_t cg_array_bytes(const cg_array *a) {
  return a->width * (a->height ? a->height : 1) * (a->depth ? a->depth : 1) *
         cg_array_texel(a);
}

/* cugraph.Texture (h.drv.tex) and cugraph.Surface (h.drv.surf): a
   texture or surface object over an Array, their parent (user value 1),
   which counts them in its h.views and is freed after them. */
typedef struct cg_sampler {
  cg_obj h;
} cg_sampler;
/* A Texture or Surface at idx as a kernel's 64-bit argument: its handle
   in slot, pinned by a capture in progress; 0 when it is neither. */
int cg_sampler_arg(lua_State *L, cg_ctx *ctx, int idx, void *slot);
/* A new Texture or Surface over the Array a at 1 (its user value), left at
   the top of the stack, not open yet, and res describing a. */
cg_sampler *cg_sampler_new(lua_State *L, cg_array *a, cg_kind kind,
                           CUDA_RESOURCE_DESC *res);
/* Once its handle is made: open, over a, which counts it. */
void cg_sampler_opened(cg_sampler *s, cg_array *a);
/* Their releaser: the array counts one fewer. */
void cg_sampler_release(lua_State *L, cg_obj *o);
/* Registers kind (CG_TEXTURE or CG_SURFACE) with the methods they share,
   and make as the Array method that makes one. */
void cg_sampler_type(lua_State *L, cg_kind kind, const char *method,
                     lua_CFunction make);
void texture_open(lua_State *L);
void surface_open(lua_State *L);

/* cugraph.ExternalMemory: memory another API exported, imported
   (h.drv.extmem, base.h). Its Buffers (mem:buffer: owned mappings, freed
   with cuMemFree) and Arrays (mem:array: level 0 of a mipmapped array the
   import holds) are its views: h.views counts them, and it is destroyed
   after them. */
typedef struct cg_extmem {
  cg_obj h;
  size_t size;          /* bytes, as imported */
  int kind;             /* CUexternalMemoryHandleType */
} cg_extmem;

/* cugraph.ExternalSemaphore: a semaphore another API exported, imported
   (h.drv.extsem): binary, or a timeline whose waits and signals carry a
   64-bit value. */
typedef struct cg_extsem {
  cg_obj h;
  int timeline;
} cg_extsem;

/* cugraph.HostBuffer: page-locked host memory, h.drv.host. */
typedef struct cg_hostbuf {
  cg_obj h;
  size_t n;
  cg_type type;
  CUdeviceptr dev;      /* its device address: its host address for the
                           runtime's (cuMemHostAlloc's rule with unified
                           addressing), the driver's for an engine's */
} cg_hostbuf;

/* cugraph.Scalar: 8 bytes of device memory, h.drv.mem. */
typedef struct cg_scalar {
  cg_obj h;
  uint64_t bits;        /* value set on the host ... */
  int pending;          /* ... and not yet written to the device */
  cg_type type;
} cg_scalar;

/* cugraph.Condition: a host object with a 4-byte device cell (h.drv.mem,
   count_down's counter); its driver handle is made in each capture that
   uses it, in that capture's graph, and drives exactly one node there. */
typedef struct cg_condition {
  cg_obj h;
  unsigned dflt;        /* the value each launch starts with ... */
  unsigned flags;       /* ... when this is CU_GRAPH_COND_ASSIGN_DEFAULT */
  unsigned bound;       /* serial of the capture whose graph has handle */
  unsigned node;        /* serial of the capture where it drives a node */
  CUgraphConditionalHandle handle;
} cg_condition;

/* A recording's fill or copy e made again under the capture in progress:
   its stream and buffer (a copy's stream, destination and source) on the
   stack from sidx. */
void cg_fill_replay(lua_State *L, const cg_rec *e, int sidx);
void cg_copy_replay(lua_State *L, const cg_rec *e, int sidx);
/* Raises while views are open over b: every way to free a buffer asks. */
void cg_check_no_views(lua_State *L, const cg_buffer *b);
/* The stream at idx (nil: ctx's default stream), of device ctx. */
CUstream cg_optstream(lua_State *L, int idx, cg_ctx *ctx);
/* Work a Buffer method names a stream for at sidx (0 or nil: none): the
   stream, after the capture checks; with none, NULL after all device work,
   and cg_work_finish waits for it on the state's stream. */
CUstream cg_work_begin(lua_State *L, cg_ctx *ctx, int sidx, const char *what);
void cg_work_finish(lua_State *L, cg_ctx *ctx, CUstream st);
/* Writes a pending host value on stream s (outside captures). */
void cg_scalar_flush(lua_State *L, cg_scalar *sc, CUstream s);
/* The Condition at idx as a kernel argument (its handle, in slot); 0 when
   the value is not a Condition. */
int cg_condition_arg(lua_State *L, cg_ctx *ctx, int idx, void *slot);
/* The kernel name of the runtime's own module of one-thread kernels
   (src/types/setters.cu), made on first use (outside captures) on the
   device in use then: NULL when that is not ctx's device. */
CUfunction cg_setter_function(lua_State *L, cg_ctx *ctx, const char *name);
/* Raises unless the driver has what conditional nodes need (CUDA 12.4). */
void cg_check_conditional(lua_State *L);
/* The handle of c (at idx) in the capture in progress, made in its top
   graph on first use there; pins c. */
void cg_condition_handle(lua_State *L, cg_ctx *ctx, cg_condition *c, int idx);
/* Whether o's memory is a graph's allocation (o's or a parent's it views),
   and whether that is not allocated now: used only inside captures. */
static inline int cg_in_graphmem(const cg_obj *o) {
  for (; o; o = o->parent)
    if (o->graphmem) return 1;
  return 0;
}
static inline int cg_graphmem_gone(const cg_obj *o) {
  for (; o; o = o->parent)
    if (o->graphmem == CG_GRAPHMEM_GONE) return 1;
  return 0;
}
/* The one door for device memory: NULL when the memory of o (a Buffer or
   a Scalar) may be used by device work of device ctx now, else why not
   (pushed): o or the memory it views is freed, its map scope has ended,
   it is graph memory not allocated now (outside a capture: a capture's
   graph orders its own work), or device ctx cannot reach it (peer access
   is turned on here when it can be). Every call that hands memory to
   device work asks it (spec/66 feeds each every kind); the extent and the
   element type are the call's own to check. cg_check_mem raises "what:
   why". */
const char *cg_mem_why(lua_State *L, cg_ctx *ctx, const cg_obj *o);
void cg_check_mem(lua_State *L, cg_ctx *ctx, const cg_obj *o,
                  const char *what);
/* Why such memory cannot be used now (pushed), for the door. */
const char *cg_graphmem_why(lua_State *L, const cg_obj *o);
/* The stream-ordered allocation of cuda.buffer (opts at optidx; 0 when
   they name no stream) and free (b:free(stream)), graphmem.c. */
int cg_buffer_async(lua_State *L, cg_type t, size_t n, int optidx);
int cg_buffer_free_async(lua_State *L, int sidx);
/* After a launch on st of a graph whose allocation node made b: its free,
   from any stream or a finalizer, comes after that launch. */
void cg_graphmem_allocated(lua_State *L, cg_buffer *b, CUstream st);
/* Frees the memory of a graph-memory buffer that a launch allocated,
   stream-ordered after that launch (buffer.c's releaser): 1 when done. */
int cg_graphmem_release(cg_buffer *b);

void stream_open(lua_State *L);
void event_open(lua_State *L);
void buffer_open(lua_State *L);
void managed_open(lua_State *L);
void pitched_open(lua_State *L);
void hostbuf_open(lua_State *L);
/* Pushes a borrowed HostBuffer of n elements of type t over the engine's
   page-locked memory at p, checked to be such (cugraph_pushhostbuffer). */
void cg_push_hostbuf(lua_State *L, cg_ctx *ctx, void *p, cg_type t,
                     size_t n);
void array_open(lua_State *L);
/* Pushes a borrowed Array over the engine's a (cugraph_pusharray). */
void cg_push_array(lua_State *L, cg_ctx *ctx, CUarray a);
/* The format string at idx ("f32x4"): its element type and channels, or
   an error that starts with what. */
void cg_check_array_format(lua_State *L, int idx, const char *what,
                           cg_type *t, int *channels);
/* The bytes of w x h x d texels of `texel` bytes (a dimension 0 counts as
   1), or an error that starts with what when that overflows a size. */
size_t cg_check_array_bytes(lua_State *L, const char *what, size_t w,
                            size_t h, size_t d, size_t texel);
/* The driver's format of element type t (0: arrays have none). */
CUarray_format cg_array_format(cg_type t);
/* A new Array object at the top of the stack, its handle not made yet. */
cg_array *cg_array_new(lua_State *L, cg_ctx *ctx, cg_type t, int channels,
                       int surface, size_t w, size_t h, size_t d);
void extmem_open(lua_State *L);
/* The open file descriptor at idx (a handle to import: CUDA takes it on
   success), or an error that starts with what. */
int cg_check_fd(lua_State *L, int idx, const char *what);
void extsem_open(lua_State *L); /* with the Stream methods that use them */
/* Pushes a borrowed ExternalMemory or ExternalSemaphore (the engine's
   import; cugraph_pushexternal*). */
void cg_push_extmem(lua_State *L, cg_ctx *ctx, CUexternalMemory m,
                    size_t size);
void cg_push_extsem(lua_State *L, cg_ctx *ctx, CUexternalSemaphore s,
                    int timeline);
/* Pushes C's host function fn (a light userdata), which s:host then takes
   (cugraph_pushhostfn). */
void cg_push_hostfn(lua_State *L, CUhostFn fn);
void scalar_open(lua_State *L);
void condition_open(lua_State *L);
void graphmem_open(lua_State *L);
void interop_open(lua_State *L);
void comm_open(lua_State *L);
void blas_open(lua_State *L);
void fft_open(lua_State *L);
/* comm.c, for rendezvous.c: raises when NCCL cannot be loaded; pushes a
   new unique id (cuda.nccl_id). */
void cg_need_nccl(lua_State *L);
int cg_nccl_id(lua_State *L);
void rendezvous_open(lua_State *L); /* cuda.world, cuda.nccl_rendezvous* */
void dlpack_open(lua_State *L);

#endif
