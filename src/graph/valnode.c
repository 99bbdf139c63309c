/* The nodes of a graph whose value is a cugraph.Scalar's (stream memory
   operations, external semaphores): which they are, and setting one in an
   instantiated graph before a launch (Lua graphs and C graphs alike). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "graph/graph.h"

CUresult cg_valnode_set(CUgraphExec x, const cg_valnode *v, uint64_t bits,
                        const char **api) {
  if (v->kind == NK_MEMWAIT || v->kind == NK_MEMWRITE) {
    CUstreamBatchMemOpParams m;
    memset(&m, 0, sizeof m);
    m.operation = v->kind == NK_MEMWAIT
                  ? (v->wide ? CU_STREAM_MEM_OP_WAIT_VALUE_64
                             : CU_STREAM_MEM_OP_WAIT_VALUE_32)
                  : (v->wide ? CU_STREAM_MEM_OP_WRITE_VALUE_64
                             : CU_STREAM_MEM_OP_WRITE_VALUE_32);
    m.waitValue.address = v->addr; /* a write's at the same place */
    if (v->wide) m.waitValue.value64 = bits;
    else m.waitValue.value = (cuuint32_t)bits;
    m.waitValue.flags = v->flags;
    CUDA_BATCH_MEM_OP_NODE_PARAMS p = { v->cu, 1, &m, 0 };
    *api = "cuGraphExecBatchMemOpNodeSetParams";
    return cg_drv.cuGraphExecBatchMemOpNodeSetParams(x, v->node, &p);
  }
  CUexternalSemaphore sem = v->sem;
  if (v->kind == NK_EXTWAIT) {
    CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS wp;
    memset(&wp, 0, sizeof wp);
    wp.params.fence.value = bits;
    CUDA_EXT_SEM_WAIT_NODE_PARAMS p = { &sem, &wp, 1 };
    *api = "cuGraphExecExternalSemaphoresWaitNodeSetParams";
    return cg_drv.cuGraphExecExternalSemaphoresWaitNodeSetParams(x, v->node,
                                                                 &p);
  }
  CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS sp;
  memset(&sp, 0, sizeof sp);
  sp.params.fence.value = bits;
  CUDA_EXT_SEM_SIGNAL_NODE_PARAMS p = { &sem, &sp, 1 };
  *api = "cuGraphExecExternalSemaphoresSignalNodeSetParams";
  return cg_drv.cuGraphExecExternalSemaphoresSignalNodeSetParams(x, v->node,
                                                                 &p);
}

static int memop(const cg_rec *e) {
  return e->kind == NK_MEMWAIT || e->kind == NK_MEMWRITE;
}

static int valued(const cg_rec *e) {
  return (e->kind == NK_EXTWAIT || e->kind == NK_EXTSIGNAL || memop(e)) &&
         e->obj[1];
}

int cg_count_valnodes(const cg_recs *r, int *memops) {
  int n = 0;
  *memops = 0;
  for (size_t i = 0; r && i < r->n; i++) {
    n += valued(&r->v[i]);
    *memops += valued(&r->v[i]) && memop(&r->v[i]);
  }
  return n;
}

const char *cg_valued_kinds(const cg_recs *r) {
  int memops, n = cg_count_valnodes(r, &memops);
  return memops == n ? "stream memory operation (s:wait_value, s:write_value)"
       : memops ? "external semaphore and stream memory operation"
       : "external semaphore";
}

cg_valnode *cg_valnodes_of(lua_State *L, const cg_recs *r, int *n) {
  int memops;
  if (!(*n = cg_count_valnodes(r, &memops))) return NULL;
  if (*n > memops &&
      (!cg_drv.cuGraphExecExternalSemaphoresWaitNodeSetParams ||
       !cg_drv.cuGraphExecExternalSemaphoresSignalNodeSetParams))
    luaL_error(L, "a semaphore value from a cugraph.Scalar needs the "
               "driver's cuGraphExecExternalSemaphores*NodeSetParams");
  if (memops && !cg_drv.cuGraphExecBatchMemOpNodeSetParams)
    luaL_error(L, "a wait_value or write_value value from a cugraph.Scalar "
               "needs the driver's cuGraphExecBatchMemOpNodeSetParams");
  cg_valnode *a = malloc((size_t)*n * sizeof *a);
  if (!a) luaL_error(L, "out of host memory");
  int k = 0;
  for (size_t i = 0; i < r->n; i++) {
    const cg_rec *e = &r->v[i];
    if (!valued(e)) continue;
    cg_valnode *v = &a[k++];
    memset(v, 0, sizeof *v);
    v->node = e->node;
    v->kind = e->kind;
    v->value = e->obj[1];
    v->last = e->off; /* the node's, from the capture */
    v->known = 1;
    if (memop(e)) {
      const cg_obj *c = e->obj[0];
      v->cu = c->ctx->cu;
      v->flags = e->value;
      v->wide = ((const cg_scalar *)e->obj[1])->type == CG_U64;
      v->addr = c->kind == CG_HOSTBUF ? ((const cg_hostbuf *)c)->dev
                                      : c->drv.mem;
    } else {
      v->sem = e->obj[0]->drv.extsem;
    }
  }
  return a;
}
