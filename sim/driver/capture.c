/* Stream capture: sequences begun on a stream, joined by the streams that
   wait on their events, whose work becomes nodes of a graph; the calls and
   streams that break them. */
#include "double.h"

#include <stdlib.h>
#include <string.h>

capture *dbl_captures; /* in progress */
static unsigned long capture_ids;

capture *dbl_find_capture(unsigned long id) {
  capture *c = dbl_captures;
  while (c && c->id != id) c = c->next;
  return c;
}

#define EACH_STREAM(s)                                                      \
  for (obj *o_ = dbl_live.next; o_ != &dbl_live; o_ = o_->next)             \
    if (o_->kind == O_STREAM && ((s) = (CUstream)o_))

/* Ends c: its streams leave capture mode; its graph is the caller's. */
void dbl_end_capture(capture *c) {
  CUstream s;
  EACH_STREAM(s) if (s->cap == c) {
    s->cap = NULL;
    s->tips.n = 0;
  }
  capture **p = &dbl_captures;
  while (*p != c) p = &(*p)->next;
  *p = c->next;
  free(c->orphans.v);
  free(c);
}

/* Calls the driver deems potentially unsafe during capture (allocation,
   unloading, waiting on or querying other work, instantiation), by the
   Driver API's rules per thread: refused, and the capture invalidated,
   when the calling thread itself captures (not RELAXED) or another thread
   captures in GLOBAL mode; another thread's THREAD_LOCAL capture (and any
   RELAXED one) does not restrict this thread. The calling thread's own
   interaction mode is the default, global. */
CUresult dbl_unsafe_call(void) {
  CUresult r = CUDA_SUCCESS;
  pthread_t self = pthread_self();
  for (capture *c = dbl_captures; c; c = c->next) {
    int mine = pthread_equal(c->thread, self);
    if (c->mode == CU_STREAM_CAPTURE_MODE_RELAXED ||
        (!mine && c->mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL))
      continue; /* another thread's thread-local capture: ignored */
    c->invalid = 1;
    r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return r;
}

/* The legacy stream waits on every blocking stream, so it cannot be used
   while one captures (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT); work sent to it
   invalidates those captures. */
CUresult dbl_legacy_blocked(int invalidate) {
  CUresult r = CUDA_SUCCESS;
  CUstream s;
  EACH_STREAM(s) if (s->cap && !(s->flags & CU_STREAM_NON_BLOCKING)) {
    if (invalidate) s->cap->invalid = 1;
    r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  }
  return r;
}

/* Records o as a node of s's capture, after s's tips, which it becomes; the
   node takes o->args. A kernel launched with programmatic stream
   serialization gets programmatic edges from the kernel nodes among the
   tips (from their programmatic port), as the driver records it. */
CUresult dbl_capture_op(CUstream s, const op *o) {
  CUgraphNode n = dbl_add_node(s->cap->g, o, &s->tips);
  if (!n) return CUDA_ERROR_OUT_OF_MEMORY;
  for (size_t i = 0; o->prog && i < s->tips.n; i++)
    if (s->tips.v[i]->op.type == CU_GRAPH_NODE_TYPE_KERNEL &&
        dbl_set_push(&n->prog, s->tips.v[i], 0))
      return CUDA_ERROR_OUT_OF_MEMORY;
  s->tips.n = 0;
  dbl_set_push(&s->tips, n, 0); /* cannot fail: tips has room for one */
  return CUDA_SUCCESS;
}

/* -- capture sequences ----------------------------------------------------- */

CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream,
                                      CUstreamCaptureMode mode) {
  ENTRY(cuStreamBeginCapture);
  CUresult r = dbl_enter();
  if (r) return r;
  CUstream s = dbl_stream_of(hStream);
  if (!s) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL
      && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
      && mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  if (s->cap) return CUDA_ERROR_ILLEGAL_STATE;
  capture *c = calloc(1, sizeof *c);
  if (!c || !(c->g = dbl_new_obj(sizeof *c->g, O_GRAPH))) {
    free(c);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  c->origin = s;
  c->mode = mode;
  c->thread = pthread_self();
  c->owned = 1;
  c->id = ++capture_ids;
  c->next = dbl_captures;
  dbl_captures = c;
  s->cap = c;
  s->tips.n = 0;
  return CUDA_SUCCESS;
}

/* Marks the nodes of from and everything they depend on (by index), with
   a stack of its own: chains of nodes can be long. */
static int mark_ancestors(const nodeset *from, unsigned char *mark) {
  nodeset todo = {NULL, 0, 0};
  int bad = dbl_set_union(&todo, from);
  while (!bad && todo.n) {
    CUgraphNode n = todo.v[--todo.n];
    mark[n->idx] = 1;
    for (size_t i = 0; i < n->deps.n && !bad; i++)
      if (!mark[n->deps.v[i]->idx]) bad = dbl_set_push(&todo, n->deps.v[i], 1);
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
  CUresult r = dbl_enter();
  if (r) return r;
  CUstream s = dbl_stream_of(hStream);
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
    if (c->owned) dbl_free_graph(c->g);
  } else {
    *phGraph = c->g;
  }
  dbl_end_capture(c);
  return r;
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream,
                                     CUstreamCaptureStatus *captureStatus) {
  ENTRY(cuStreamIsCapturing);
  CUresult r = dbl_enter();
  if (r) return r;
  CUstream s = dbl_stream_of(hStream);
  if (!captureStatus) return CUDA_ERROR_INVALID_VALUE;
  if (!s && (r = dbl_legacy_blocked(0))) return r; /* not invalidated */
  *captureStatus = !s || !s->cap ? CU_STREAM_CAPTURE_STATUS_NONE
                   : s->cap->invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                     : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  return CUDA_SUCCESS;
}

/* Begins a capture into hGraph, whose new work depends on the given nodes
   of it; the graph stays the caller's however the capture ends. */
CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
                                             const CUgraphNode *dependencies,
                                             const CUgraphEdgeData *dependencyData,
                                             size_t numDependencies,
                                             CUstreamCaptureMode mode) {
  ENTRY(cuStreamBeginCaptureToGraph);
  CUresult r = dbl_enter();
  if (r) return r;
  CUstream s = dbl_stream_of(hStream);
  if (!s) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (!hGraph || !dbl_nodes_of(hGraph, dependencies, numDependencies)
      || !dbl_default_edges(dependencyData, numDependencies)
      || (mode != CU_STREAM_CAPTURE_MODE_GLOBAL
          && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
          && mode != CU_STREAM_CAPTURE_MODE_RELAXED))
    return CUDA_ERROR_INVALID_VALUE;
  if (s->cap) return CUDA_ERROR_ILLEGAL_STATE;
  capture *c = calloc(1, sizeof *c);
  if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
  s->tips.n = 0;
  for (size_t i = 0; i < numDependencies; i++)
    if (dbl_set_push(&s->tips, dependencies[i], 0)) {
      free(c);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  c->origin = s;
  c->mode = mode;
  c->thread = pthread_self();
  c->g = hGraph;
  c->id = ++capture_ids;
  c->next = dbl_captures;
  dbl_captures = c;
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
  CUresult r = dbl_enter();
  if (r) return r;
  CUstream s = dbl_stream_of(hStream);
  if (!captureStatus_out || (edgeData_out && !dependencies_out))
    return CUDA_ERROR_INVALID_VALUE;
  if (!s && (r = dbl_legacy_blocked(0))) return r;
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
  CUresult r = dbl_enter();
  if (r) return r;
  CUstream s = dbl_stream_of(hStream);
  if (!s || !s->cap) return CUDA_ERROR_ILLEGAL_STATE;
  if (s->cap->invalid) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  if ((flags != CU_STREAM_ADD_CAPTURE_DEPENDENCIES
       && flags != CU_STREAM_SET_CAPTURE_DEPENDENCIES)
      || !dbl_nodes_of(s->cap->g, dependencies, numDependencies)
      || !dbl_default_edges(dependencyData, numDependencies))
    return CUDA_ERROR_INVALID_VALUE;
  if (flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES) s->tips.n = 0;
  for (size_t i = 0; i < numDependencies; i++)
    if (dbl_set_push(&s->tips, dependencies[i], 0))
      return CUDA_ERROR_OUT_OF_MEMORY;
  return CUDA_SUCCESS;
}
