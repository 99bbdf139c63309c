/* Changing an instantiated graph in place through its capture's records:
   g:rebind swaps buffers and scalars in every node that uses them
   (cuGraphExec*NodeSetParams), without a new capture; the graph's own
   nodes follow on demand (cg_graph_sync). And what g:update must keep:
   the programmatic edges its instantiated graph has. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "graph/graph.h"

/* The buffer or scalar at idx, or NULL. */
static cg_obj *bufobj(lua_State *L, const cg_ctx *ctx, int idx) {
  cg_obj *o = cg_toany(L, ctx, idx);
  return o && (o->kind == CG_BUFFER || o->kind == CG_SCALAR) ? o : NULL;
}

static size_t words(const cg_param *p) { return (p->size + 7) / 8; }

/* o, or what the pairs (old[i] -> new[i]) replace it with */
static cg_obj *subst(cg_obj *o, cg_obj *const *olds, cg_obj *const *news,
                     int np) {
  for (int i = 0; o && i < np; i++)
    if (o == olds[i]) return news[i];
  return o;
}

/* Sets e's node in exec x (x NULL: in the graph) to its recorded values
   with the pairs substituted; argument bytes from argw when not NULL. */
CUresult cg_rec_apply(cg_ctx *ctx, const cg_recs *r, const cg_rec *e,
                      CUgraphExec x, cg_obj *const *olds,
                      cg_obj *const *news, int np, const uint64_t *argw,
                      const char **api) {
  if (e->kind == NK_KERNEL) {
    const cg_kernel *k = (const cg_kernel *)e->kernel;
    void *argv[CG_MAX_PARAMS];
    uint64_t ptrs[CG_MAX_PARAMS];
    const uint64_t *w = argw ? argw : r->words + e->word0;
    for (int j = 0; j < e->nargs; j++) {
      cg_obj *o = r->objs[e->arg0 + (size_t)j];
      cg_obj *to = subst(o, olds, news, np);
      argv[j] = (void *)(uintptr_t)w;
      if (to != o) {
        ptrs[j] = to->drv.mem;
        argv[j] = &ptrs[j];
      }
      w += words(&k->params[j]);
    }
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.func = k->f;
    p.gridDimX = e->grid[0];
    p.gridDimY = e->grid[1];
    p.gridDimZ = e->grid[2];
    p.blockDimX = e->block[0];
    p.blockDimY = e->block[1];
    p.blockDimZ = e->block[2];
    p.sharedMemBytes = e->shared;
    p.kernelParams = argv;
    if (!x) {
      *api = "cuGraphKernelNodeSetParams";
      return cg_drv.cuGraphKernelNodeSetParams(e->node, &p);
    }
    *api = "cuGraphExecKernelNodeSetParams";
    return cg_drv.cuGraphExecKernelNodeSetParams(x, e->node, &p);
  }
  if (e->kind == NK_FILL) {
    CUDA_MEMSET_NODE_PARAMS m;
    memset(&m, 0, sizeof m);
    m.dst = subst(e->obj[0], olds, news, np)->drv.mem + e->off;
    m.pitch = e->pitch;
    m.value = e->value;
    m.elementSize = e->elem;
    m.width = e->width;
    m.height = e->height;
    *api = x ? "cuGraphExecMemsetNodeSetParams"
             : "cuGraphMemsetNodeSetParams";
    if (!x && !cg_drv.cuGraphMemsetNodeSetParams)
      return CUDA_ERROR_NOT_SUPPORTED;
    return x ? cg_drv.cuGraphExecMemsetNodeSetParams(x, e->node, &m, ctx->cu)
             : cg_drv.cuGraphMemsetNodeSetParams(e->node, &m);
  }
  CUDA_MEMCPY3D c;
  memset(&c, 0, sizeof c);
  c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = subst(e->obj[1], olds, news, np)->drv.mem + e->soff;
  c.dstDevice = subst(e->obj[0], olds, news, np)->drv.mem + e->off;
  c.WidthInBytes = e->bytes;
  c.Height = c.Depth = 1;
  *api = x ? "cuGraphExecMemcpyNodeSetParams" : "cuGraphMemcpyNodeSetParams";
  if (!x && !cg_drv.cuGraphMemcpyNodeSetParams)
    return CUDA_ERROR_NOT_SUPPORTED;
  return x ? cg_drv.cuGraphExecMemcpyNodeSetParams(x, e->node, &c, ctx->cu)
           : cg_drv.cuGraphMemcpyNodeSetParams(e->node, &c);
}

CUresult cg_graph_follow(cg_graph *gr, const char **api) {
  cg_recs *r = gr->recs;
  for (size_t i = 0; r && i < r->n; i++) {
    cg_rec *e = &r->v[i];
    if (!e->dirty) continue;
    CUresult res = cg_rec_apply(gr->h.ctx, r, e, NULL, NULL, NULL, 0, NULL, api);
    if (res != CUDA_SUCCESS) return res;
    e->dirty = 0;
  }
  return CUDA_SUCCESS;
}

void cg_graph_sync(lua_State *L, cg_graph *gr) {
  const char *api = NULL;
  CUresult res = cg_graph_follow(gr, &api);
  if (res != CUDA_SUCCESS) cg_check(L, gr->h.ctx, api, res);
}

void cg_graph_resolve(lua_State *L, cg_graph *gr) {
  const char *api = NULL;
  CUresult res = cg_recs_resolve(gr->recs, &api);
  if (res != CUDA_SUCCESS) cg_check(L, gr->h.ctx, api, res);
}

/* Raises unless record i of gr can change in place. */
void cg_check_own(lua_State *L, const cg_graph *gr, const char *what) {
  if (gr->graphed)
    luaL_error(L, "%s: cugraph.Graph #%d is a graphed function's, whose "
               "calls set its nodes: call the function with the new "
               "arguments instead", what, (int)gr->id);
}

void cg_check_changeable(lua_State *L, cg_graph *gr, const cg_rec *e,
                         size_t i) {
  int id = (int)gr->id, at = (int)i + 1;
  cg_check_own(L, gr, "node");
  if (gr->h.ctx->capture)
    luaL_error(L, "cugraph.Graph #%d: nodes change outside captures", id);
  if (gr->updated)
    luaL_error(L, "cugraph.Graph #%d was updated with g:update(), and the "
               "instantiated graph knows only the nodes of its first "
               "capture: capture a new graph to rebind", id);
  if (e->kind != NK_KERNEL && e->kind != NK_FILL && e->kind != NK_COPY)
    luaL_error(L, "cugraph.Graph #%d: node %d (%s) cannot change in place",
               id, at, cg_nk_names[e->kind]);
  if (e->depth)
    luaL_error(L, "cugraph.Graph #%d: node %d is in the body of a "
               "conditional node, which the driver does not change in place: "
               "capture a new graph", id, at);
  if (!e->node)
    luaL_error(L, "cugraph.Graph #%d: the driver did not say which node %d "
               "is (it needs cuStreamGetCaptureInfo_v3, CUDA 12.3)", id, at);
  if (e->kind == NK_FILL && e->height > 1)
    luaL_error(L, "cugraph.Graph #%d: node %d fills 8-byte elements with 2D "
               "memsets, which the driver does not change in place", id, at);
  if ((e->kind == NK_KERNEL && !cg_drv.cuGraphExecKernelNodeSetParams) ||
      (e->kind == NK_FILL && !cg_drv.cuGraphExecMemsetNodeSetParams) ||
      (e->kind == NK_COPY && !cg_drv.cuGraphExecMemcpyNodeSetParams))
    luaL_error(L, "changing nodes in place needs CUDA 12.0 or later (the "
               "driver lacks cuGraphExecKernelNodeSetParams_v2)");
}

int cg_rec_uses(const cg_recs *r, const cg_rec *e, const cg_obj *o) {
  if (e->kind == NK_KERNEL) {
    for (int j = 0; j < e->nargs; j++)
      if (r->objs[e->arg0 + (size_t)j] == o) return 1;
    return 0;
  }
  return e->obj[0] == o || e->obj[1] == o;
}

int cg_recs_use(const cg_recs *r, const cg_obj *o) {
  for (size_t i = 0; i < r->n; i++)
    if (cg_rec_uses(r, &r->v[i], o)) return 1;
  return 0;
}

enum { MAXPAIRS = 16 };

/* The olds record e uses, bit i for olds[i]. */
static unsigned uses_which(const cg_recs *r, const cg_rec *e,
                           cg_obj *const *olds, int np) {
  unsigned u = 0;
  if (e->kind == NK_KERNEL) {
    cg_obj *const *objs = r->objs + e->arg0;
    for (int j = 0; j < e->nargs; j++)
      if (objs[j])
        for (int i = 0; i < np; i++) u |= (unsigned)(objs[j] == olds[i]) << i;
    return u;
  }
  for (int i = 0; i < np; i++)
    u |= (unsigned)(e->obj[0] == olds[i] || e->obj[1] == olds[i]) << i;
  return u;
}

/* Whether o is one of the news. */
static int subst_back(const cg_obj *o, cg_obj *const *news, int np) {
  for (int i = 0; i < np; i++)
    if (news[i] == o) return 1;
  return 0;
}

/* g:rebind(old, new [, old2, new2, ...]): every node that uses an old
   buffer or scalar uses its new one, all pairs at once (a swap is
   g:rebind(a, b, b, a)); each new has the old's type and count. */
static int graph_rebind(lua_State *L) {
  cg_graph *gr = cg_checkself(L, CG_GRAPH);
  cg_ctx *ctx = gr->h.ctx;
  cg_check_own(L, gr, "g:rebind");
  int top = lua_gettop(L), np = (top - 1) / 2, scalars = 0;
  if (top < 3 || (top - 1) % 2 || np > MAXPAIRS)
    return luaL_error(L, "g:rebind(old, new [, old2, new2, ...]): 1 to %d "
                      "pairs of buffers or scalars", MAXPAIRS);
  cg_obj *olds[MAXPAIRS], *news[MAXPAIRS];
  for (int i = 0; i < np; i++) {
    int at = 2 + 2 * i;
    cg_obj *o = bufobj(L, ctx, at), *n = bufobj(L, ctx, at + 1);
    if (!o || !n)
      luaL_typeerror(L, o ? at + 1 : at, "cugraph.Buffer or cugraph.Scalar");
    const char *why = cg_mem_why(L, ctx, n);
    if (why) luaL_argerror(L, at + 1, why);
    size_t on = o->kind == CG_SCALAR ? 1 : ((cg_buffer *)o)->n;
    size_t nn = n->kind == CG_SCALAR ? 1 : ((cg_buffer *)n)->n;
    int ot = o->kind == CG_SCALAR ? (int)((cg_scalar *)o)->type
                                  : (int)((cg_buffer *)o)->type;
    int nt = n->kind == CG_SCALAR ? (int)((cg_scalar *)n)->type
                                  : (int)((cg_buffer *)n)->type;
    if (o->kind != n->kind || ot != nt || on != nn)
      luaL_argerror(L, at + 1, lua_pushfstring(L, "%s of %s[%I] cannot "
                    "replace %s of %s[%I]: the kind, element type and count "
                    "must match", cg_kind_names[n->kind], cg_type_names[nt],
                    (LUAI_UACINT)nn, cg_kind_names[o->kind],
                    cg_type_names[ot], (LUAI_UACINT)on));
    olds[i] = o;
    news[i] = n;
    scalars |= o->kind == CG_SCALAR;
  }
  cg_hold(L); /* the records are changed across the pins' allocations */
  cg_graph_resolve(L, gr);
  cg_recs *r = gr->recs;
  size_t n = r ? r->n : 0;
  unsigned used = 0; /* bit i: olds[i] is used by a record */
  size_t first = n, last = 0; /* the records to change lie in [first, last) */
  for (size_t j = 0; j < n; j++) { /* one pass marks them */
    cg_rec *e = &r->v[j];
    unsigned u = uses_which(r, e, olds, np);
    e->hit = u != 0;
    if (!u) continue;
    cg_check_changeable(L, gr, e, j);
    used |= u;
    if (first == n) first = j;
    last = j + 1;
  }
  for (int i = 0; i < np; i++)
    if (!(used & 1u << i)) /* numbered as the caller wrote it: not self */
      luaL_argerror(L, 2 + 2 * i, lua_pushfstring(L, "not used by any node "
                    "that cugraph.Graph #%d recorded", (int)gr->id));
  const char *api = NULL;
  CUresult res = CUDA_SUCCESS;
  size_t done = first;
  for (; done < last && res == CUDA_SUCCESS; done++)
    if (r->v[done].hit)
      res = cg_rec_apply(ctx, r, &r->v[done], gr->h.drv.exec, olds, news, np,
                         NULL, &api);
  if (res != CUDA_SUCCESS) { /* the nodes changed so far change back */
    const char *ignored;
    for (size_t j = first; j + 1 < done; j++)
      if (r->v[j].hit)
        cg_rec_apply(ctx, r, &r->v[j], gr->h.drv.exec, NULL, NULL, 0, NULL, &ignored);
    cg_check(L, ctx, api, res);
  }
  for (size_t j = first; j < last; j++) { /* the records follow */
    cg_rec *e = &r->v[j];
    if (!e->hit) continue;
    e->dirty = 1;
    if (e->kind != NK_KERNEL) {
      e->obj[0] = subst(e->obj[0], olds, news, np);
      e->obj[1] = subst(e->obj[1], olds, news, np);
      continue;
    }
    const cg_kernel *k = (const cg_kernel *)e->kernel;
    uint64_t *w = r->words + e->word0;
    for (int a = 0; a < e->nargs; a++) {
      cg_obj **o = &r->objs[e->arg0 + (size_t)a];
      cg_obj *to = subst(*o, olds, news, np);
      if (to != *o) {
        CUdeviceptr p = to->drv.mem;
        memcpy(w, &p, 8);
        *o = to;
      }
      w += words(&k->params[a]);
    }
  }
  lua_getiuservalue(L, 1, 1); /* the pins: the news in, the olds unused out */
  int pidx = lua_gettop(L);
  for (int i = 0; i < np; i++) cg_pin_in(L, pidx, 3 + 2 * i, gr->id);
  for (int i = 0; i < np; i++) /* every use of an old changed: it is still */
    if (!subst_back(olds[i], news, np))     /* used only as another's new */
      cg_unpin_in(L, pidx, 2 + 2 * i, gr->id);
  if (scalars) cg_graph_rescan(L, gr, 1);
  lua_settop(L, 1);
  return 1;
}


void rebind_open(lua_State *L) {
  luaL_getmetatable(L, cg_kind_names[CG_GRAPH]);
  lua_getfield(L, -1, "methods");
  lua_pushvalue(L, -2); /* cg_checkself's upvalue */
  lua_pushcclosure(L, graph_rebind, 1);
  lua_setfield(L, -2, "rebind");
  lua_pop(L, 2);
}

static int cmp_size(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return (x > y) - (x < y);
}

/* The programmatic edges of g as its nodes' positions (from * (n + 1) +
   to), sorted, in a userdata pushed (*out, *k of them). */
static CUresult programmatic_edges(lua_State *L, CUgraph g, size_t **out,
                                   size_t *k, const char **api) {
  size_t n = 0, ne = 0;
  *api = "cuGraphGetNodes";
  CUresult r = cg_drv.cuGraphGetNodes(g, NULL, &n);
  if (r == CUDA_SUCCESS)
    *api = "cuGraphGetEdges", r = cg_drv.cuGraphGetEdges(g, NULL, NULL, NULL,
                                                          &ne);
  CUgraphNode *v = lua_newuserdatauv(L, (n + 2 * ne + 1) * sizeof *v +
                                     (ne + 1) * (sizeof(CUgraphEdgeData) +
                                                 sizeof **out), 0);
  CUgraphEdgeData *d = (CUgraphEdgeData *)(void *)(v + n + 2 * ne + 1);
  *out = (size_t *)(void *)(d + ne + 1);
  *k = 0;
  if (r == CUDA_SUCCESS)
    *api = "cuGraphGetNodes", r = cg_drv.cuGraphGetNodes(g, v, &n);
  if (r == CUDA_SUCCESS && ne) /* the driver refuses arrays for no edges */
    *api = "cuGraphGetEdges", r = cg_drv.cuGraphGetEdges(g, v + n, v + n + ne,
                                                          d, &ne);
  for (size_t i = 0; r == CUDA_SUCCESS && i < ne; i++) {
    if (d[i].type != CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC) continue;
    size_t from = 0, to = 0;
    while (from < n && v[from] != v[n + i]) from++;
    while (to < n && v[to] != v[n + ne + i]) to++;
    (*out)[(*k)++] = from * (n + 1) + to;
  }
  qsort(*out, *k, sizeof **out, cmp_size);
  return r;
}

CUresult cg_edges_changed(lua_State *L, CUgraph a, const cg_recs *ra,
                          CUgraph b, const cg_recs *rb, int *changed,
                          const char **api) {
  /* the launches made programmatic, in the order the nodes were made (the
     order an update pairs them in), then the driver's own edges */
  size_t na = ra ? ra->n : 0, nb = rb ? rb->n : 0, i = 0, j = 0;
  int any = 0;
  *changed = 0;
  *api = NULL;
  for (;; i++, j++) {
    while (i < na && ra->v[i].kind != NK_KERNEL) i++;
    while (j < nb && rb->v[j].kind != NK_KERNEL) j++;
    if (i == na || j == nb) break;
    any |= ra->v[i].programmatic | rb->v[j].programmatic;
    *changed |= ra->v[i].programmatic != rb->v[j].programmatic;
  }
  for (; i < na; i++) any |= ra->v[i].programmatic;
  for (; j < nb; j++) any |= rb->v[j].programmatic;
  if (!any || *changed) return CUDA_SUCCESS;
  size_t *ea, *eb;
  int pushed = 1;
  CUresult r = programmatic_edges(L, a, &ea, &na, api);
  if (r == CUDA_SUCCESS) r = programmatic_edges(L, b, &eb, &nb, api), pushed++;
  if (r == CUDA_SUCCESS) {
    *api = NULL;
    *changed = na != nb || (na && memcmp(ea, eb, na * sizeof *ea));
  }
  lua_pop(L, pushed);
  return r;
}
