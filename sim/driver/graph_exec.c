/* Instantiated graphs: plans copied from graphs, bodies too, with the
   values of their conditional handles; launches that run them in order,
   and updates in place. A launch that waits on an external semaphore
   gives the lock back while it polls: the graph is then in flight, and
   other threads' calls must leave what it runs in place. */
#include "double.h"
#include "queue.h"
#include "programmatic.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* An instantiated graph, or body: copies of the nodes' work and edges. */
typedef struct plan {
  size_t n;
  op *ops;        /* in topological order */
  edges e;
  size_t *order;  /* with event record nodes: the order the ops run in */
} plan;

static void free_plan(plan *p) {
  for (size_t i = 0; i < p->n; i++) {
    op *o = &p->ops[i];
    dbl_hold_graph_memory(o, -1);
    for (unsigned j = 0; o->plans && j < o->nbodies; j++)
      free_plan(&o->plans[j]);
    free(o->plans);
    free(o->args);
  }
  free(p->ops);
  free(p->e.start);
  free(p->e.dep);
  free(p->order);
  memset(p, 0, sizeof *p);
}

/* A plan with event record nodes runs each as soon as its dependencies
   have: the recorded times then bracket the nodes beside and before them,
   as a GPU's would. Other ops keep their order. Nonzero when out of
   memory. */
static int order_events(plan *p) {
  size_t n = p->n, events = 0;
  for (size_t i = 0; i < n; i++)
    events += p->ops[i].type == CU_GRAPH_NODE_TYPE_EVENT_RECORD;
  if (!events) return 0;
  unsigned char *done = calloc(n, 1);
  if (!done || !(p->order = malloc(n * sizeof *p->order))) {
    free(done);
    return 1;
  }
  for (size_t k = 0; k < n; k++) {
    size_t pick = n;
    for (size_t i = 0; i < n; i++) { /* the first ready: events first */
      if (done[i]) continue;
      int ready = 1;
      for (size_t d = p->e.start[i]; ready && d < p->e.start[i + 1]; d++)
        ready = done[p->e.dep[d] / 2];
      if (!ready) continue;
      if (p->ops[i].type == CU_GRAPH_NODE_TYPE_EVENT_RECORD) {
        pick = i;
        break;
      }
      if (pick == n) pick = i;
    }
    done[pick] = 1; /* deps come before a node: one is always ready */
    p->order[k] = pick;
  }
  free(done);
  return 0;
}

/* Copies g's nodes into p, bodies too. Nonzero when out of memory. */
static int build_plan(plan *p, CUgraph g) {
  size_t n = g->nodes.n;
  memset(p, 0, sizeof *p);
  if (!(p->ops = calloc(n ? n : 1, sizeof *p->ops))
      || dbl_make_edges(g, &p->e)) {
    free(p->ops);
    p->ops = NULL;
    return 1;
  }
  for (; p->n < n; p->n++) {
    op *o = &p->ops[p->n];
    const op *src = &g->nodes.v[p->n]->op;
    if (dbl_copy_op(o, src)) return free_plan(p), 1;
    dbl_hold_graph_memory(o, 1);
    o->bodies = NULL;
    o->plans = NULL;
    if (!src->nbodies) continue;
    if (!(o->plans = calloc(src->nbodies, sizeof *o->plans))) {
      p->n++;
      return free_plan(p), 1;
    }
    for (unsigned j = 0; j < src->nbodies; j++)
      if (build_plan(&o->plans[j], src->bodies[j])) {
        p->n++;
        return free_plan(p), 1;
      }
  }
  return order_events(p) ? (free_plan(p), 1) : 0;
}

/* An instantiated graph owns its plan and the values of its handles. */
struct CUgraphExec_st {
  obj h;
  uint32_t cupti_id; /* CUPTI's graph id of the exec: its nodes' ids */
  CUgraph from;   /* the graph instantiated: its nodes name the plan's */
  int auto_free;  /* AUTO_FREE_ON_LAUNCH: a launch frees what the last one
                     allocated and left */
  plan p;
  cond *conds;
  size_t nconds;
  int inflight;   /* a launch runs it (and waits on a semaphore) */
  int doomed;     /* destroyed in flight: freed when the launch ends */
  plan *retired;  /* plans replaced in flight: freed when it ends */
  size_t nretired;
  uorefs uos;     /* user objects of its graph, bodies and children */
  double done;    /* when its last launch is over (dbl_work_done) */
};

/* Whether p (its bodies too) has an op that type says: semaphore nodes
   (1), copy nodes with a host side (2). */
static int plan_has(const plan *p, int type) {
  for (size_t i = 0; i < p->n; i++) {
    const op *o = &p->ops[i];
    if (type == 1 ? o->type == CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL ||
                    o->type == CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT
                  : o->type == CU_GRAPH_NODE_TYPE_MEMCPY &&
                    (o->hdst || o->hsrc))
      return 1;
    for (unsigned j = 0; o->plans && j < o->nbodies; j++)
      if (plan_has(&o->plans[j], type)) return 1;
  }
  return 0;
}

int dbl_exec_semas(CUgraphExec x) { return plan_has(&x->p, 1); }
int dbl_exec_host_side(CUgraphExec x) { return plan_has(&x->p, 2); }

/* The extent of a copy's host side. */
static uint64_t extent(const op *o, int dst) {
  if (!o->height) return o->bytes;
  return (o->depth - 1) * (dst ? o->dslice : o->sslice) +
         (o->height - 1) * (dst ? o->dpitch : o->spitch) + o->bytes;
}

static int plan_meets(const plan *p, uint64_t a, uint64_t n, int write) {
  for (size_t i = 0; i < p->n; i++) {
    const op *o = &p->ops[i];
    uint64_t d = (uint64_t)(uintptr_t)o->hdst, s = (uint64_t)(uintptr_t)o->hsrc;
    if (o->type == CU_GRAPH_NODE_TYPE_MEMCPY && o->hdst && a < d + extent(o, 1)
        && d < a + n)
      return 2;
    if (o->type == CU_GRAPH_NODE_TYPE_MEMCPY && write && o->hsrc &&
        a < s + extent(o, 0) && s < a + n)
      return 1;
    for (unsigned j = 0; o->plans && j < o->nbodies; j++) {
      int r = plan_meets(&o->plans[j], a, n, write);
      if (r) return r;
    }
  }
  return 0;
}

int dbl_exec_host_meets(CUgraphExec x, uint64_t p, uint64_t n, int write) {
  return plan_meets(&x->p, p, n, write);
}

void dbl_forget_graph(CUgraph g) {
  for (obj *o = dbl_live.next; o != &dbl_live; o = o->next)
    if (o->kind == O_EXEC && ((CUgraphExec)o)->from == g)
      ((CUgraphExec)o)->from = NULL;
}

/* As the driver, an instantiated graph destroyed in flight goes when its
   launch is over. */
void dbl_free_exec(CUgraphExec x) {
  if (x->inflight) {
    x->doomed = 1;
    return;
  }
  for (size_t i = 0; i < x->nretired; i++) free_plan(&x->retired[i]);
  free(x->retired);
  free_plan(&x->p);
  free(x->conds);
  dbl_uo_release(&x->uos, x->done);
  dbl_free_obj(x);
}

/* Adds the user objects g and its bodies hold to *u. Nonzero when out of
   memory. */
static int gather_uos(CUgraph g, uorefs *u) {
  if (dbl_uo_copy(u, &g->uos)) return 1;
  for (size_t i = 0; i < g->nodes.n; i++) {
    const op *o = &g->nodes.v[i]->op;
    for (unsigned j = 0; j < o->nbodies; j++)
      if (gather_uos(o->bodies[j], u)) return 1;
  }
  return 0;
}

/* Appends the handles of g and of its bodies to *v (n of them, room for
   cap). Nonzero when out of memory. */
static int gather_conds(CUgraph g, cond **v, size_t *n, size_t *cap) {
  for (size_t i = 0; i < g->nconds; i++) {
    if (*n == *cap) {
      size_t c = *cap ? 2 * *cap : 4;
      cond *w = realloc(*v, c * sizeof *w);
      if (!w) return 1;
      *v = w;
      *cap = c;
    }
    (*v)[*n] = g->conds[i];
    (*v)[(*n)++].value = g->conds[i].dflt;
  }
  for (size_t i = 0; i < g->nodes.n; i++) {
    const op *o = &g->nodes.v[i]->op;
    for (unsigned j = 0; j < o->nbodies; j++)
      if (gather_conds(o->bodies[j], v, n, cap)) return 1;
  }
  return 0;
}

/* -- CUPTI's ids ----------------------------------------------------------- */

/* The graphs of g (its bodies, recursively) as {cupti id, nodes}. */
typedef struct gcount { uint32_t id; size_t n; } gcount;

static int count_graphs(CUgraph g, gcount **v, size_t *n, size_t *cap) {
  if (*n == *cap) {
    size_t c = *cap ? 2 * *cap : 8;
    gcount *p = realloc(*v, c * sizeof *p);
    if (!p) return 1;
    *v = p;
    *cap = c;
  }
  (*v)[(*n)++] = (gcount){ g->cupti_id, g->nodes.n };
  for (size_t i = 0; i < g->nodes.n; i++)
    for (unsigned j = 0; j < g->nodes.v[i]->op.nbodies; j++)
      if (count_graphs(g->nodes.v[i]->op.bodies[j], v, n, cap)) return 1;
  return 0;
}

static void renumber(plan *p, const gcount *v, size_t n, uint64_t exec) {
  for (size_t i = 0; i < p->n; i++) {
    op *o = &p->ops[i];
    uint32_t g = (uint32_t)(o->id >> 32);
    size_t base = 0;
    for (size_t k = 0; k < n; k++)
      if (v[k].id < g) base += v[k].n;
    o->id = exec << 32 | (base + (o->id & 0xffffffffu));
    for (unsigned j = 0; o->plans && j < o->nbodies; j++)
      renumber(&o->plans[j], v, n, exec);
  }
}

/* The exec's nodes get CUPTI ids of their own, as the driver gives them:
   the exec's graph id, and positions graph by graph in the order the
   graphs were made (each graph's nodes in its order). */
static int number_exec(plan *p, CUgraph g, uint32_t exec) {
  gcount *v = NULL;
  size_t n = 0, cap = 0;
  if (count_graphs(g, &v, &n, &cap)) {
    free(v);
    return 1;
  }
  renumber(p, v, n, exec);
  free(v);
  return 0;
}

uint32_t dbl_exec_id(CUgraphExec x) { return x->cupti_id; }

/* -- instantiation and launch --------------------------------------------- */

CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph,
                                    unsigned long long flags) {
  ENTRY(cuGraphInstantiate);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!hGraph) return CUDA_ERROR_INVALID_HANDLE;
  unsigned long long
    auto_free = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,
    device = CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH,
    priority = CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
  if (!phGraphExec || (flags & ~(auto_free | device | priority))
      || ((flags & auto_free) && (flags & device))) /* UPLOAD: ...WithParams */
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = dbl_unsafe_call())) return r;
  CUgraphExec x = dbl_new_obj(sizeof *x, O_EXEC);
  size_t cap = 0;
  if (x) x->cupti_id = dbl_graph_id();
  if (!x || build_plan(&x->p, hGraph) || number_exec(&x->p, hGraph, x->cupti_id)
      || gather_conds(hGraph, &x->conds, &x->nconds, &cap)
      || gather_uos(hGraph, &x->uos)) {
    if (x) dbl_free_exec(x);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  for (size_t i = 0; i < x->nconds; i++)
    if (!x->conds[i].used) { /* CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED */
      dbl_free_exec(x);
      return CUDA_ERROR_INVALID_VALUE;
    }
  /* A graph with conditional nodes has one instantiation at a time (its
     condition setters are device-updatable kernel nodes), as on the H200. */
  for (obj *o = dbl_live.next; x->nconds && o != &dbl_live; o = o->next)
    if (o->kind == O_EXEC && o != &x->h && ((CUgraphExec)o)->from == hGraph) {
      dbl_free_exec(x);
      return CUDA_ERROR_NOT_SUPPORTED;
    }
  x->from = hGraph;
  x->auto_free = (flags & auto_free) != 0;
  *phGraphExec = x;
  return CUDA_SUCCESS;
}

/* The instantiated graph that cuGraphLaunch runs. */
static CUgraphExec running;

/* Sets handle h of the graph being launched to v: 0, or 1 when it has no
   such handle (cudaGraphSetConditional's fault). */
int dbl_set_handle(uint64_t h, unsigned v) {
  for (size_t i = 0; running && i < running->nconds; i++)
    if (running->conds[i].id == h) {
      running->conds[i].value = v;
      return 0;
    }
  return 1;
}

/* Whether the graph being launched frees what its last launch allocated
   and left (AUTO_FREE_ON_LAUNCH). */
int dbl_auto_free(void) { return running && running->auto_free; }

static unsigned cond_value(CUgraphConditionalHandle h) {
  for (size_t i = 0; i < running->nconds; i++)
    if (running->conds[i].id == h) return running->conds[i].value;
  return 0;
}

#define WATCHDOG (1ul << 24) /* turns of a while loop */

static CUresult run_plan(const plan *p, dbl_work *w);

/* Runs one node of a plan: its op, or its bodies as its condition says.
   A loop past WATCHDOG turns stops the device, unless the work is bounded
   (cuSimSetWorkLimit): then the bound ends it. */
static CUresult run_node(const op *o, dbl_work *w) {
  CUresult r = CUDA_SUCCESS;
  unsigned long turns = 0;
  unsigned v;
  if (o->type == CU_GRAPH_NODE_TYPE_GRAPH) {
    r = run_plan(&o->plans[0], w);
  } else if (o->type != CU_GRAPH_NODE_TYPE_CONDITIONAL) {
    r = dbl_run_op(o, 0);
  } else if (o->ctype == CU_GRAPH_COND_TYPE_WHILE) {
    while (!r && !dbl_sticky && !dbl_hung && cond_value(o->handle)) {
      if (dbl_hang && turns >= dbl_hang) dbl_hung = 1;
      else if (++turns > WATCHDOG && !w->deadline)
        dbl_sticky = CUDA_ERROR_LAUNCH_TIMEOUT;
      else if (!(r = dbl_work_check(w))) r = run_plan(&o->plans[0], w);
    }
  } else if ((v = cond_value(o->handle)), o->ctype == CU_GRAPH_COND_TYPE_IF) {
    if (v || o->nbodies == 2) r = run_plan(&o->plans[v ? 0 : 1], w);
  } else if (v < o->nbodies) {
    r = run_plan(&o->plans[v], w);
  }
  return r;
}

/* Runs a plan's nodes in order; a kernel's fault stops the rest, as it
   stops a GPU, and so does a stop of the work (checked at every node and
   turn). Strict mode follows its programmatic edges (programmatic.c). */
static CUresult run_plan(const plan *p, dbl_work *w) {
  CUresult r = CUDA_SUCCESS;
  CUgraphExec self = running; /* a wait lets other launches run meanwhile */
  dbl_pplan pp;
  int check = dbl_pplan_begin(&pp, p->n, p->e.start, p->e.dep);
  for (size_t k = 0; k < p->n && !dbl_sticky && !dbl_hung && !r; k++) {
    size_t i = p->order ? p->order[k] : k;
    const op *o = &p->ops[i];
    if ((r = dbl_work_check(w))) break;
    if (o->disabled) continue;
    dbl_pctx c;
    if (check)
      dbl_pnode_begin(&pp, &c, i, o, p->e.start, p->e.dep,
                      dbl_running_where());
    r = run_node(o, w);
    running = self;
    if (check) dbl_pnode_end(&c);
  }
  dbl_pplan_end(&pp);
  return r;
}

/* Waits, the lock given back meanwhile, while a launch of x runs or the
   work sent with its last one may (CUDA_DOUBLE_BUSY, a hang: for ever). */
static void wait_launches(CUgraphExec x) {
  for (;;) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double now = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
    if (!x->inflight && !(x->done > 0 && dbl_work_done() > now)) return;
    dbl_nap(1000);
  }
}

/* As the driver (seen on 580.159.04, an H100), the destroy of an
   instantiated graph with conditional nodes waits for its launches to end;
   any other goes when its launch is over (dbl_free_exec). */
CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec) {
  ENTRY(cuGraphExecDestroy);
  CUresult r = dbl_enter_context();
  if (r) return r;
  if (!hGraphExec) return CUDA_ERROR_INVALID_HANDLE;
  if ((r = dbl_unsafe_call())) return r;
  dbl_settle(); /* its launches still to run run */
  if (hGraphExec->nconds) wait_launches(hGraphExec);
  dbl_free_exec(hGraphExec);
  return CUDA_SUCCESS;
}

/* Launches and uploads of graphs are not captured: refused, and the capture
   is invalidated. */
static CUresult graph_stream(CUstream s) {
  CUresult r = dbl_stream_usable(s);
  if (r || !s || !s->cap) return r;
  s->cap->invalid = 1;
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* Runs the nodes in order, at once, as eager work would; a kernel's fault
   stops the rest, as it stops a GPU. Launches of one instantiated graph
   run one after the other, as on the driver: one made while another
   waits on a semaphore waits for it. The launch runs the plan it began
   with, whatever updates come meanwhile. */
CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  ENTRY(cuGraphLaunch);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!hGraphExec) return CUDA_ERROR_INVALID_HANDLE;
  if ((r = graph_stream(dbl_stream_of(hStream)))) return r;
  if (dbl_strict) return dbl_enqueue_graph(dbl_stream_of(hStream), hGraphExec);
  dbl_work_begin();
  return dbl_graph_run(hGraphExec);
}

/* A launch of hGraphExec, with the work bound of the thread that runs it
   (dbl_work_now). */
CUresult dbl_graph_run(CUgraphExec hGraphExec) {
  CUresult r;
  dbl_work *w = dbl_work_now();
  while (hGraphExec->inflight) { /* after the launch that waits */
    dbl_nap(50);
    if ((r = dbl_enter()) || (r = dbl_work_check(w))) return r;
  }
  for (size_t i = 0; i < hGraphExec->nconds; i++)
    if (hGraphExec->conds[i].flags & CU_GRAPH_COND_ASSIGN_DEFAULT)
      hGraphExec->conds[i].value = hGraphExec->conds[i].dflt;
  plan p = hGraphExec->p; /* its arrays stay while in flight */
  running = hGraphExec;
  hGraphExec->inflight = 1;
  if (dbl_activity_on()) dbl_activity_launch();
  r = run_plan(&p, w);
  hGraphExec->inflight = 0;
  running = NULL;
  for (size_t i = 0; i < hGraphExec->nretired; i++)
    free_plan(&hGraphExec->retired[i]);
  hGraphExec->nretired = 0;
  dbl_keep_busy();
  hGraphExec->done = dbl_work_done();
  if (hGraphExec->doomed) dbl_free_exec(hGraphExec);
  return r;
}

CUresult CUDAAPI cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream) {
  ENTRY(cuGraphUpload);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!hGraphExec) return CUDA_ERROR_INVALID_HANDLE;
  return graph_stream(dbl_stream_of(hStream));
}

/* -- updates --------------------------------------------------------------- */

/* Why a node running new_op cannot replace one running old: its type or a
   parameter the driver cannot change. A kernel node may take another
   function of the same context (drivers since 11.2). */
static CUgraphExecUpdateResult node_change(const op *old, const op *new_op) {
  if (old->type != new_op->type)
    return CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
  if (old->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC ||
      old->type == CU_GRAPH_NODE_TYPE_MEM_FREE) /* as an H200 with driver */
    return CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED; /* 580 answers */
  if (old->nsems != new_op->nsems) /* as the driver: the number stays */
    return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
  if (old->type == CU_GRAPH_NODE_TYPE_MEMCPY
      && (!old->hdst != !new_op->hdst || !old->hsrc != !new_op->hsrc))
    return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED; /* memory type */
  if (old->type == CU_GRAPH_NODE_TYPE_MEMSET
      && (old->height > 1 || new_op->height > 1)
      && (old->height != new_op->height || old->width != new_op->width
          || old->pitch != new_op->pitch || old->elem != new_op->elem))
    return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED; /* 2D shape */
  return CU_GRAPH_EXEC_UPDATE_SUCCESS;
}

/* Whether graph g has the nodes and edges of plan p, node for node, its
   bodies too, with changes the driver can apply; why not in *info.
   Nonzero when out of memory. */
static int same_shape(const plan *p, CUgraph g,
                      CUgraphExecUpdateResultInfo *info) {
  const nodeset *v = &g->nodes;
  edges e = {NULL, NULL};
  if (v->n != p->n) {
    info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    return 0;
  }
  if (dbl_make_edges(g, &e)) return 1;
  const edges *old = &p->e;
  for (size_t i = 0; i < v->n && !info->result; i++) {
    size_t a = old->start[i], na = old->start[i + 1] - a;
    size_t b = e.start[i], nb = e.start[i + 1] - b;
    if (na == nb && !memcmp(old->dep + a, e.dep + b, na * sizeof *e.dep))
      continue;
    info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    info->errorNode = v->v[i];
    for (size_t j = 0; na == nb && !info->errorFromNode; j++)
      if (old->dep[a + j] != e.dep[b + j]) /* the first that differs */
        info->errorFromNode = v->v[e.dep[b + j] / 2];
  }
  free(e.start);
  free(e.dep);
  int oom = 0;
  for (size_t i = 0; i < v->n && !info->result && !oom; i++) {
    const op *o = &p->ops[i], *n = &v->v[i]->op;
    info->result = node_change(o, n);
    if (!info->result && o->type == CU_GRAPH_NODE_TYPE_CONDITIONAL
        && (o->ctype != n->ctype || o->nbodies != n->nbodies))
      info->result = CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    for (unsigned j = 0; !info->result && !oom && j < o->nbodies; j++)
      oom = same_shape(&o->plans[j], n->bodies[j], info);
    if (info->result && !info->errorNode) info->errorNode = v->v[i];
  }
  return oom;
}

/* Copies hGraph's parameters into hGraphExec when both have the same nodes
   and edges, node for node; else leaves it as it was and says why. Handles
   take hGraph's defaults. */
CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph,
                                   CUgraphExecUpdateResultInfo *resultInfo) {
  ENTRY(cuGraphExecUpdate);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!hGraphExec || !hGraph) return CUDA_ERROR_INVALID_HANDLE;
  if (!resultInfo) return CUDA_ERROR_INVALID_VALUE;
  if ((r = dbl_settle())) return r; /* launches sent before run the graph they were sent with */
  CUgraphExecUpdateResultInfo info = {CU_GRAPH_EXEC_UPDATE_SUCCESS, NULL, NULL};
  plan p;
  cond *conds = NULL;
  size_t nconds = 0, cap = 0;
  if (same_shape(&hGraphExec->p, hGraph, &info)) return CUDA_ERROR_OUT_OF_MEMORY;
  if (!info.result) { /* all or none */
    uorefs uos = {NULL, 0, 0};
    if (build_plan(&p, hGraph)) return CUDA_ERROR_OUT_OF_MEMORY;
    if (number_exec(&p, hGraph, hGraphExec->cupti_id) ||
        gather_conds(hGraph, &conds, &nconds, &cap) ||
        gather_uos(hGraph, &uos)) {
      free_plan(&p);
      free(conds);
      dbl_uo_release(&uos, 0);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* the new graph's replace the old's, held until the launches of
       before are over */
    dbl_uo_release(&hGraphExec->uos, hGraphExec->done);
    hGraphExec->uos = uos;
    if (hGraphExec->inflight) { /* the launch runs the old one to its end */
      plan *v = realloc(hGraphExec->retired,
                        (hGraphExec->nretired + 1) * sizeof *v);
      if (!v) {
        free_plan(&p);
        free(conds);
        return CUDA_ERROR_OUT_OF_MEMORY;
      }
      hGraphExec->retired = v;
      v[hGraphExec->nretired++] = hGraphExec->p;
    } else {
      free_plan(&hGraphExec->p);
    }
    free(hGraphExec->conds);
    hGraphExec->p = p;
    hGraphExec->conds = conds;
    hGraphExec->nconds = nconds;
  }
  *resultInfo = info;
  return info.result ? CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE : CUDA_SUCCESS;
}

/* The instantiated op of hNode: a node of the graph x was made from. */
op *dbl_exec_op(CUgraphExec x, CUgraphNode hNode) {
  if (!x || !hNode || hNode->graph != x->from || hNode->idx >= x->p.n)
    return NULL;
  dbl_settle(); /* the caller changes it: launches sent before run first */
  return &x->p.ops[hNode->idx];
}
