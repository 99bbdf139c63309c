/* What graphs cost in memory: g:memory() and the graphs of cuda.memory().
   A graph owns the memory its allocation nodes allocate (from its
   records) and what an instantiation takes on the device, which the
   driver does not report per graph: g:memory(true) measures it by
   instantiating and uploading a copy between two cuMemGetInfo calls. It
   keeps alive what its nodes refer to (its records). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "inspect/inspect.h"

static void setint(lua_State *L, const char *k, size_t v) {
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, k);
}

static void push_tally(lua_State *L, const cg_tally *t) {
  lua_createtable(L, 0, 4);
  setint(L, "allocations", t->allocs);
  lua_createtable(L, 0, 8);
  setint(L, "device", t->device);
  setint(L, "host", t->host);
  setint(L, "buffers", t->buffers);
  setint(L, "host_buffers", t->host_buffers);
  setint(L, "scalars", t->scalars);
  setint(L, "conditions", t->conditions);
  setint(L, "arrays", t->arrays);
  setint(L, "others", t->others);
  lua_setfield(L, -2, "keeps");
}

/* Device bytes an instantiation of gr's graph takes, uploaded: a copy is
   made and destroyed between two readings of the device's free memory
   (other work on the device at that moment counts too). */
static size_t measure(lua_State *L, cg_graph *gr) {
  cg_ctx *ctx = gr->h.ctx;
  size_t before = 0, after = 0, total = 0;
  CUgraphExec x = NULL;
  cg_sync(L, ctx);
  CU(L, ctx, cuMemGetInfo, &before, &total);
  CU(L, ctx, cuGraphInstantiate, &x, gr->g, 0);
  CUresult r = cg_drv.cuGraphUpload(x, gr->stream);
  if (r == CUDA_SUCCESS) r = cg_drv.cuStreamSynchronize(gr->stream);
  if (r == CUDA_SUCCESS) r = cg_drv.cuMemGetInfo(&after, &total);
  CUresult d = (CUresult)cg_destroy(CG_H_EXEC, (cg_handle){ .exec = x });
  cg_check(L, ctx, "cuGraphUpload", r);
  cg_check(L, ctx, "cuGraphExecDestroy", d);
  return before > after ? before - after : 0;
}

/* g:memory([measure]) -> {allocations =, keeps = {...}[, instance =]} */
static int graph_memory(lua_State *L) {
  cg_graph *gr = cg_checkobj(L, 1, CG_GRAPH);
  int want = lua_toboolean(L, 2);
  cg_check_open(L, &gr->h);
  cg_check_outside(L, gr->h.ctx, "g:memory()", "ask after the capture ends");
  int allocating = 0;
  for (size_t i = 0; gr->recs && i < gr->recs->n; i++)
    allocating |= gr->recs->v[i].kind == NK_ALLOC;
  if (want && (allocating || gr->conds))
    luaL_error(L, "g:memory(true): a graph with %s cannot be instantiated a "
               "second time to be measured; g:memory() gives the rest",
               gr->conds ? "conditional nodes" : "allocation nodes");
  size_t inst = want ? measure(L, gr) : 0;
  cg_tally t;
  if (!cg_graph_tally(gr, &t)) luaL_error(L, "g:memory(): out of host memory");
  push_tally(L, &t);
  if (want) setint(L, "instance", inst);
  return 1;
}

typedef struct tallied { unsigned id; cg_tally t; } tallied;

/* Largest first (allocations plus what it keeps), then the newest. */
static int by_size(const void *a, const void *b) {
  const tallied *x = a, *y = b;
  size_t p = x->t.allocs + x->t.device, q = y->t.allocs + y->t.device;
  if (p != q) return p > q ? -1 : 1;
  return (x->id < y->id) - (x->id > y->id);
}

/* cuda.memory() with graphs = {{id =, allocations =, keeps = bytes}, ...}
   from the largest; upvalue 1: the memory function below this layer. */
static int memory(lua_State *L) {
  lua_settop(L, 0);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_call(L, 0, 1);
  cg_ctx *ctx = cg_context(L);
  cg_graphstate *gs = cg_graphstate_of(L, ctx);
  /* every graph's tally first, with no Lua call between: an allocation
     could run the finalizer of a graph in the list, unreachable but not
     yet collected, and free its records or unlink it. The tallies are
     the collector's (no leak on error); their own allocation may have
     unlinked some graphs, so at most ng are walked. */
  size_t ng = 0;
  for (cg_graph *gr = gs->graphs; gr; gr = gr->next) ng++;
  tallied *all = lua_newuserdatauv(L, (ng + 1) * sizeof *all, 0);
  size_t k = 0;
  for (cg_graph *gr = gs->graphs; gr && k < ng; gr = gr->next, k++) {
    all[k].id = gr->id;
    if (!cg_graph_tally(gr, &all[k].t))
      luaL_error(L, "cuda.memory(): out of host memory");
  }
  qsort(all, k, sizeof *all, by_size);
  lua_createtable(L, (int)k, 0);
  for (size_t i = 0; i < k; i++) {
    lua_createtable(L, 0, 4);
    setint(L, "id", all[i].id);
    setint(L, "allocations", all[i].t.allocs);
    setint(L, "keeps", all[i].t.device);
    setint(L, "keeps_host", all[i].t.host);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, 1, "graphs");
  lua_settop(L, 1);
  return 1;
}

void memory_open(lua_State *L) {
  luaL_getmetatable(L, cg_kind_names[CG_GRAPH]);
  lua_getfield(L, -1, "methods");
  lua_pushcfunction(L, graph_memory);
  lua_setfield(L, -2, "memory");
  lua_pop(L, 2);
  lua_getfield(L, -1, "memory"); /* the module table's, from graphmem.c */
  lua_pushcclosure(L, memory, 1);
  lua_setfield(L, -2, "memory");
}
