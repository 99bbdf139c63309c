/* What graphs cost in memory: g:memory() and the graphs of cuda.memory().
   A graph owns the memory its allocation nodes allocate (from its
   records) and what an instantiation takes on the device, which the
   driver does not report per graph: g:memory(true) measures it by
   instantiating and uploading a copy between two cuMemGetInfo calls. It
   keeps alive what its nodes refer to (its records). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "graph/graph.h"

typedef struct tally {
  size_t allocs, device, host;   /* bytes */
  unsigned buffers, host_buffers, scalars, conditions, arrays, others;
} tally;

static size_t buffer_bytes(const cg_buffer *b) {
  if (b->pitch) return b->pitch * b->height * (b->depth ? b->depth : 1);
  return b->n * cg_type_size[b->type];
}

/* What one object a node refers to adds to t (alloc: the graph's own,
   made by its allocation node). */
static void add(const cg_obj *o, int alloc, tally *t) {
  switch (o->kind) {
  case CG_BUFFER:
    if (alloc) {
      t->allocs += buffer_bytes((const cg_buffer *)o);
      break;
    }
    t->buffers++;
    t->device += buffer_bytes((const cg_buffer *)o);
    break;
  case CG_HOSTBUF:
    t->host_buffers++;
    t->host += ((const cg_hostbuf *)o)->n *
               cg_type_size[((const cg_hostbuf *)o)->type];
    break;
  case CG_SCALAR: t->scalars++; t->device += 8; break;
  case CG_CONDITION: t->conditions++; t->device += 4; break;
  case CG_ARRAY:
    t->arrays++;
    t->device += cg_array_bytes((const cg_array *)o);
    break;
  default: t->others++;
  }
}

typedef struct seen { const cg_obj *o; int alloc; } seen;

/* By object, its allocation first. */
static int by_object(const void *a, const void *b) {
  const seen *x = a, *y = b;
  uintptr_t p = (uintptr_t)x->o, q = (uintptr_t)y->o;
  if (p != q) return p < q ? -1 : 1;
  return y->alloc - x->alloc;
}

static void note(seen *v, size_t *n, const cg_obj *o, int alloc) {
  while (o && o->parent) o = o->parent; /* a view: its buffer's memory */
  if (o) v[(*n)++] = (seen){ o, alloc };
}

/* The objects the graph's nodes refer to (its records, any depth), each
   once. Calls no Lua function, so no finalizer can run and free the
   records meanwhile. 0 when out of host memory. */
static int count(const cg_graph *gr, tally *t) {
  memset(t, 0, sizeof *t);
  const cg_recs *r = gr->recs;
  if (!r) return 1;
  seen *v = malloc((2 * r->n + r->nobjs + 1) * sizeof *v);
  if (!v) return 0;
  size_t n = 0;
  for (size_t i = 0; i < r->n; i++) {
    int alloc = r->v[i].kind == NK_ALLOC;
    for (int k = 0; k < 2; k++) note(v, &n, r->v[i].obj[k], alloc && !k);
  }
  for (size_t i = 0; i < r->nobjs; i++) note(v, &n, r->objs[i], 0);
  qsort(v, n, sizeof *v, by_object);
  for (size_t i = 0; i < n; i++)
    if (!i || v[i].o != v[i - 1].o) add(v[i].o, v[i].alloc, t);
  free(v);
  return 1;
}

static void setint(lua_State *L, const char *k, size_t v) {
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, k);
}

static void push_tally(lua_State *L, const tally *t) {
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
  tally t;
  if (!count(gr, &t)) luaL_error(L, "g:memory(): out of host memory");
  push_tally(L, &t);
  if (want) setint(L, "instance", inst);
  return 1;
}

typedef struct tallied { unsigned id; tally t; } tallied;

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
    if (!count(gr, &all[k].t))
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

int cg_graph_over_cap(lua_State *L, cg_graph *gr) {
  cg_graphstate *gs = cg_graphstate_of(L, gr->h.ctx);
  if (!gs->cap) return 0;
  enum { TOP = 3 };
  unsigned top[TOP] = { 0 }; /* ids: the list may change once Lua runs */
  size_t most[TOP] = { 0 }, sum = 0, mine;
  tally t;
  if (!count(gr, &t)) /* its allocation nodes, those it frees itself too */
    luaL_error(L, "cuda.graph_memory_cap: out of host memory");
  if (!(mine = t.allocs)) return 0;
  for (cg_graph *o = gs->graphs; o; o = o->next) {
    if (o == gr) continue;
    if (!count(o, &t))
      luaL_error(L, "cuda.graph_memory_cap: out of host memory");
    sum += t.allocs;
    for (int i = 0; i < TOP; i++) /* the largest others, in order */
      if (t.allocs > most[i]) {
        memmove(top + i + 1, top + i, (TOP - 1 - i) * sizeof *top);
        memmove(most + i + 1, most + i, (TOP - 1 - i) * sizeof *most);
        top[i] = o->id, most[i] = t.allocs;
        break;
      }
  }
  sum += mine;
  if (sum <= gs->cap) return 0;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_where(L, 1); /* the line that captured it */
  luaL_addvalue(&b);
  lua_pushfstring(L, "cuda.graph_memory_cap: cugraph.Graph #%d allocates %I "
                  "bytes, and with the %I bytes the open graphs allocate "
                  "that passes the cap of %I", (int)gr->id, (lua_Integer)mine,
                  (lua_Integer)(sum - mine), (lua_Integer)gs->cap);
  luaL_addvalue(&b);
  for (int i = 0; i < TOP && top[i]; i++) {
    lua_pushfstring(L, "%s #%d (%I bytes)", i ? "," : "; the most:",
                    (int)top[i], (lua_Integer)most[i]);
    luaL_addvalue(&b);
  }
  luaL_addstring(&b, "; free graphs (g:free()) or raise the cap");
  luaL_pushresult(&b);
  return 1;
}

/* cuda.graph_memory_cap([bytes | false]) -> the cap before (nil: none):
   the bytes the open graphs' allocation nodes may allocate together,
   checked when a capture instantiates a graph that allocates. */
static int graph_memory_cap(lua_State *L) {
  cg_graphstate *gs = cg_graphstate_of(L, cg_sentinel(L));
  size_t was = gs->cap;
  if (lua_gettop(L) > 0) {
    if (lua_isboolean(L, 1) && !lua_toboolean(L, 1)) {
      gs->cap = 0;
    } else {
      lua_Integer n = luaL_checkinteger(L, 1);
      luaL_argcheck(L, n > 0, 1, "the cap must be a positive number of "
                    "bytes, or false for none");
      gs->cap = (size_t)n;
    }
  }
  if (was) lua_pushinteger(L, (lua_Integer)was);
  else lua_pushnil(L);
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
  lua_pushcfunction(L, graph_memory_cap);
  lua_setfield(L, -2, "graph_memory_cap");
}
