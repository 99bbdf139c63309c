/* The state's open graphs, which the graph core owns: the list every
   graph joins when it opens (graph.c) and leaves when it closes, which
   kernel reload, memory reports and timed-out waits walk; what their
   nodes keep, and the cap on the memory their allocation nodes take
   (cuda.graph_memory_cap), checked by every capture and update. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "graph/graph.h"

static const char graphstate_key = 'g';

cg_graphstate *cg_graphstate_of(lua_State *L, cg_ctx *ctx) {
  cg_ctx *root = ctx->root;
  if (root->graphstate) return root->graphstate;
  /* plain userdata in the registry: freed after every finalizer */
  cg_graphstate *gs = lua_newuserdatauv(L, sizeof *gs, 0);
  memset(gs, 0, sizeof *gs);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &graphstate_key);
  root->graphstate = gs;
  return gs;
}

void cg_track_graph(cg_graph *gr) {
  cg_graphstate *gs = gr->h.ctx->root->graphstate;
  gr->prev = NULL;
  gr->next = gs->graphs;
  if (gr->next) gr->next->prev = gr;
  gs->graphs = gr;
}

void cg_untrack_graph(cg_graph *gr) {
  if (gr->prev) gr->prev->next = gr->next;
  else gr->h.ctx->root->graphstate->graphs = gr->next;
  if (gr->next) gr->next->prev = gr->prev;
}

static size_t buffer_bytes(const cg_buffer *b) {
  if (b->pitch) return b->pitch * b->height * (b->depth ? b->depth : 1);
  return b->n * cg_type_size[b->type];
}

/* What one object a node refers to adds to t (alloc: the graph's own,
   made by its allocation node). */
static void add(const cg_obj *o, int alloc, cg_tally *t) {
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

int cg_graph_tally(const cg_graph *gr, cg_tally *t) {
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

int cg_graph_over_cap(lua_State *L, cg_graph *gr) {
  cg_graphstate *gs = cg_graphstate_of(L, gr->h.ctx);
  if (!gs->cap) return 0;
  enum { TOP = 3 };
  unsigned top[TOP] = { 0 }; /* ids: the list may change once Lua runs */
  size_t most[TOP] = { 0 }, sum = 0, mine;
  cg_tally t;
  if (!cg_graph_tally(gr, &t)) /* its allocation nodes, those it frees itself too */
    luaL_error(L, "cuda.graph_memory_cap: out of host memory");
  if (!(mine = t.allocs)) return 0;
  for (cg_graph *o = gs->graphs; o; o = o->next) {
    if (o == gr) continue;
    if (!cg_graph_tally(o, &t))
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

void registry_open(lua_State *L) {
  lua_pushcfunction(L, graph_memory_cap);
  lua_setfield(L, -2, "graph_memory_cap");
}
