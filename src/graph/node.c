/* cugraph.Node: a handle to one record of a graph's capture (its parent
   and user value 1 is the graph), and the listings of a graph's nodes
   (g:nodes, g:node); node:set and node:enable change the instantiated
   graph in place. Also s:label, which names the nodes a closure makes. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "graph/graph.h"

typedef struct cg_node {
  cg_obj h;
  size_t index;         /* in the graph's records */
} cg_node;

/* The buffer or scalar at idx, or NULL. */
static cg_obj *bufobj(lua_State *L, const cg_ctx *ctx, int idx) {
  cg_obj *o = cg_toany(L, ctx, idx);
  return o && (o->kind == CG_BUFFER || o->kind == CG_SCALAR) ? o : NULL;
}

static size_t words(const cg_param *p) { return (p->size + 7) / 8; }

/* The graph of the node at 1 (pushed), open, and the node's record. */
static cg_rec *noderec(lua_State *L, cg_graph **pgr) {
  cg_node *n = cg_checkobj(L, 1, CG_NODE);
  lua_getiuservalue(L, 1, 1);
  cg_graph *gr = cg_checkobj(L, -1, CG_GRAPH);
  if (!gr->recs || n->index >= gr->recs->n)
    luaL_error(L, "cugraph.Node #%d no longer belongs to cugraph.Graph #%d",
               (int)n->index + 1, (int)gr->id);
  *pgr = gr;
  cg_graph_resolve(L, gr);
  return &gr->recs->v[n->index];
}


static int nodes_detail(lua_State *L, cg_graph *gr);

static const char *const kinds[] = {
  "kernel", "memcpy", "memset", "host", "graph", "empty", "wait_event",
  "event_record", "ext_semas_signal", "ext_semas_wait", "mem_alloc",
  "mem_free", "batch_mem_op", "conditional"
};

/* Pushes the list of the kinds of g's nodes; g belongs to owner. deep: a
   conditional or child graph node is {kind =, type =, bodies = {list,
   ...}}, from what its capture recorded in the pins at pidx (a light
   userdata key per node: a table {type, body graphs...}, or the embedded
   Graph). Returns the count. */
static size_t pushnodes(lua_State *L, cg_obj *owner, CUgraph g, int pidx,
                        int deep) {
  cg_ctx *ctx = owner->ctx;
  size_t n = 0;
  luaL_checkstack(L, 8, NULL);
  cg_check_open(L, owner);
  CU(L, ctx, cuGraphGetNodes, g, NULL, &n);
  size_t cap = n ? n : 1;
  /* every allocation first: a finalizer they run may free the graph */
  CUgraphNode *nodes = lua_newuserdatauv(L, cap * (sizeof *nodes +
                                         sizeof(CUgraphNodeType)), 0);
  CUgraphNodeType *types = (CUgraphNodeType *)(nodes + cap);
  lua_createtable(L, (int)n, 0);
  cg_check_open(L, owner);
  CU(L, ctx, cuGraphGetNodes, g, nodes, &n);
  if (n > cap) n = cap;
  for (size_t i = 0; i < n; i++)
    CU(L, ctx, cuGraphNodeGetType, nodes[i], &types[i]);
  for (size_t i = 0; i < n; i++) {
    int t = (int)types[i];
    const char *kind = (size_t)t < sizeof kinds / sizeof *kinds ? kinds[t]
                                                                : NULL;
    int noted = kind && deep && lua_rawgetp(L, pidx, nodes[i]) != LUA_TNIL;
    if (kind && deep && !noted) lua_pop(L, 1);
    if (!kind) lua_pushfstring(L, "type %d", t);
    else if (!noted) lua_pushstring(L, kind);
    if (noted) { /* what the capture noted, at the top */
      int at = lua_gettop(L);
      lua_createtable(L, 0, 3);
      lua_pushstring(L, kind);
      lua_setfield(L, -2, "kind");
      lua_newtable(L); /* at + 2: the bodies */
      cg_graph *in = cg_testobj(L, at, CG_GRAPH);
      if (in && in->h.open) { /* a child graph: the embedded graph's nodes */
        lua_pushliteral(L, "graph");
        lua_setfield(L, at + 1, "type");
        lua_getiuservalue(L, at, 1);
        pushnodes(L, &in->h, in->g, lua_gettop(L), 1);
        lua_rawseti(L, at + 2, 1);
        lua_pop(L, 1);
      } else if (lua_istable(L, at)) {
        lua_getfield(L, at, "type");
        lua_setfield(L, at + 1, "type");
        for (int j = 1; lua_rawgeti(L, at, j) == LUA_TLIGHTUSERDATA; j++) {
          CUgraph body = lua_touserdata(L, -1);
          lua_pop(L, 1);
          pushnodes(L, owner, body, pidx, 1);
          lua_rawseti(L, at + 2, j);
        }
        lua_pop(L, 1);
      }
      lua_setfield(L, at + 1, "bodies");
      lua_replace(L, at);
    }
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_remove(L, -2);
  return n;
}

/* g:nodes([deep]) -> count, {kind, ...}; deep: with the bodies of
   conditional nodes and the nodes of child graphs. g:nodes("detail") ->
   count, {record, ...}. */
static int graph_nodes(lua_State *L) {
  cg_graph *gr = cg_checkobj(L, 1, CG_GRAPH);
  if (lua_type(L, 2) == LUA_TSTRING && !strcmp(cg_checkname(L, 2, NULL), "detail"))
    return nodes_detail(L, gr);
  int deep = lua_toboolean(L, 2);
  lua_settop(L, 1);
  lua_getiuservalue(L, 1, 1); /* 2: the pins */
  size_t n = pushnodes(L, &gr->h, gr->g, 2, deep);
  lua_pushinteger(L, (lua_Integer)n);
  lua_insert(L, -2);
  return 2;
}

/* g:node(i | label) -> Node: record i (1-based, in the order the capture
   made them), or the first made under s:label(label, fn) */
static int graph_node(lua_State *L) {
  cg_graph *gr = cg_checkobj(L, 1, CG_GRAPH);
  cg_recs *r = gr->recs;
  size_t n = r ? r->n : 0, i = 0;
  if (lua_type(L, 2) == LUA_TSTRING) {
    const char *name = cg_checkname(L, 2, NULL);
    while (i < n && (!r->v[i].label || strcmp(cg_recs_text(r, r->v[i].label), name)))
      i++;
    if (i == n)
      return luaL_error(L, "cugraph.Graph #%d has no node labelled '%s'",
                        (int)gr->id, name);
  } else {
    lua_Integer v = luaL_checkinteger(L, 2);
    if (v < 1 || (size_t)v > n)
      return luaL_argerror(L, 2, lua_pushfstring(L, "node %I out of range: "
                           "the graph recorded %I", (LUAI_UACINT)v,
                           (LUAI_UACINT)n));
    i = (size_t)v - 1;
  }
  cg_node *node = cg_newobj(L, gr->h.ctx, sizeof *node, CG_NODE);
  node->index = i;
  node->h.parent = &gr->h;
  node->h.open = 1;
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  return 1;
}

/* Pushes a table from pointers to the pinned objects (set at pidx). */
static void pushobjects(lua_State *L, int pidx) {
  lua_newtable(L);
  lua_pushnil(L);
  while (lua_next(L, pidx)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) == LUA_TUSERDATA) {
      lua_pushvalue(L, -1);
      lua_rawsetp(L, -3, lua_touserdata(L, -1));
    }
  }
}

static void pushobj(lua_State *L, int map, const cg_obj *o) {
  if (lua_rawgetp(L, map, o) == LUA_TNIL) {
    lua_pop(L, 1);
    lua_pushboolean(L, 0);
  }
}

/* An argument's value from its bytes, as the signature types it. */
static void pusharg(lua_State *L, const cg_param *p, const uint64_t *w) {
  if (p->type <= CG_U64) {
    cg_pushbits(L, (cg_type)p->type, w);
  } else if (p->type == CG_P_BYTES) {
    lua_pushlstring(L, (const char *)w, p->size);
  } else {
    lua_Integer v = 0;
    memcpy(&v, w, p->size < 8 ? p->size : 8);
    lua_pushinteger(L, v);
  }
}

void cg_push_record(lua_State *L, const cg_recs *r, size_t i) {
  const cg_rec *e = &r->v[i];
  lua_createtable(L, 0, 12);
  lua_pushinteger(L, (lua_Integer)i + 1);
  lua_setfield(L, -2, "index");
  lua_pushstring(L, cg_nk_names[e->kind]);
  lua_setfield(L, -2, "kind");
  if (e->kind == NK_KERNEL) {
    lua_pushstring(L, ((const cg_kernel *)e->kernel)->name);
    lua_setfield(L, -2, "name");
  }
  if (e->src) {
    lua_pushstring(L, cg_recs_text(r, e->src));
    lua_setfield(L, -2, "source");
    lua_pushinteger(L, e->line);
    lua_setfield(L, -2, "line");
  }
  if (e->label) {
    lua_pushstring(L, cg_recs_text(r, e->label));
    lua_setfield(L, -2, "label");
  }
  lua_pushinteger(L, e->depth);
  lua_setfield(L, -2, "depth");
  lua_pushboolean(L, e->enabled);
  lua_setfield(L, -2, "enabled");
  if (e->programmatic) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "programmatic");
  }
}

/* Pushes record i of gr as a table; map: pointers to objects. */
static void pushrec(lua_State *L, cg_graph *gr, size_t i, int map) {
  cg_recs *r = gr->recs;
  const cg_rec *e = &r->v[i];
  cg_push_record(L, r, i);
  if (e->kind == NK_KERNEL) {
    const cg_kernel *k = (const cg_kernel *)e->kernel;
    pushobj(L, map, e->kernel);
    lua_setfield(L, -2, "kernel");
    lua_createtable(L, e->nargs, 0);
    const uint64_t *w = r->words + e->word0;
    for (int j = 0; j < e->nargs; j++) {
      const cg_obj *o = r->objs[e->arg0 + (size_t)j];
      if (o) pushobj(L, map, o);
      else pusharg(L, &k->params[j], w);
      lua_rawseti(L, -2, j + 1);
      w += words(&k->params[j]);
    }
    lua_setfield(L, -2, "args");
  } else if (e->kind == NK_EXTWAIT || e->kind == NK_EXTSIGNAL) {
    pushobj(L, map, e->obj[0]);
    lua_setfield(L, -2, "semaphore");
    if (e->obj[1]) pushobj(L, map, e->obj[1]);
    else if (((cg_extsem *)e->obj[0])->timeline)
      lua_pushinteger(L, (lua_Integer)e->off);
    else lua_pushnil(L);
    lua_setfield(L, -2, "value");
  } else if (e->kind == NK_MEMWAIT || e->kind == NK_MEMWRITE) {
    static const char *const cmps[] = { "geq", "eq", "and", "nor" };
    pushobj(L, map, e->obj[0]);
    lua_setfield(L, -2, "counter");
    if (e->obj[1]) pushobj(L, map, e->obj[1]);
    else lua_pushinteger(L, (lua_Integer)e->off);
    lua_setfield(L, -2, "value");
    if (e->kind == NK_MEMWAIT) {
      lua_pushstring(L, cmps[e->value & 3]);
      lua_setfield(L, -2, "op");
    }
  } else if (e->obj[0]) {
    pushobj(L, map, e->obj[0]);
    lua_setfield(L, -2, e->kind == NK_COPY || e->kind == NK_COPY3D ? "dst"
                                                                  : "buffer");
    if (e->obj[1]) {
      pushobj(L, map, e->obj[1]);
      lua_setfield(L, -2, "src");
    }
  }
}

static int nodes_detail(lua_State *L, cg_graph *gr) {
  lua_settop(L, 1);
  cg_hold(L); /* 2: the records are read between allocations */
  lua_getiuservalue(L, 1, 1);
  pushobjects(L, 3); /* 4 */
  lua_newtable(L);   /* 5 */
  size_t n = gr->recs ? gr->recs->n : 0;
  for (size_t i = 0; i < n; i++) {
    pushrec(L, gr, i, 4);
    lua_rawseti(L, 5, (lua_Integer)i + 1);
  }
  lua_pushinteger(L, (lua_Integer)n);
  lua_insert(L, 5);
  return 2;
}

/* node:info() -> the table g:nodes("detail") gives for it */
static int node_info(lua_State *L) {
  cg_graph *gr;
  lua_settop(L, 1);
  cg_hold(L);      /* 2 */
  noderec(L, &gr); /* 3: the graph */
  lua_getiuservalue(L, 3, 1);
  pushobjects(L, 4); /* 5 */
  pushrec(L, gr, ((cg_node *)lua_touserdata(L, 1))->index, 5);
  return 1;
}

/* node:set(args...): the kernel node's arguments, checked as k:launch
   checks them, in the instantiated graph */
static int node_set(lua_State *L) {
  int argc = lua_gettop(L) - 1;
  cg_graph *gr;
  cg_hold(L); /* the node's record is read across allocations */
  cg_rec *e = noderec(L, &gr);
  size_t index = ((cg_node *)lua_touserdata(L, 1))->index;
  int gidx = lua_gettop(L);
  cg_check_changeable(L, gr, e, index);
  if (e->kind != NK_KERNEL)
    return luaL_error(L, "node:set(): node %d is a %s node; rebind its "
                      "buffers with g:rebind", (int)index + 1,
                      cg_nk_names[e->kind]);
  lua_getiuservalue(L, gidx, 1);
  int pidx = lua_gettop(L);
  pushobjects(L, pidx);
  int map = lua_gettop(L);
  pushobj(L, map, e->kernel); /* the kernel, pinned by the graph */
  int kidx = lua_gettop(L);
  cg_kernel_args(L, kidx, 2, argc);
  cg_recs *r = gr->recs;
  const cg_kernel *k = (const cg_kernel *)e->kernel;
  uint64_t argw[CG_MAX_PARAMS * 4];
  size_t nw = 0;
  for (int j = 0; j < k->nparams; j++) nw += words(&k->params[j]);
  if (nw > sizeof argw / 8)
    return luaL_error(L, "node:set(): %s takes too many argument bytes",
                      k->name);
  memset(argw, 0, nw * 8);
  uint64_t *w = argw;
  for (int j = 0; j < k->nparams; j++) {
    memcpy(w, k->argp[j], k->params[j].size);
    w += words(&k->params[j]);
  }
  const char *api;
  CUresult res = cg_rec_apply(gr->h.ctx, r, e, gr->h.drv.exec, NULL, NULL, 0,
                              argw, &api);
  if (res != CUDA_SUCCESS) cg_check(L, gr->h.ctx, api, res);
  cg_obj *was[CG_MAX_PARAMS];
  int scalars = 0;
  for (int j = 0; j < k->nparams; j++) {
    cg_obj *o = bufobj(L, gr->h.ctx, 2 + j);
    was[j] = r->objs[e->arg0 + (size_t)j];
    r->objs[e->arg0 + (size_t)j] = o;
    scalars |= (o && o->kind == CG_SCALAR) || (was[j] &&
                was[j]->kind == CG_SCALAR);
  }
  memcpy(r->words + e->word0, argw, nw * 8);
  e->dirty = 1;
  for (int j = 0; j < k->nparams; j++)
    if (r->objs[e->arg0 + (size_t)j]) cg_pin_in(L, pidx, 2 + j, gr->id);
  for (int j = 0; j < k->nparams; j++)
    if (was[j] && !cg_recs_use(r, was[j])) {
      pushobj(L, map, was[j]);
      if (lua_type(L, -1) == LUA_TUSERDATA) cg_unpin_in(L, pidx, -1, gr->id);
      lua_pop(L, 1);
    }
  if (scalars) cg_graph_rescan(L, gr, gidx);
  lua_settop(L, 1);
  return 1;
}

/* node:enable(on): whether launches of the graph run the node */
static int node_enable(lua_State *L) {
  luaL_checktype(L, 2, LUA_TBOOLEAN); /* before noderec pushes the graph */
  int on = lua_toboolean(L, 2);
  cg_graph *gr;
  cg_rec *e = noderec(L, &gr);
  cg_check_changeable(L, gr, e, ((cg_node *)lua_touserdata(L, 1))->index);
  if (!cg_drv.cuGraphNodeSetEnabled)
    return luaL_error(L, "node:enable() needs CUDA 11.6 or later (the driver "
                      "lacks cuGraphNodeSetEnabled)");
  CU(L, gr->h.ctx, cuGraphNodeSetEnabled, gr->h.drv.exec, e->node, (unsigned)on);
  e->enabled = (unsigned char)on;
  lua_settop(L, 1);
  return 1;
}

static int node_enabled(lua_State *L) {
  cg_graph *gr;
  lua_pushboolean(L, noderec(L, &gr)->enabled);
  return 1;
}

/* node:handle(): the CUgraphNode of the graph the exec was made from, as an
   integer, for foreign code; valid while the graph lives */
static int node_handle(lua_State *L) {
  cg_graph *gr;
  lua_pushinteger(L, (lua_Integer)(intptr_t)noderec(L, &gr)->node);
  return 1;
}

static int node_index(lua_State *L) {
  cg_node *n = cg_checkobj(L, 1, CG_NODE);
  lua_pushinteger(L, (lua_Integer)n->index + 1);
  return 1;
}

static int node_free(lua_State *L) { return cg_close(L, CG_NODE, 0); }
static int node_gc(lua_State *L) { return cg_close(L, CG_NODE, 1); }

static int node_tostring(lua_State *L) {
  cg_node *n = cg_toobj(L, 1, CG_NODE);
  if (!n->h.open) return cg_tostring(L, &n->h, "");
  cg_hold(L); /* the record is read across the strings' allocations */
  lua_getiuservalue(L, 1, 1);
  cg_graph *gr = cg_toobj(L, -1, CG_GRAPH);
  if (!gr->h.open || !gr->recs || n->index >= gr->recs->n)
    return cg_tostring(L, &n->h, " %d", (int)n->index + 1);
  cg_recs *r = gr->recs;
  const cg_rec *e = &r->v[n->index];
  const char *what = cg_nk_names[e->kind];
  if (e->kind == NK_KERNEL) {
    const cg_kernel *k = (const cg_kernel *)e->kernel;
    what = lua_pushfstring(L, "kernel %s", k->name);
  }
  cg_tostring(L, &n->h, " %d of cugraph.Graph #%d (%s%s%s:%d)",
              (int)n->index + 1, (int)gr->id, what, e->src ? " at " : "",
              e->src ? cg_recs_text(r, e->src) : "", e->line);
  return 1;
}

/* s:label(name, fn) -> fn(s)'s results: the nodes fn makes are labelled
   name (g:node(name) finds the first) */
static int stream_label(lua_State *L) {
  cg_stream *s = cg_checkobj(L, 1, CG_STREAM);
  const char *name = cg_checkname(L, 2, NULL);
  luaL_checktype(L, 3, LUA_TFUNCTION);
  cg_ctx *ctx = s->h.ctx;
  if (!ctx->capture)
    return luaL_error(L, "s:label() outside a capture: labels name the "
                      "nodes that a capture makes");
  size_t saved = cg_label_begin(L, ctx, name);
  lua_settop(L, 3);
  lua_pushcfunction(L, cg_traceback);
  lua_pushvalue(L, 3);
  lua_pushvalue(L, 1);
  cg_trace_push(ctx, name); /* an NVTX range when a tool is attached */
  int status = lua_pcall(L, 1, LUA_MULTRET, 4);
  cg_trace_pop(ctx);
  cg_label_end(ctx, saved);
  if (status != LUA_OK) return lua_error(L);
  return lua_gettop(L) - 4;
}

void node_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"set", node_set}, {"enable", node_enable}, {"enabled", node_enabled},
    {"info", node_info}, {"index", node_index}, {"handle", node_handle},
    {"free", node_free}, {"close", node_free}, {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", node_gc}, {"__close", node_free},
    {"__tostring", node_tostring}, {NULL, NULL}
  };
  static const luaL_Reg gmethods[] = {
    {"node", graph_node}, {"nodes", graph_nodes}, {NULL, NULL}
  };
  cg_newtype(L, CG_NODE, methods, meta, NULL);
  luaL_getmetatable(L, cg_kind_names[CG_GRAPH]);
  lua_getfield(L, -1, "methods");
  luaL_setfuncs(L, gmethods, 0);
  lua_pop(L, 2);
  luaL_getmetatable(L, cg_kind_names[CG_STREAM]);
  lua_getfield(L, -1, "methods");
  lua_pushcfunction(L, stream_label);
  lua_setfield(L, -2, "label");
  lua_pop(L, 2);
}
