/* g:dot(path [, verbose]): the graph in Graphviz's language, its nodes
   labelled from the capture's records (kernel names, labels, Lua lines)
   and the bodies of conditional nodes as clusters; verbose: the driver's
   own output. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "graph/graph.h"

/* Text gathered as strings in a table (at t), joined at the end: the stack
   stays free for the driver's node arrays. */
typedef struct dotbuf { lua_State *L; int t; lua_Integer n; } dotbuf;

static void add(dotbuf *d, const char *s) {
  lua_pushstring(d->L, s);
  lua_rawseti(d->L, d->t, ++d->n);
}

static void addf(dotbuf *d, const char *fmt, size_t a, size_t b) {
  char line[80];
  snprintf(line, sizeof line, fmt, a, b);
  add(d, line);
}

/* A label's text: quotes and backslashes become apostrophes. */
static void addlabel(dotbuf *d, const char *s) {
  luaL_gsub(d->L, s, "\"", "'");
  luaL_gsub(d->L, lua_tostring(d->L, -1), "\\", "'");
  lua_rawseti(d->L, d->t, ++d->n);
  lua_pop(d->L, 1);
}

const char *cg_node_type_name(CUgraphNodeType t) {
  static const char *const types[] = {
    "kernel", "memcpy", "memset", "host", "graph", "empty", "wait_event",
    "event_record", "ext_semas_signal", "ext_semas_wait", "mem_alloc",
    "mem_free", "batch_mem_op", "conditional"
  };
  return (size_t)t < sizeof types / sizeof *types ? types[t] : "node";
}

/* Adds the nodes and edges of g, numbered from *id on, labelled from the
   records; the bodies of conditional nodes as clusters, from what the
   capture noted in the pins (at pidx). */
static void dotgraph(dotbuf *d, cg_graph *gr, CUgraph g, int pidx,
                     size_t *id) {
  lua_State *L = d->L;
  cg_ctx *ctx = gr->h.ctx;
  size_t n = 0, ne = 0;
  CU(L, ctx, cuGraphGetNodes, g, NULL, &n);
  CU(L, ctx, cuGraphGetEdges, g, NULL, NULL, NULL, &ne);
  CUgraphNode *v = lua_newuserdatauv(L, (n + 2 * ne + 1) * sizeof *v, 0);
  cg_check_open(L, &gr->h);
  CU(L, ctx, cuGraphGetNodes, g, v, &n);
  if (ne) /* the driver refuses arrays for no edges */
    CU(L, ctx, cuGraphGetEdges, g, v + n, v + n + ne, NULL, &ne);
  size_t base = *id;
  *id += n;
  const cg_recs *r = gr->recs;
  for (size_t i = 0; i < n; i++) {
    const cg_rec *e = NULL;
    for (size_t j = 0; j < r->n && !e; j++)
      if (r->v[j].node == v[i]) e = &r->v[j];
    CUgraphNodeType t;
    CU(L, ctx, cuGraphNodeGetType, v[i], &t);
    lua_pushfstring(L, "  n%I [label=\"%s", (LUAI_UACINT)(base + i),
                    cg_node_type_name(t));
    lua_rawseti(L, d->t, ++d->n);
    if (e && e->kind == NK_KERNEL) {
      const cg_kernel *k = (const cg_kernel *)e->kernel;
      add(d, " ");
      addlabel(d, k->name);
    }
    if (e && e->label) {
      add(d, " [");
      addlabel(d, cg_recs_text(r, e->label));
      add(d, "]");
    }
    if (e && e->src) {
      add(d, "\\n");
      addlabel(d, cg_recs_text(r, e->src));
      addf(d, ":%zu", (size_t)e->line, 0);
    }
    add(d, "\"];\n");
    if (t != CU_GRAPH_NODE_TYPE_CONDITIONAL) continue;
    if (lua_rawgetp(L, pidx, v[i]) == LUA_TTABLE) {
      for (int j = 1; lua_rawgeti(L, -1, j) == LUA_TLIGHTUSERDATA; j++) {
        CUgraph body = lua_touserdata(L, -1);
        lua_pop(L, 1);
        size_t first = *id;
        addf(d, "  subgraph cluster_%zu_%zu {\n", base + i, (size_t)j);
        addf(d, "  label=\"body %zu\";\n", (size_t)j, 0);
        dotgraph(d, gr, body, pidx, id);
        add(d, "  }\n");
        if (*id > first)
          addf(d, "  n%zu -> n%zu [style=dashed];\n", base + i, first);
      }
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  for (size_t i = 0; i < ne; i++) {
    size_t from = n, to = n;
    for (size_t j = 0; j < n; j++) {
      if (v[j] == v[n + i]) from = j;
      if (v[j] == v[n + ne + i]) to = j;
    }
    if (from < n && to < n) addf(d, "  n%zu -> n%zu;\n", base + from,
                                 base + to);
  }
  lua_pop(L, 1); /* the node arrays */
}

static int dot(lua_State *L, cg_graph *gr) {
  if (!gr->recs || !cg_drv.cuGraphGetEdges) return 0;
  const char *path = luaL_checkstring(L, 2);
  lua_settop(L, 2);
  lua_getiuservalue(L, 1, 1); /* 3: the pins */
  lua_newtable(L);            /* 4: the text */
  dotbuf d = { L, 4, 0 };
  size_t id = 0;
  add(&d, "digraph cugraph {\n  node [shape=box];\n");
  cg_check_open(L, &gr->h);
  cg_recs *r = gr->recs; /* held by dotgraph across allocations */
  if (r) r->busy++;
  dotgraph(&d, gr, gr->g, 3, &id);
  if (r) r->busy--;
  add(&d, "}\n");
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (lua_Integer i = 1; i <= d.n; i++) {
    lua_rawgeti(L, 4, i);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  size_t len;
  const char *s = lua_tolstring(L, -1, &len);
  FILE *f = fopen(path, "w");
  if (!f)
    return luaL_error(L, "g:dot: cannot open %s: %s", path, strerror(errno));
  int bad = fwrite(s, 1, len, f) != len;
  bad |= fclose(f) != 0;
  if (bad) return luaL_error(L, "g:dot: cannot write %s", path);
  lua_settop(L, 1);
  return 1;
}

/* g:dot(path [, verbose]): Graphviz description of the graph */
static int graph_dot(lua_State *L) {
  cg_graph *gr = cg_checkobj(L, 1, CG_GRAPH);
  const char *path = luaL_checkstring(L, 2);
  unsigned flags = lua_toboolean(L, 3) ? CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE : 0;
  if (!flags && dot(L, gr)) return 1;
  CU(L, gr->h.ctx, cuGraphDebugDotPrint, gr->g, path, flags);
  lua_settop(L, 1);
  return 1;
}


void dot_open(lua_State *L) {
  luaL_getmetatable(L, cg_kind_names[CG_GRAPH]);
  lua_getfield(L, -1, "methods");
  lua_pushcfunction(L, graph_dot);
  lua_setfield(L, -2, "dot");
  lua_pop(L, 2);
}
