/* External memory and semaphores, of the OPAQUE_FD handle kinds (others
   are not supported). Importing one gives its file descriptor to the
   driver, which closes it when the handle is destroyed (or its context).

   Memory: the fd is a file that can be mapped shared for the size
   imported (a memfd, a file, a Vulkan export stood in for). Each buffer
   or mipmapped array mapped onto it is a mapping of its own of that range
   of the file, so what kernels and copies write through it is what any
   other mapping of the file sees, in this process or another; a buffer is
   device memory that cuMemFree unmaps, a mipmapped array's levels are
   arrays whose texels lie at the offset, row by row with rows packed
   (width times texel bytes), slice by slice, level after level. They stay
   mapped until freed, after cuDestroyExternalMemory too (where they must
   no longer be used).

   Semaphores: the fd is a file of at least 8 bytes whose first 8 hold a
   little-endian uint64 counter, mapped shared: a second import of the
   file (or a dup of its fd), or another process that maps it, sees the
   same counter. A timeline semaphore (TIMELINE_SEMAPHORE_FD) is the
   counter: a signal sets it to the fence value (as the Driver API says:
   it is set, so a lower value is stored too), a wait waits until it is at
   least the fence value. A binary one (OPAQUE_FD) is signalled when
   nonzero: a signal sets it to 1, a wait waits until it is nonzero and
   then sets it to 0 (a wait that nothing will signal, which the reference
   leaves undefined, waits). The flags of the params (NvSciBuf memory
   synchronization) mean nothing here.

   Work runs when it is sent: a wait, eager or a node of a launched graph,
   blocks the calling thread, polling the counter every 50 us with the
   driver's lock given back meanwhile, so that another thread may signal
   through the driver (or write the counter itself). CUDA_DOUBLE_WAIT_LIMIT
   seconds (default 30; 0: no wait at all) bound it: past them the device
   stops, as the watchdog stops an endless while loop
   (CUDA_ERROR_LAUNCH_TIMEOUT, sticky), and the call returns that. A wait
   also ends with the error of a device broken meanwhile or of its context
   destroyed, with CUDA_ERROR_INVALID_HANDLE when its semaphore is
   destroyed, and with CUDA_ERROR_TIMEOUT when its work is stopped
   (stop.c). In a capture a signal or wait is a graph node
   (EXT_SEMAS_SIGNAL, EXT_SEMAS_WAIT), as cuGraphAddNode makes them. */
#include "double.h"
#include "queue.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct CUextMemory_st {
  obj h;
  int fd;
  size_t size;
};

struct CUextSemaphore_st {
  obj h;
  int fd, timeline;
  uint64_t *counter; /* the file's first 8 bytes, mapped shared */
};

/* A mipmapped array mapped onto external memory: its levels' texels lie in
   one mapping, which it owns. */
struct CUmipmappedArray_st {
  obj h;
  void *texels;      /* where level 0 begins: a span of device memory */
  unsigned nlevels;
  struct CUarray_st *levels;
};

/* Whether h is a live handle of kind. */
static int live(const void *h, int kind) {
  for (const obj *o = dbl_live.next; h && o != &dbl_live; o = o->next)
    if (o == h) return o->kind == kind;
  return 0;
}

static size_t page(void) { return (size_t)sysconf(_SC_PAGESIZE); }

/* Maps n bytes of fd from offset off, shared; NULL when it cannot. */
static void *map_range(int fd, size_t off, size_t n) {
  size_t lead = off % page();
  void *p = mmap(NULL, n + lead, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                 (off_t)(off - lead));
  return p == MAP_FAILED ? NULL : (unsigned char *)p + lead;
}

void dbl_unmap(uintptr_t p, size_t n) {
  size_t lead = p % page();
  munmap((void *)(p - lead), n + lead);
}

/* Whether fd is an open file that can be mapped shared for n bytes: 0, or
   the error the reference gives (a file too short: too, a bad size). */
static CUresult check_fd(int fd, size_t n, CUresult too_short) {
  struct stat st;
  if (fd < 0 || fstat(fd, &st)) return CUDA_ERROR_INVALID_HANDLE;
  if (S_ISREG(st.st_mode) && (unsigned long long)st.st_size < n)
    return too_short;
  void *p = map_range(fd, 0, n);
  if (!p) return CUDA_ERROR_OPERATING_SYSTEM;
  dbl_unmap((uintptr_t)p, n);
  return CUDA_SUCCESS;
}

void dbl_free_external(obj *o) {
  if (o->kind == O_EXTMEM) {
    close(((CUexternalMemory)o)->fd);
  } else if (o->kind == O_EXTSEM) {
    CUexternalSemaphore s = (CUexternalSemaphore)o;
    dbl_unmap((uintptr_t)s->counter, sizeof *s->counter);
    close(s->fd);
  } else {
    CUmipmappedArray m = (CUmipmappedArray)o;
    dbl_drop_external_memory(m->texels);
    free(m->levels);
  }
  dbl_free_obj(o);
}

/* -- external memory ------------------------------------------------------- */

CUresult CUDAAPI cuImportExternalMemory(CUexternalMemory *extMem_out,
                                        const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *d) {
  ENTRY(cuImportExternalMemory);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!extMem_out || !d) return CUDA_ERROR_INVALID_VALUE;
  if (d->type != CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD)
    return CUDA_ERROR_NOT_SUPPORTED;
  if (!d->size || d->size > SIZE_MAX / 2
      || (d->flags & ~(unsigned)CUDA_EXTERNAL_MEMORY_DEDICATED))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = dbl_unsafe_call())
      || (r = check_fd(d->handle.fd, d->size, CUDA_ERROR_INVALID_VALUE)))
    return r;
  CUexternalMemory m = dbl_new_obj(sizeof *m, O_EXTMEM);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  m->fd = d->handle.fd;
  m->size = d->size;
  *extMem_out = m;
  return CUDA_SUCCESS;
}

/* Its buffers and mipmapped arrays stay mapped until freed. */
CUresult CUDAAPI cuDestroyExternalMemory(CUexternalMemory extMem) {
  ENTRY(cuDestroyExternalMemory);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!live(extMem, O_EXTMEM)) return CUDA_ERROR_INVALID_HANDLE;
  if ((r = dbl_unsafe_call())) return r;
  if ((r = dbl_settle())) return r; /* the work still to run that uses it runs first */
  dbl_free_external(&extMem->h);
  return CUDA_SUCCESS;
}

/* A mapping of its own of [offset, offset + size) of the file, as device
   memory that cuMemFree unmaps. */
CUresult CUDAAPI cuExternalMemoryGetMappedBuffer(CUdeviceptr *devPtr,
                                                 CUexternalMemory extMem,
                                                 const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *b) {
  ENTRY(cuExternalMemoryGetMappedBuffer);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!devPtr || !b) return CUDA_ERROR_INVALID_VALUE;
  if (!live(extMem, O_EXTMEM)) return CUDA_ERROR_INVALID_HANDLE;
  if (!b->size || b->flags || b->offset > extMem->size
      || b->size > extMem->size - b->offset)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = dbl_unsafe_call())) return r;
  void *p = map_range(extMem->fd, b->offset, b->size);
  if (!p) return CUDA_ERROR_OPERATING_SYSTEM;
  if ((r = dbl_add_external_memory(p, b->size, 0))) {
    dbl_unmap((uintptr_t)p, b->size);
    return r;
  }
  *devPtr = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

/* Extent e at level l: halved each level, never below 1 (0 stays 0). */
static size_t shrink(size_t e, unsigned l) {
  return !e ? 0 : l >= 8 * sizeof e || !(e >> l) ? 1 : e >> l;
}

/* Levels of a full chain from the largest extent down to 1. */
static unsigned full_chain(const CUDA_ARRAY3D_DESCRIPTOR *d) {
  size_t e = d->Width > d->Height ? d->Width : d->Height;
  if (d->Depth > e) e = d->Depth;
  unsigned n = 1;
  while (e >>= 1) n++;
  return n;
}

/* Levels from the descriptor of level 0 (format, channels, flags: surface
   load/store and colour attachment), their texels level after level from
   offset, which the memory must hold. */
CUresult CUDAAPI cuExternalMemoryGetMappedMipmappedArray(CUmipmappedArray *mipmap,
                                                         CUexternalMemory extMem,
                                                         const CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC *d) {
  ENTRY(cuExternalMemoryGetMappedMipmappedArray);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!mipmap || !d) return CUDA_ERROR_INVALID_VALUE;
  if (!live(extMem, O_EXTMEM)) return CUDA_ERROR_INVALID_HANDLE;
  unsigned n = d->numLevels;
  if (!n || !d->arrayDesc.Width || n > full_chain(&d->arrayDesc))
    return CUDA_ERROR_INVALID_VALUE;
  struct CUarray_st *lv = calloc(n, sizeof *lv);
  if (!lv) return CUDA_ERROR_OUT_OF_MEMORY;
  size_t total = 0, at[8 * sizeof(size_t)]; /* full_chain's most */
  for (unsigned l = 0; l < n && !r; l++) {
    CUDA_ARRAY3D_DESCRIPTOR ld = d->arrayDesc;
    ld.Width = shrink(ld.Width, l);
    ld.Height = shrink(ld.Height, l);
    ld.Depth = shrink(ld.Depth, l);
    r = dbl_array_layout(&lv[l], &ld, CUDA_ARRAY3D_SURFACE_LDST
                                      | CUDA_ARRAY3D_COLOR_ATTACHMENT);
    at[l] = total;
    if (!r) total += lv[l].pitch * lv[l].rows * lv[l].slices;
  }
  if (!r && (d->offset > extMem->size || total > extMem->size - d->offset))
    r = CUDA_ERROR_INVALID_VALUE;
  if (!r) r = dbl_unsafe_call();
  CUmipmappedArray m = NULL;
  void *p = NULL;
  if (!r && !(p = map_range(extMem->fd, d->offset, total)))
    r = CUDA_ERROR_OPERATING_SYSTEM;
  if (!r && (r = dbl_add_external_memory(p, total, 1)))
    dbl_unmap((uintptr_t)p, total);
  if (!r && !(m = dbl_new_obj(sizeof *m, O_MIPMAP))) {
    dbl_drop_external_memory(p);
    r = CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (r) {
    free(lv);
    return r;
  }
  for (unsigned l = 0; l < n; l++) {
    lv[l].h.kind = O_ARRAY;
    lv[l].h.dev = m->h.dev;
    lv[l].mem = (CUdeviceptr)(uintptr_t)p + at[l];
    lv[l].mipmap = m;
  }
  m->texels = p;
  m->nlevels = n;
  m->levels = lv;
  *mipmap = m;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMipmappedArrayGetLevel(CUarray *pLevelArray,
                                          CUmipmappedArray hMipmappedArray,
                                          unsigned int level) {
  ENTRY(cuMipmappedArrayGetLevel);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!pLevelArray) return CUDA_ERROR_INVALID_VALUE;
  if (!live(hMipmappedArray, O_MIPMAP)) return CUDA_ERROR_INVALID_HANDLE;
  if (level >= hMipmappedArray->nlevels) return CUDA_ERROR_INVALID_VALUE;
  *pLevelArray = &hMipmappedArray->levels[level];
  return CUDA_SUCCESS;
}

/* Unmaps its texels; its levels go with it. */
CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  ENTRY(cuMipmappedArrayDestroy);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!live(hMipmappedArray, O_MIPMAP)) return CUDA_ERROR_INVALID_HANDLE;
  if ((r = dbl_unsafe_call())) return r;
  if ((r = dbl_settle())) return r; /* the work still to run that uses it runs first */
  dbl_free_external(&hMipmappedArray->h);
  return CUDA_SUCCESS;
}

/* -- external semaphores --------------------------------------------------- */

CUresult CUDAAPI cuImportExternalSemaphore(CUexternalSemaphore *extSem_out,
                                           const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC *d) {
  ENTRY(cuImportExternalSemaphore);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!extSem_out || !d) return CUDA_ERROR_INVALID_VALUE;
  int timeline = d->type == CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD;
  if (!timeline && d->type != CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD)
    return CUDA_ERROR_NOT_SUPPORTED;
  if (d->flags) return CUDA_ERROR_INVALID_VALUE;
  /* a file too short is not a synchronization object */
  if ((r = check_fd(d->handle.fd, sizeof(uint64_t),
                    CUDA_ERROR_INVALID_HANDLE)))
    return r;
  CUexternalSemaphore s = dbl_new_obj(sizeof *s, O_EXTSEM);
  if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
  if (!(s->counter = map_range(d->handle.fd, 0, sizeof *s->counter))) {
    dbl_free_obj(s);
    return CUDA_ERROR_OPERATING_SYSTEM;
  }
  s->fd = d->handle.fd;
  s->timeline = timeline;
  *extSem_out = s;
  return CUDA_SUCCESS;
}

/* Graphs that still signal or wait on it fail with INVALID_HANDLE there. */
CUresult CUDAAPI cuDestroyExternalSemaphore(CUexternalSemaphore extSem) {
  ENTRY(cuDestroyExternalSemaphore);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!live(extSem, O_EXTSEM)) return CUDA_ERROR_INVALID_HANDLE;
  if ((r = dbl_settle())) return r; /* the work still to run that uses it runs first */
  dbl_free_external(&extSem->h);
  return CUDA_SUCCESS;
}

/* An op's args: its semaphores, then their params (signal or wait). */
static size_t params_size(CUgraphNodeType t) {
  return t == CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL
         ? sizeof(CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS)
         : sizeof(CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS);
}

size_t dbl_semas_bytes(const op *o) {
  if (o->type != CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL
      && o->type != CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT)
    return 0;
  return o->nsems * (sizeof(CUexternalSemaphore) + params_size(o->type));
}

/* The fence value of params i of o. */
static uint64_t fence(const op *o, const unsigned char *params, unsigned i) {
  const unsigned char *p = params + i * params_size(o->type);
  if (o->type == CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL)
    return ((const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *)(const void *)p)
      ->params.fence.value;
  return ((const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *)(const void *)p)
    ->params.fence.value;
}

CUresult dbl_semas_op(op *o, CUgraphNodeType type,
                      const CUexternalSemaphore *sems, const void *params,
                      unsigned n) {
  if (!n || !sems || !params) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < n; i++)
    if (!live(sems[i], O_EXTSEM)) return CUDA_ERROR_INVALID_HANDLE;
  *o = (op){.type = type, .nsems = n};
  size_t nb = dbl_semas_bytes(o), ns = n * sizeof *sems;
  if (!(o->args = malloc(nb))) return CUDA_ERROR_OUT_OF_MEMORY;
  memcpy(o->args, sems, ns);
  memcpy(o->args + ns, params, nb - ns);
  return CUDA_SUCCESS;
}

/* Whether s is signalled for value; a binary one is then unsignalled. */
static int take(CUexternalSemaphore s, uint64_t value) {
  uint64_t v = __atomic_load_n(s->counter, __ATOMIC_ACQUIRE);
  if (s->timeline) return v >= value;
  while (v)
    if (__atomic_compare_exchange_n(s->counter, &v, 0, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
      return 1;
  return 0;
}

/* One semaphore of a wait and its value, as dbl_poll asks. */
typedef struct awaited { CUexternalSemaphore sem; uint64_t value; } awaited;

static CUresult taken(void *arg) {
  const awaited *a = arg;
  if (!live(a->sem, O_EXTSEM)) return CUDA_ERROR_INVALID_HANDLE;
  return take(a->sem, a->value) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

/* Waits for each semaphore in turn (sems and params: a copy of o's, which
   other threads may change meanwhile), or until the work is stopped. */
static CUresult wait_all(const op *o, const CUexternalSemaphore *sems,
                         const unsigned char *params) {
  for (unsigned i = 0; i < o->nsems; i++) {
    awaited a = {sems[i], fence(o, params, i)};
    CUresult r = dbl_poll(taken, &a);
    if (r) return r;
  }
  return CUDA_SUCCESS;
}

CUresult dbl_run_semas(const op *o, int dry) {
  const CUexternalSemaphore *sems = (const CUexternalSemaphore *)(void *)o->args;
  const unsigned char *params = o->args + o->nsems * sizeof *sems;
  for (unsigned i = 0; i < o->nsems; i++)
    if (!live(sems[i], O_EXTSEM)) return CUDA_ERROR_INVALID_HANDLE;
  if (dry) return CUDA_SUCCESS;
  if (o->type == CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL) {
    for (unsigned i = 0; i < o->nsems; i++)
      __atomic_store_n(sems[i]->counter,
                       sems[i]->timeline ? fence(o, params, i) : 1,
                       __ATOMIC_RELEASE);
    return CUDA_SUCCESS;
  }
  size_t nb = dbl_semas_bytes(o);
  unsigned char *copy = malloc(nb);
  if (!copy) return CUDA_ERROR_OUT_OF_MEMORY;
  memcpy(copy, o->args, nb);
  CUresult r = wait_all(o, (const CUexternalSemaphore *)(void *)copy,
                        copy + (params - o->args));
  free(copy);
  return r;
}

/* A signal or wait on stream: run now, or a node of its capture. */
static CUresult semas(CUgraphNodeType type, const CUexternalSemaphore *sems,
                      const void *params, unsigned n, CUstream stream) {
  CUresult r = dbl_enter();
  if (r) return r;
  CUstream s = dbl_stream_of(stream);
  if (!n) return dbl_stream_usable(s);
  op o;
  if ((r = dbl_semas_op(&o, type, sems, params, n))) return r;
  return dbl_submit(s, &o);
}

CUresult CUDAAPI cuSignalExternalSemaphoresAsync(const CUexternalSemaphore *extSemArray,
                                                 const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *paramsArray,
                                                 unsigned int numExtSems,
                                                 CUstream stream) {
  ENTRY(cuSignalExternalSemaphoresAsync);
  return semas(CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL, extSemArray, paramsArray,
               numExtSems, stream);
}

CUresult CUDAAPI cuWaitExternalSemaphoresAsync(const CUexternalSemaphore *extSemArray,
                                               const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *paramsArray,
                                               unsigned int numExtSems,
                                               CUstream stream) {
  ENTRY(cuWaitExternalSemaphoresAsync);
  return semas(CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT, extSemArray, paramsArray,
               numExtSems, stream);
}

/* -- their graph nodes ----------------------------------------------------- */

/* Replaces the instantiated op at *o, of type, by one of the new params;
   it keeps its number of semaphores, its enabled flag and its id, as the
   driver does. */
static CUresult set_params(op *o, CUgraphNodeType type,
                           const CUexternalSemaphore *sems,
                           const void *params, unsigned n) {
  if (!o || o->type != type || n != o->nsems)
    return CUDA_ERROR_INVALID_VALUE;
  op x;
  CUresult r = dbl_semas_op(&x, type, sems, params, n);
  if (r) return r;
  x.disabled = o->disabled;
  x.id = o->id;
  free(o->args);
  *o = x;
  return CUDA_SUCCESS;
}

/* The instantiated node changes; hNode does not. */
CUresult CUDAAPI cuGraphExecExternalSemaphoresSignalNodeSetParams(CUgraphExec hGraphExec,
                                                                  CUgraphNode hNode,
                                                                  const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *p) {
  ENTRY(cuGraphExecExternalSemaphoresSignalNodeSetParams);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return set_params(dbl_exec_op(hGraphExec, hNode),
                    CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL, p->extSemArray,
                    p->paramsArray, p->numExtSems);
}

CUresult CUDAAPI cuGraphExecExternalSemaphoresWaitNodeSetParams(CUgraphExec hGraphExec,
                                                                CUgraphNode hNode,
                                                                const CUDA_EXT_SEM_WAIT_NODE_PARAMS *p) {
  ENTRY(cuGraphExecExternalSemaphoresWaitNodeSetParams);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return set_params(dbl_exec_op(hGraphExec, hNode),
                    CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT, p->extSemArray,
                    p->paramsArray, p->numExtSems);
}
