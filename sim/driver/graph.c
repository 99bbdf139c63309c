/* Graphs: nodes in the order they were added and their edges, conditional
   nodes with their handles and body graphs, child graph nodes, clones, and
   the Graphviz print. */
#include "double.h"
#include "queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -- node sets ------------------------------------------------------------- */

static int set_has(const nodeset *s, CUgraphNode x) {
  for (size_t i = 0; i < s->n; i++)
    if (s->v[i] == x) return 1;
  return 0;
}

/* Appends x (also when present, if dup). Nonzero when out of memory. */
int dbl_set_push(nodeset *s, CUgraphNode x, int dup) {
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

int dbl_set_union(nodeset *dst, const nodeset *src) {
  for (size_t i = 0; i < src->n; i++)
    if (dbl_set_push(dst, src->v[i], 0)) return 1;
  return 0;
}

int dbl_set_assign(nodeset *dst, const nodeset *src) {
  dst->n = 0;
  return dbl_set_union(dst, src);
}

/* -- graphs ---------------------------------------------------------------- */

void dbl_free_graph(CUgraph g) {
  for (size_t i = 0; i < g->nodes.n; i++) {
    op *o = &g->nodes.v[i]->op;
    dbl_hold_graph_memory(o, -1);
    for (unsigned j = 0; o->bodies && j < o->nbodies; j++)
      if (o->bodies[j]) dbl_free_graph(o->bodies[j]);
    free(o->bodies);
    free(o->args);
    free(g->nodes.v[i]->argv);
    free(g->nodes.v[i]->deps.v);
    free(g->nodes.v[i]->prog.v);
    free(g->nodes.v[i]);
  }
  free(g->nodes.v);
  free(g->conds);
  dbl_uo_release(&g->uos, 0);
  dbl_forget_graph(g);
  dbl_free_obj(g);
}

/* Adds a node running o (whose args it takes) after deps. */
CUgraphNode dbl_add_node(CUgraph g, const op *o, const nodeset *deps) {
  CUgraphNode n = calloc(1, sizeof *n);
  if (!n || dbl_set_union(&n->deps, deps) || dbl_set_push(&g->nodes, n, 1)) {
    if (n) free(n->deps.v);
    free(n);
    return NULL;
  }
  n->op = *o;
  if (!n->op.where) n->op.where = dbl_lua_line(); /* added where */
  n->idx = g->nodes.n - 1;
  n->op.id = (uint64_t)g->cupti_id << 32 | n->idx;
  n->graph = g;
  dbl_hold_graph_memory(o, 1);
  return n;
}

static int cmp_size(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return (x > y) - (x < y);
}

int dbl_make_edges(CUgraph g, edges *e) {
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
    for (size_t j = 0; j < d->n; j++)
      out[j] = d->v[j]->idx * 2 + set_has(&g->nodes.v[i]->prog, d->v[j]);
    qsort(out, d->n, sizeof *out, cmp_size);
    e->start[i + 1] = e->start[i] + d->n;
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

/* Whether g or a body of it has an allocation or free node. */
static int has_memory_node(CUgraph g) {
  for (size_t i = 0; i < g->nodes.n; i++) {
    const op *o = &g->nodes.v[i]->op;
    if (o->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC ||
        o->type == CU_GRAPH_NODE_TYPE_MEM_FREE)
      return 1;
    for (unsigned j = 0; j < o->nbodies; j++)
      if (has_memory_node(o->bodies[j])) return 1;
  }
  return 0;
}

/* Whether every one of the n nodes is a node of g, none twice. */
int dbl_nodes_of(CUgraph g, const CUgraphNode *v, size_t n) {
  if (n && !v) return 0;
  for (size_t i = 0; i < n; i++) {
    if (!v[i] || !set_has(&g->nodes, v[i])) return 0;
    for (size_t j = 0; j < i; j++)
      if (v[j] == v[i]) return 0;
  }
  return 1;
}

/* Edge data that is all default (or none): what the double takes but from
   captures, which make programmatic edges too. */
int dbl_default_edges(const CUgraphEdgeData *d, size_t n) {
  static const CUgraphEdgeData zero;
  for (size_t i = 0; d && i < n; i++)
    if (memcmp(&d[i], &zero, sizeof zero)) return 0;
  return 1;
}

void dbl_edge_data(CUgraphNode node, CUgraphNode dep, CUgraphEdgeData *d) {
  memset(d, 0, sizeof *d);
  if (set_has(&node->prog, dep)) {
    d->from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
    d->type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
  }
}

CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph) {
  ENTRY(cuGraphDestroy);
  CUresult r = dbl_enter_graph();
  if (r) return r;
  if (!hGraph) return CUDA_ERROR_INVALID_HANDLE;
  dbl_free_graph(hGraph);
  return CUDA_SUCCESS;
}

static CUgraphConditionalHandle cond_ids = 0x100;

CUresult CUDAAPI cuGraphConditionalHandleCreate(CUgraphConditionalHandle *pHandle_out,
                                                CUgraph hGraph, CUcontext ctx,
                                                unsigned int defaultLaunchValue,
                                                unsigned int flags) {
  ENTRY(cuGraphConditionalHandleCreate);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!pHandle_out || !hGraph || !dbl_is_primary(ctx)
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
   edges, bodies, condition handles and references to user objects
   alike. */
static CUgraph clone_graph(CUgraph g, CUgraph parent) {
  CUgraph c = dbl_new_obj(sizeof *c, O_GRAPH);
  if (!c) return NULL;
  c->parent = parent;
  if (g->nconds && !(c->conds = malloc(g->nconds * sizeof *c->conds))) {
    dbl_free_graph(c);
    return NULL;
  }
  if (g->nconds) memcpy(c->conds, g->conds, g->nconds * sizeof *c->conds);
  c->nconds = g->nconds;
  if (dbl_uo_copy(&c->uos, &g->uos)) { /* a copy holds its own */
    dbl_free_graph(c);
    return NULL;
  }
  for (size_t i = 0; i < g->nodes.n; i++) {
    const CUgraphNode from = g->nodes.v[i];
    nodeset deps = {NULL, 0, 0};
    op o;
    int bad = dbl_copy_op(&o, &from->op);
    o.bodies = NULL;
    o.nbodies = 0;
    for (size_t j = 0; !bad && j < from->deps.n; j++)
      bad = dbl_set_push(&deps, c->nodes.v[from->deps.v[j]->idx], 1);
    if (!bad && from->op.nbodies
        && !(o.bodies = calloc(from->op.nbodies, sizeof *o.bodies)))
      bad = 1;
    for (unsigned j = 0; !bad && j < from->op.nbodies; j++, o.nbodies++)
      bad = !(o.bodies[j] = clone_graph(from->op.bodies[j], c));
    CUgraphNode n = bad ? NULL : dbl_add_node(c, &o, &deps);
    free(deps.v);
    for (size_t j = 0; n && j < from->prog.n; j++)
      if (dbl_set_push(&n->prog, c->nodes.v[from->prog.v[j]->idx], 0)) {
        dbl_free_graph(c); /* n, its op and bodies with it */
        return NULL;
      }
    if (!n) {
      for (unsigned j = 0; o.bodies && j < o.nbodies; j++)
        if (o.bodies[j]) dbl_free_graph(o.bodies[j]);
      free(o.bodies);
      free(o.args);
      dbl_free_graph(c);
      return NULL;
    }
  }
  return c;
}

/* Adds a conditional node (with new, empty body graphs, given back in
   phGraph_out), a child graph node (a copy of the graph), an event
   record node, an external semaphore signal or wait node, a batch memory
   operation node or a host node; the other types are not modelled. */
CUresult CUDAAPI cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                const CUgraphNode *dependencies,
                                const CUgraphEdgeData *dependencyData,
                                size_t numDependencies,
                                CUgraphNodeParams *nodeParams) {
  ENTRY(cuGraphAddNode);
  CUresult r = dbl_enter_graph();
  if (r) return r;
  if (!phGraphNode || !hGraph || !nodeParams
      || !dbl_nodes_of(hGraph, dependencies, numDependencies))
    return CUDA_ERROR_INVALID_VALUE;
  if (!dbl_default_edges(dependencyData, numDependencies))
    return CUDA_ERROR_NOT_SUPPORTED;
  op o = {.type = nodeParams->type};
  cond *c = NULL;
  if (o.type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
    CUDA_CONDITIONAL_NODE_PARAMS *p = &nodeParams->conditional;
    c = find_cond(hGraph, p->handle);
    unsigned n = p->size;
    if (!c || c->used || !dbl_is_primary(p->ctx) || !n
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
      if (!(o.bodies[o.nbodies] = dbl_new_obj(sizeof **o.bodies, O_GRAPH)))
        break;
      else
        o.bodies[o.nbodies]->parent = hGraph;
  } else if (o.type == CU_GRAPH_NODE_TYPE_GRAPH) {
    CUgraph child = nodeParams->graph.graph;
    if (!child || has_conditional(child)) return CUDA_ERROR_INVALID_VALUE;
    if (nodeParams->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE)
      return CUDA_ERROR_NOT_SUPPORTED;
    if (!(o.bodies = calloc(1, sizeof *o.bodies))) return CUDA_ERROR_OUT_OF_MEMORY;
    if ((o.bodies[0] = clone_graph(child, hGraph))) o.nbodies = 1;
  } else if (o.type == CU_GRAPH_NODE_TYPE_EVENT_RECORD) {
    if (!(o.event = nodeParams->eventRecord.event))
      return CUDA_ERROR_INVALID_HANDLE;
  } else if (o.type == CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL) {
    const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS_v2 *p = &nodeParams->extSemSignal;
    if ((r = dbl_semas_op(&o, o.type, p->extSemArray, p->paramsArray,
                          p->numExtSems)))
      return r;
  } else if (o.type == CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT) {
    const CUDA_EXT_SEM_WAIT_NODE_PARAMS_v2 *p = &nodeParams->extSemWait;
    if ((r = dbl_semas_op(&o, o.type, p->extSemArray, p->paramsArray,
                          p->numExtSems)))
      return r;
  } else if (o.type == CU_GRAPH_NODE_TYPE_HOST) {
    if (!(o.fn = nodeParams->host.fn)) return CUDA_ERROR_INVALID_VALUE;
    o.data = nodeParams->host.userData;
  } else if (o.type == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP) {
    const CUDA_BATCH_MEM_OP_NODE_PARAMS_v2 *p = &nodeParams->memOp;
    if (!dbl_is_primary(p->ctx) || p->flags) return CUDA_ERROR_INVALID_VALUE;
    if ((r = dbl_memops_op(&o, p->paramArray, p->count))) return r;
  } else {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  nodeset deps = {NULL, 0, 0};
  int bad = o.nbodies != (o.type == CU_GRAPH_NODE_TYPE_GRAPH ? 1
                          : o.type == CU_GRAPH_NODE_TYPE_CONDITIONAL
                          ? nodeParams->conditional.size : 0);
  for (size_t i = 0; !bad && i < numDependencies; i++)
    bad = dbl_set_push(&deps, dependencies[i], 1);
  CUgraphNode n = bad ? NULL : dbl_add_node(hGraph, &o, &deps);
  free(deps.v);
  if (!n) {
    for (unsigned j = 0; j < o.nbodies; j++) dbl_free_graph(o.bodies[j]);
    free(o.bodies);
    free(o.args);
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
  CUresult r = dbl_enter_graph();
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
  CUresult r = dbl_enter_graph();
  if (r) return r;
  if (!hNode) return CUDA_ERROR_INVALID_HANDLE;
  if (!type) return CUDA_ERROR_INVALID_VALUE;
  *type = hNode->op.type;
  return CUDA_SUCCESS;
}

/* The graph a child graph node owns. */
CUresult CUDAAPI cuGraphChildGraphNodeGetGraph(CUgraphNode hNode,
                                               CUgraph *phGraph) {
  ENTRY(cuGraphChildGraphNodeGetGraph);
  CUresult r = dbl_enter_graph();
  if (r) return r;
  if (!hNode || hNode->op.type != CU_GRAPH_NODE_TYPE_GRAPH)
    return CUDA_ERROR_INVALID_VALUE;
  if (!phGraph) return CUDA_ERROR_INVALID_VALUE;
  *phGraph = hNode->op.bodies[0];
  return CUDA_SUCCESS;
}

/* A copy of hGraph, node for node and edge for edge. */
CUresult CUDAAPI cuGraphClone(CUgraph *phGraphClone, CUgraph hGraph) {
  ENTRY(cuGraphClone);
  CUresult r = dbl_enter_graph();
  if (r) return r;
  if (!hGraph) return CUDA_ERROR_INVALID_HANDLE;
  if (!phGraphClone) return CUDA_ERROR_INVALID_VALUE;
  /* as the driver documents (and does for conditional nodes) */
  if (has_memory_node(hGraph) || has_conditional(hGraph))
    return CUDA_ERROR_NOT_SUPPORTED;
  CUgraph g = clone_graph(hGraph, NULL);
  if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
  g->origin = hGraph;
  *phGraphClone = g;
  return CUDA_SUCCESS;
}

/* The node of a copy made by cuGraphClone that stands for hOriginalNode,
   a node of the graph copied: the one at its position (nodes added to
   either since come after). */
CUresult CUDAAPI cuGraphNodeFindInClone(CUgraphNode *phNode,
                                        CUgraphNode hOriginalNode,
                                        CUgraph hClonedGraph) {
  ENTRY(cuGraphNodeFindInClone);
  CUresult r = dbl_enter_graph();
  if (r) return r;
  if (!phNode || !hOriginalNode || !hClonedGraph
      || hClonedGraph->origin != hOriginalNode->graph
      || hOriginalNode->idx >= hClonedGraph->nodes.n)
    return CUDA_ERROR_INVALID_VALUE;
  *phNode = hClonedGraph->nodes.v[hOriginalNode->idx];
  return CUDA_SUCCESS;
}

/* Puts g's nodes back in an order where each comes after its
   dependencies (stable: the earliest ready first), renumbering them; 1
   when the edges make a cycle or memory runs out. */
static int resort(CUgraph g) {
  size_t n = g->nodes.n;
  CUgraphNode *v = malloc((n ? n : 1) * sizeof *v);
  unsigned char *done = calloc(n ? n : 1, 1);
  if (!v || !done) {
    free(v);
    free(done);
    return 1;
  }
  size_t k = 0;
  for (; k < n; k++) {
    size_t pick = n;
    for (size_t i = 0; i < n && pick == n; i++) {
      const CUgraphNode x = g->nodes.v[i];
      int ready = !done[i];
      for (size_t j = 0; ready && j < x->deps.n; j++)
        ready = done[x->deps.v[j]->idx];
      if (ready) pick = i;
    }
    if (pick == n) break; /* a cycle */
    done[pick] = 1;
    v[k] = g->nodes.v[pick];
  }
  int bad = k < n;
  if (!bad)
    for (size_t i = 0; i < n; i++) (g->nodes.v[i] = v[i])->idx = i;
  free(v);
  free(done);
  return bad;
}

/* Edges from[i] -> to[i]: the nodes are renumbered to keep each after its
   dependencies; an edge that would close a cycle is refused, with none of
   them added. */
CUresult CUDAAPI cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode *from,
                                        const CUgraphNode *to,
                                        const CUgraphEdgeData *edgeData,
                                        size_t numDependencies) {
  ENTRY(cuGraphAddDependencies);
  CUresult r = dbl_enter_graph();
  if (r) return r;
  if (!hGraph) return CUDA_ERROR_INVALID_HANDLE;
  if (numDependencies && (!from || !to)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t k = 0; k < numDependencies; k++)
    if (!set_has(&hGraph->nodes, from[k]) || !set_has(&hGraph->nodes, to[k]))
      return CUDA_ERROR_INVALID_VALUE;
  if (!dbl_default_edges(edgeData, numDependencies))
    return CUDA_ERROR_NOT_SUPPORTED;
  size_t *had = malloc((numDependencies ? numDependencies : 1) * sizeof *had);
  if (!had) return CUDA_ERROR_OUT_OF_MEMORY;
  size_t i = 0;
  for (; i < numDependencies; i++) {
    if (from[i] == to[i]) break;
    had[i] = to[i]->deps.n;
    if (dbl_set_push(&to[i]->deps, from[i], 0)) break;
  }
  int bad = i < numDependencies;
  if (!bad && resort(hGraph)) bad = 1;
  if (bad) /* take back what was added, last first */
    while (i-- > 0) to[i]->deps.n = had[i];
  free(had);
  return bad ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* Every edge (dependency -> node), in node order, with its data. */
CUresult CUDAAPI cuGraphGetEdges(CUgraph hGraph, CUgraphNode *from,
                                 CUgraphNode *to, CUgraphEdgeData *edgeData,
                                 size_t *numEdges) {
  ENTRY(cuGraphGetEdges);
  CUresult r = dbl_enter_graph();
  if (r) return r;
  if (!hGraph) return CUDA_ERROR_INVALID_HANDLE;
  if (!numEdges || (!from != !to) || (edgeData && !from))
    return CUDA_ERROR_INVALID_VALUE;
  size_t n = 0;
  for (size_t i = 0; i < hGraph->nodes.n; i++) {
    const CUgraphNode node = hGraph->nodes.v[i];
    for (size_t j = 0; j < node->deps.n; j++, n++) {
      if (!from || n >= *numEdges) continue;
      if (!edgeData && set_has(&node->prog, node->deps.v[j]))
        return CUDA_ERROR_LOSSY_QUERY; /* as the driver: an edge's type */
      from[n] = node->deps.v[j];
      to[n] = node;
      if (edgeData) dbl_edge_data(node, node->deps.v[j], &edgeData[n]);
    }
  }
  if (from)
    for (size_t i = n; i < *numEdges; i++) from[i] = to[i] = NULL;
  if (!from || n < *numEdges) *numEdges = n;
  return CUDA_SUCCESS;
}

/* As the Driver API documents it: the first *numDependencies of the
   node's dependencies, NULL past the last, and how many there were when
   the array holds more. */
CUresult CUDAAPI cuGraphNodeGetDependencies(CUgraphNode hNode,
                                            CUgraphNode *dependencies,
                                            CUgraphEdgeData *edgeData,
                                            size_t *numDependencies) {
  ENTRY(cuGraphNodeGetDependencies);
  CUresult r = dbl_enter_graph();
  if (r) return r;
  if (!hNode) return CUDA_ERROR_INVALID_HANDLE;
  if (!numDependencies || (edgeData && !dependencies))
    return CUDA_ERROR_INVALID_VALUE;
  size_t n = hNode->deps.n;
  if (!dependencies) {
    *numDependencies = n;
    return CUDA_SUCCESS;
  }
  for (size_t i = 0; i < *numDependencies; i++) {
    if (!edgeData && i < n && set_has(&hNode->prog, hNode->deps.v[i]))
      return CUDA_ERROR_LOSSY_QUERY; /* would be lost */
    dependencies[i] = i < n ? hNode->deps.v[i] : NULL;
    if (edgeData && i < n) dbl_edge_data(hNode, hNode->deps.v[i], &edgeData[i]);
    else if (edgeData) memset(&edgeData[i], 0, sizeof *edgeData);
  }
  if (n < *numDependencies) *numDependencies = n;
  return CUDA_SUCCESS;
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
            : o->type == CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL
                                                        ? "EXT_SEMAS_SIGNAL"
            : o->type == CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT ? "EXT_SEMAS_WAIT"
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
  CUresult r = dbl_enter_graph();
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
