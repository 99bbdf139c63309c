/* Node records: the parameters of graph nodes and of instantiated ones
   (kernel, memset, memcpy) and instantiated nodes' enabled flags. */
#include "double.h"

#include <stdlib.h>
#include <string.h>

CUresult CUDAAPI cuGraphKernelNodeGetParams(CUgraphNode hNode,
                                            CUDA_KERNEL_NODE_PARAMS *p) {
  ENTRY(cuGraphKernelNodeGetParams);
  CUresult r = dbl_enter_graph();
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
  CUresult r = dbl_enter();
  if (r) return r;
  if (!hNode) return CUDA_ERROR_INVALID_HANDLE;
  if (!p || !p->func || hNode->op.type != CU_GRAPH_NODE_TYPE_KERNEL)
    return CUDA_ERROR_INVALID_VALUE;
  op o = {.type = CU_GRAPH_NODE_TYPE_KERNEL, .f = p->func,
          .grid = {p->gridDimX, p->gridDimY, p->gridDimZ},
          .block = {p->blockDimX, p->blockDimY, p->blockDimZ},
          .shared = p->sharedMemBytes};
  if ((r = dbl_prepare_launch(&o, p->kernelParams, p->extra))) return r;
  free(hNode->op.args);
  free(hNode->argv);
  hNode->argv = NULL;
  o.id = hNode->op.id; /* the same node */
  hNode->op = o;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec,
                                                CUgraphNode hNode,
                                                const CUDA_KERNEL_NODE_PARAMS *p) {
  ENTRY(cuGraphExecKernelNodeSetParams);
  CUresult r = dbl_enter();
  if (r) return r;
  op *o = dbl_exec_op(hGraphExec, hNode);
  if (!o || !p || !p->func || o->type != CU_GRAPH_NODE_TYPE_KERNEL)
    return CUDA_ERROR_INVALID_VALUE;
  op n = {.type = CU_GRAPH_NODE_TYPE_KERNEL, .f = p->func,
          .grid = {p->gridDimX, p->gridDimY, p->gridDimZ},
          .block = {p->blockDimX, p->blockDimY, p->blockDimZ},
          .shared = p->sharedMemBytes, .disabled = o->disabled};
  if ((r = dbl_prepare_launch(&n, p->kernelParams, p->extra))) return r;
  free(o->args);
  n.id = o->id; /* the same node, captured where it was */
  n.where = o->where;
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
  CUresult r = dbl_run_op(&n, 1);
  n.id = o->id;
  n.where = o->where;
  if (!r) *o = n;
  return r;
}

/* Only 1D memsets change: the instantiated one and the new one. */
CUresult CUDAAPI cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec,
                                                CUgraphNode hNode,
                                                const CUDA_MEMSET_NODE_PARAMS *p,
                                                CUcontext ctx) {
  ENTRY(cuGraphExecMemsetNodeSetParams);
  CUresult r = dbl_enter();
  if (r) return r;
  op *o = dbl_exec_op(hGraphExec, hNode);
  if (!o || o->type != CU_GRAPH_NODE_TYPE_MEMSET || o->height != 1
      || !dbl_is_primary(ctx))
    return CUDA_ERROR_INVALID_VALUE;
  return memset_params(o, p);
}

CUresult CUDAAPI cuGraphMemsetNodeSetParams(CUgraphNode hNode,
                                            const CUDA_MEMSET_NODE_PARAMS *p) {
  ENTRY(cuGraphMemsetNodeSetParams);
  CUresult r = dbl_enter();
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
  CUresult r = dbl_run_op(&n, 1);
  n.id = o->id;
  n.where = o->where;
  if (!r) *o = n;
  return r;
}

CUresult CUDAAPI cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec,
                                                CUgraphNode hNode,
                                                const CUDA_MEMCPY3D *p,
                                                CUcontext ctx) {
  ENTRY(cuGraphExecMemcpyNodeSetParams);
  CUresult r = dbl_enter();
  if (r) return r;
  op *o = dbl_exec_op(hGraphExec, hNode);
  if (!o || o->type != CU_GRAPH_NODE_TYPE_MEMCPY || !dbl_is_primary(ctx))
    return CUDA_ERROR_INVALID_VALUE;
  return memcpy_params(o, p);
}

CUresult CUDAAPI cuGraphMemcpyNodeSetParams(CUgraphNode hNode,
                                            const CUDA_MEMCPY3D *p) {
  ENTRY(cuGraphMemcpyNodeSetParams);
  CUresult r = dbl_enter();
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
  CUresult r = dbl_enter();
  if (r) return r;
  op *o = dbl_exec_op(hGraphExec, hNode);
  if (!o || (o->type != CU_GRAPH_NODE_TYPE_KERNEL
             && o->type != CU_GRAPH_NODE_TYPE_MEMCPY
             && o->type != CU_GRAPH_NODE_TYPE_MEMSET))
    return CUDA_ERROR_INVALID_VALUE;
  o->disabled = !isEnabled;
  return CUDA_SUCCESS;
}
