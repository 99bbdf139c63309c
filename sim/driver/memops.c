/* Stream memory operations: writes of a 32- or 64-bit value and waits for
   one to satisfy a comparison (cuStreamWriteValue32/64, cuStreamWaitValue32/
   64, cuStreamBatchMemOp), in device memory (not managed memory, as the
   Driver API says) or page-locked host memory, run when sent or, in a
   capture, a batch memory operation node (BATCH_MEM_OP), as cuGraphAddNode
   makes them too; an instantiated node takes new addresses, values and
   comparisons (cuGraphExecBatchMemOpNodeSetParams), never a new count or
   kind of operation.

   A wait blocks the calling thread (a launch's, for a node), polling the
   value with the driver's lock given back, so that another thread, the
   host or another stream may write it: bounded as every wait for memory is
   (dbl_poll: the work's bound, CUDA_DOUBLE_WAIT_LIMIT). The comparisons
   are the driver's: GEQ is cyclic, (int32_t)(*addr - value) >= 0 (int64_t
   for 64 bits), EQ, AND ((*addr & value) != 0) and NOR (~(*addr | value)
   != 0); the FLUSH flag changes nothing here. A write is a release store,
   a wait's read an acquire load. */
#include "double.h"

#include <stdlib.h>
#include <string.h>

typedef CUstreamBatchMemOpParams memop;

static int wide(const memop *m) {
  return m->operation == CU_STREAM_MEM_OP_WAIT_VALUE_64 ||
         m->operation == CU_STREAM_MEM_OP_WRITE_VALUE_64;
}

static int waits(const memop *m) {
  return m->operation == CU_STREAM_MEM_OP_WAIT_VALUE_32 ||
         m->operation == CU_STREAM_MEM_OP_WAIT_VALUE_64;
}

/* Whether m is an operation the double runs, with flags the driver takes
   (a write's NO_MEMORY_BARRIER is not in the v2 API), at an aligned
   address. The memory is checked when it runs. */
static int valid(const memop *m) {
  unsigned cmp = m->waitValue.flags & ~(unsigned)CU_STREAM_WAIT_VALUE_FLUSH;
  if (waits(m)) return cmp <= CU_STREAM_WAIT_VALUE_NOR &&
                       !(m->waitValue.address % (wide(m) ? 8 : 4));
  if (m->operation == CU_STREAM_MEM_OP_WRITE_VALUE_32 ||
      m->operation == CU_STREAM_MEM_OP_WRITE_VALUE_64)
    return !m->writeValue.flags &&
           !(m->writeValue.address % (wide(m) ? 8 : 4));
  return 0; /* barriers and flushes are not modelled */
}

CUresult dbl_memops_op(op *o, const memop *ops, unsigned n) {
  if (!n || !ops) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < n; i++)
    if (!valid(&ops[i])) return CUDA_ERROR_INVALID_VALUE;
  *o = (op){.type = CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, .nsems = n};
  if (!(o->args = malloc(n * sizeof *ops))) return CUDA_ERROR_OUT_OF_MEMORY;
  memcpy(o->args, ops, n * sizeof *ops);
  return CUDA_SUCCESS;
}

/* A wait's operand, as dbl_poll asks: looked up at every poll (another
   thread may free it meanwhile). */
typedef struct awaited {
  CUdeviceptr addr;
  uint64_t value;
  unsigned cmp, wide;
} awaited;

static CUresult satisfied(void *arg) {
  const awaited *a = arg;
  void *at = dbl_memop_range(a->addr, a->wide ? 8 : 4);
  if (!at) return CUDA_ERROR_INVALID_VALUE;
  uint64_t v = a->wide ? __atomic_load_n((uint64_t *)at, __ATOMIC_ACQUIRE)
                       : __atomic_load_n((uint32_t *)at, __ATOMIC_ACQUIRE);
  uint64_t mask = a->wide ? UINT64_MAX : UINT32_MAX, x = a->value & mask;
  int ok;
  switch (a->cmp) {
  case CU_STREAM_WAIT_VALUE_GEQ:
    ok = a->wide ? (int64_t)(v - x) >= 0 : (int32_t)(uint32_t)(v - x) >= 0;
    break;
  case CU_STREAM_WAIT_VALUE_EQ: ok = v == x; break;
  case CU_STREAM_WAIT_VALUE_AND: ok = (v & x) != 0; break;
  default: ok = (~(v | x) & mask) != 0; break; /* NOR */
  }
  return ok ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult dbl_run_memops(const op *o, int dry) {
  const memop *v = (const memop *)(const void *)o->args;
  for (unsigned i = 0; i < o->nsems; i++) {
    memop m = v[i]; /* other threads may set the node while a wait polls */
    size_t n = wide(&m) ? 8 : 4;
    void *at = dbl_memop_range(m.waitValue.address, n);
    if (!at) return CUDA_ERROR_INVALID_VALUE;
    if (dry) continue;
    if (!waits(&m)) {
      if (n == 8) __atomic_store_n((uint64_t *)at, m.writeValue.value64,
                                   __ATOMIC_RELEASE);
      else __atomic_store_n((uint32_t *)at, m.writeValue.value,
                            __ATOMIC_RELEASE);
      continue;
    }
    awaited a = {m.waitValue.address, n == 8 ? m.waitValue.value64 : m.waitValue.value,
                 m.waitValue.flags & ~(unsigned)CU_STREAM_WAIT_VALUE_FLUSH,
                 n == 8};
    CUresult r = dbl_poll(satisfied, &a);
    if (r) return r;
  }
  return CUDA_SUCCESS;
}

/* n operations on stream: run now, or a node of its capture. */
static CUresult send(CUstream stream, const memop *ops, unsigned n) {
  CUresult r = dbl_enter();
  if (r) return r;
  op o;
  if ((r = dbl_memops_op(&o, ops, n))) return r;
  return dbl_submit(dbl_stream_of(stream), &o);
}

static CUresult one(CUstream stream, CUstreamBatchMemOpType type,
                    CUdeviceptr addr, uint64_t value, unsigned flags) {
  memop m;
  memset(&m, 0, sizeof m);
  m.operation = type;
  m.waitValue.address = addr;
  if (type == CU_STREAM_MEM_OP_WAIT_VALUE_64 ||
      type == CU_STREAM_MEM_OP_WRITE_VALUE_64)
    m.waitValue.value64 = value;
  else
    m.waitValue.value = (cuuint32_t)value;
  m.waitValue.flags = flags; /* the same place in both */
  return send(stream, &m, 1);
}

CUresult CUDAAPI cuStreamWaitValue32(CUstream stream, CUdeviceptr addr,
                                     cuuint32_t value, unsigned int flags) {
  ENTRY(cuStreamWaitValue32);
  return one(stream, CU_STREAM_MEM_OP_WAIT_VALUE_32, addr, value, flags);
}

CUresult CUDAAPI cuStreamWaitValue64(CUstream stream, CUdeviceptr addr,
                                     cuuint64_t value, unsigned int flags) {
  ENTRY(cuStreamWaitValue64);
  return one(stream, CU_STREAM_MEM_OP_WAIT_VALUE_64, addr, value, flags);
}

CUresult CUDAAPI cuStreamWriteValue32(CUstream stream, CUdeviceptr addr,
                                      cuuint32_t value, unsigned int flags) {
  ENTRY(cuStreamWriteValue32);
  return one(stream, CU_STREAM_MEM_OP_WRITE_VALUE_32, addr, value, flags);
}

CUresult CUDAAPI cuStreamWriteValue64(CUstream stream, CUdeviceptr addr,
                                      cuuint64_t value, unsigned int flags) {
  ENTRY(cuStreamWriteValue64);
  return one(stream, CU_STREAM_MEM_OP_WRITE_VALUE_64, addr, value, flags);
}

/* At most 256 operations, as the driver takes; no flags. */
CUresult CUDAAPI cuStreamBatchMemOp(CUstream stream, unsigned int count,
                                    CUstreamBatchMemOpParams *paramArray,
                                    unsigned int flags) {
  ENTRY(cuStreamBatchMemOp);
  if (flags || count > 256) return CUDA_ERROR_INVALID_VALUE;
  return send(stream, paramArray, count);
}

/* The instantiated node takes new addresses, values and comparisons in
   place; hNode does not change. */
CUresult CUDAAPI cuGraphExecBatchMemOpNodeSetParams(CUgraphExec hGraphExec,
                                                    CUgraphNode hNode,
                                                    const CUDA_BATCH_MEM_OP_NODE_PARAMS *p) {
  ENTRY(cuGraphExecBatchMemOpNodeSetParams);
  CUresult r = dbl_enter();
  if (r) return r;
  op *o = dbl_exec_op(hGraphExec, hNode);
  if (!o || !p || !p->paramArray || o->type != CU_GRAPH_NODE_TYPE_BATCH_MEM_OP
      || p->count != o->nsems || !dbl_is_primary(p->ctx))
    return CUDA_ERROR_INVALID_VALUE;
  memop *v = (memop *)(void *)o->args;
  for (unsigned i = 0; i < p->count; i++)
    if (p->paramArray[i].operation != v[i].operation ||
        !valid(&p->paramArray[i]))
      return CUDA_ERROR_INVALID_VALUE;
  memcpy(v, p->paramArray, p->count * sizeof *v);
  return CUDA_SUCCESS;
}
