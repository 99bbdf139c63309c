/* Kernel hot reload: m:reload(image) loads the new code (module.c's
   plan), then the live graphs that launch the module's kernels switch to
   it: the kernel nodes of each graph take the new function with the same
   parameters, and the executable graph is updated in place
   (cuGraphExecUpdate), so replays go on without a new capture. Graphs of
   Lua are found in the state's list of open graphs, by their node records;
   C graphs through the module's share (cgraph.c). And cuda.watch(path,
   fn): a poll for a changed file, for a frame loop. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "embed/embed.h"

/* Sets node's function to s->to with copies of its arguments: what
   cuGraphKernelNodeGetParams points to belongs to the node. */
static CUresult setnode(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS *p,
                        const cg_swap *s) {
  size_t total = 0;
  for (int i = 0; i < s->nparams; i++) total += (s->size[i] + 7) & ~7u;
  void **argv = malloc((size_t)s->nparams * sizeof *argv + total + 1);
  if (!argv) return CUDA_ERROR_OUT_OF_MEMORY;
  if (p->kernelParams) {
    unsigned char *slot = (unsigned char *)(argv + s->nparams);
    for (int i = 0; i < s->nparams; i++) {
      memcpy(slot, p->kernelParams[i], s->size[i]);
      argv[i] = slot;
      slot += (s->size[i] + 7) & ~7u;
    }
    p->kernelParams = argv;
  }
  p->func = s->to;
  p->kern = NULL;
  p->ctx = NULL;
  CUresult r = cg_drv.cuGraphKernelNodeSetParams(node, p);
  free(argv);
  return r;
}

/* The swap of a kernel node that launches one of sw's functions, or NULL. */
static const cg_swap *swap_of(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS *p,
                              const cg_swap *sw, int n, CUresult *r,
                              const char **api) {
  memset(p, 0, sizeof *p);
  *api = "cuGraphKernelNodeGetParams";
  *r = cg_drv.cuGraphKernelNodeGetParams(node, p);
  for (int j = 0; j < n && *r == CUDA_SUCCESS; j++)
    if (p->func == sw[j].from) return &sw[j];
  return NULL;
}

/* The kernel nodes of g and of the graphs its child graph nodes own
   switch; *changed is set when one did. */
static CUresult swap_graph(CUgraph g, const cg_swap *sw, int n, int *changed,
                           const char **api) {
  size_t count = 0;
  *api = "cuGraphGetNodes";
  CUresult r = cg_drv.cuGraphGetNodes(g, NULL, &count);
  if (r != CUDA_SUCCESS || !count) return r;
  CUgraphNode *nodes = malloc(count * sizeof *nodes);
  if (!nodes) return CUDA_ERROR_OUT_OF_MEMORY;
  r = cg_drv.cuGraphGetNodes(g, nodes, &count);
  for (size_t i = 0; i < count && r == CUDA_SUCCESS; i++) {
    CUgraphNodeType t;
    CUDA_KERNEL_NODE_PARAMS p;
    CUgraph child;
    *api = "cuGraphNodeGetType";
    r = cg_drv.cuGraphNodeGetType(nodes[i], &t);
    if (r != CUDA_SUCCESS) break;
    if (t == CU_GRAPH_NODE_TYPE_GRAPH) {
      *api = "cuGraphChildGraphNodeGetGraph";
      r = cg_drv.cuGraphChildGraphNodeGetGraph
        ? cg_drv.cuGraphChildGraphNodeGetGraph(nodes[i], &child)
        : CUDA_ERROR_NOT_SUPPORTED;
      if (r == CUDA_SUCCESS) r = swap_graph(child, sw, n, changed, api);
      continue;
    }
    if (t != CU_GRAPH_NODE_TYPE_KERNEL) continue;
    const cg_swap *s = swap_of(nodes[i], &p, sw, n, &r, api);
    if (s) {
      *api = "cuGraphKernelNodeSetParams";
      r = setnode(nodes[i], &p, s);
      *changed = 1;
    }
  }
  free(nodes);
  return r;
}

CUresult cg_swap_kernels(CUgraph g, CUgraphExec x, const cg_recs *recs,
                         const cg_swap *sw, int n, const char **api) {
  int changed = 0;
  CUresult r = swap_graph(g, sw, n, &changed, api);
  /* the bodies of conditional nodes, which the driver gives no way to
     reach from the graph: through the capture's records of their nodes */
  for (size_t i = 0; recs && i < recs->n && r == CUDA_SUCCESS; i++) {
    const cg_rec *e = &recs->v[i];
    CUDA_KERNEL_NODE_PARAMS p;
    if (e->kind != NK_KERNEL || !e->depth || !e->node) continue;
    const cg_swap *s = swap_of(e->node, &p, sw, n, &r, api);
    if (s) {
      *api = "cuGraphKernelNodeSetParams";
      r = setnode(e->node, &p, s);
      changed = 1;
    }
  }
  if (r == CUDA_SUCCESS && changed && x) {
    CUgraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    *api = "cuGraphExecUpdate";
    r = cg_drv.cuGraphExecUpdate(x, g, &info);
  }
  return r;
}

/* Raises the error of api as an error object whose message says that the
   old code stays. */
static int failed(lua_State *L, const char *api, CUresult r) {
  char buf[CG_ERRNAME];
  cg_pusherror(L, api, (int)r, cg_driver_errname(r, buf),
               "module:reload: a live graph cannot switch to the new code; "
               "the old code stays");
  return lua_error(L);
}

/* Every live graph of this state that launches the module at midx, and
   every C graph of its share, switch as sw says; on a failure the switched
   ones switch back and the error is raised. */
static void reload_graphs(lua_State *L, cg_ctx *ctx, int midx,
                          const cg_swap *sw, int n, CUmodule newmod,
                          CUmodule oldmod) {
  cg_obj *mod = lua_touserdata(L, midx);
  int top = lua_gettop(L);
  /* the one Lua allocation, before the graphs are looked at (a finalizer
     it runs may free or capture one); the undo cannot fail */
  cg_swap *rev = lua_newuserdatauv(L, (size_t)n * sizeof *rev + 1, 0);
  for (int i = 0; i < n; i++) {
    rev[i] = sw[i];
    rev[i].from = sw[i].to;
    rev[i].to = sw[i].from;
  }
  /* from here no Lua runs until an error is raised: the list stands still.
     The graphs that launch the module's kernels first take in their nodes
     what was changed in their execs, then switch. */
  const char *api = NULL, *ignored;
  CUresult r = CUDA_SUCCESS;
  cg_graph *gr, *undo = NULL; /* the graphs before undo switched */
  if (mod->share && cg_share_conds(mod->share))
    luaL_error(L, "module:reload: a C graph (cugraph_tograph) launches this "
               "module's code inside conditional nodes, whose bodies the "
               "driver gives no way to reach in a copy: release it before "
               "the reload; the old code stays");
  for (gr = ctx->root->graphstate->graphs; gr && r == CUDA_SUCCESS; gr = gr->next)
    if (cg_recs_launch(gr->recs, mod)) { /* nodes known by the old code */
      r = cg_recs_resolve(gr->recs, &api);
      if (r == CUDA_SUCCESS) r = cg_graph_follow(gr, &api);
    }
  cg_check(L, ctx, api, r); /* nothing switched yet */
  for (gr = ctx->root->graphstate->graphs; gr && r == CUDA_SUCCESS; gr = gr->next)
    if (cg_recs_launch(gr->recs, mod)) {
      r = cg_swap_kernels(gr->g, gr->h.drv.exec, gr->recs, sw, n, &api);
      undo = gr->next; /* a failed one may be half switched */
    }
  if (r == CUDA_SUCCESS && mod->share) {
    r = cg_share_swap(mod->share, newmod, sw, n, &api);
    if (r != CUDA_SUCCESS) cg_share_swap(mod->share, oldmod, rev, n, &ignored);
  }
  if (r != CUDA_SUCCESS) {
    for (gr = ctx->root->graphstate->graphs; gr != undo; gr = gr->next)
      if (cg_recs_launch(gr->recs, mod))
        cg_swap_kernels(gr->g, gr->h.drv.exec, gr->recs, rev, n, &ignored);
    cg_poison(ctx, api, r);
    failed(L, api, r);
  }
  lua_settop(L, top);
}

/* m:reload(image [, name]): the module's kernels, and every live graph of
   Lua or C that launches them, switch to the code of image (PTX, cubin or
   fatbin); every kernel made from the module must be in it with the same
   parameters. On any error the old code stays and the error is raised.
   Waits for the device's work before it unloads the old code. name, for
   messages, is one line; anything else (cuda.ptx's log, which follows the
   PTX in m:reload(cuda.ptx(src))) leaves the module's own. */
static int module_reload(lua_State *L) {
  cg_module *m = cg_checkobj(L, 1, CG_MODULE);
  cg_ctx *ctx = m->h.ctx;
  cg_check_outside(L, ctx, "module:reload()", "reload outside the capture");
  luaL_checkstring(L, 2);
  lua_settop(L, 3);
  const char *name = lua_type(L, 3) == LUA_TSTRING ? lua_tostring(L, 3) : "";
  /* a log (cuda.ptx's second result) is no name: NUL bytes too */
  if (lua_type(L, 3) != LUA_TSTRING || !*name || strchr(name, '\n') ||
      strlen(name) != lua_rawlen(L, 3))
    lua_pushstring(L, m->name);
  else
    lua_pushvalue(L, 3);
  lua_replace(L, 3);
  cg_swap *sw;
  int n = cg_reload_plan(L, 1, 2, 3, &sw); /* 4: new module, 5: the plan */
  cg_module *nm = lua_touserdata(L, 4);
  reload_graphs(L, ctx, 1, sw, n, nm->h.drv.module, m->h.drv.module);
  cg_reload_commit(L, 1, 4, 5);
  cg_sync(L, ctx); /* no launch of the old code is in flight */
  lua_settop(L, 4);
  lua_pushvalue(L, 1); /* the result: the module, with its new code */
  lua_pushvalue(L, 4);
  lua_replace(L, 1);
  cg_close(L, CG_MODULE, 0); /* unloads the old code, now nm's */
  return 1;
}

/* -- cuda.watch ------------------------------------------------------------ */

typedef struct filestamp {
  int exists;
  struct timespec mtime;
  off_t size;
  ino_t ino;
} filestamp;

static void stamp(const char *path, filestamp *f) {
  struct stat st;
  memset(f, 0, sizeof *f);
  if (stat(path, &st)) return;
  f->exists = 1;
  f->mtime = st.st_mtim;
  f->size = st.st_size;
  f->ino = st.st_ino;
}

/* poll() -> nil (unchanged) | true (fn ran) | false, error (fn raised) */
static int poll(lua_State *L) {
  const char *path = lua_tostring(L, lua_upvalueindex(1));
  filestamp *last = lua_touserdata(L, lua_upvalueindex(3)), now;
  stamp(path, &now);
  if (!now.exists || (last->exists && now.size == last->size &&
                      now.ino == last->ino &&
                      now.mtime.tv_sec == last->mtime.tv_sec &&
                      now.mtime.tv_nsec == last->mtime.tv_nsec))
    return 0;
  *last = now;
  lua_settop(L, 0);
  lua_pushvalue(L, lua_upvalueindex(2));
  lua_pushvalue(L, lua_upvalueindex(1));
  int ok = lua_pcall(L, 1, 0, 0) == LUA_OK;
  lua_pushboolean(L, ok);
  if (!ok) lua_insert(L, -2);
  return ok ? 1 : 2;
}

/* cuda.watch(path, fn) -> poll: fn(path) runs at the first poll() after
   the file changed (its time, size or inode), e.g. to reload a module.
   A poll of an unchanged file is one stat and allocates nothing. */
static int watch(lua_State *L) {
  cg_checkname(L, 1, NULL);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_settop(L, 2);
  filestamp *f = lua_newuserdatauv(L, sizeof *f, 0);
  stamp(lua_tostring(L, 1), f);
  lua_pushcclosure(L, poll, 3);
  return 1;
}

void reload_open(lua_State *L) {
  lua_pushcfunction(L, watch);
  lua_setfield(L, -2, "watch");
  luaL_getmetatable(L, cg_kind_names[CG_MODULE]);
  lua_getfield(L, -1, "methods");
  lua_pushcfunction(L, module_reload);
  lua_setfield(L, -2, "reload");
  lua_pop(L, 2);
}
