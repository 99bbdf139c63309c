/* g:dot(path [, verbose | {verbose =, profile =}]): the graph in
   Graphviz's language, its nodes labelled from the capture's records
   (kernel names, labels, Lua lines) and the bodies of conditional nodes as
   clusters; verbose: the driver's own output; profile: a g:profile result
   whose times label and shade the nodes. A path ending in .png or .svg is
   rendered by Graphviz's dot. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "inspect/inspect.h"

/* Text gathered as strings in a table (at t), joined at the end: the stack
   stays free for the driver's node arrays. */
typedef struct dotbuf { lua_State *L; int t; lua_Integer n; } dotbuf;

static void add(dotbuf *d, const char *s) {
  lua_pushstring(d->L, s);
  lua_rawseti(d->L, d->t, ++d->n);
}

static void addf(dotbuf *d, const char *fmt, size_t a, size_t b) {
  char line[128];
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

/* A profile's times (µs, negative: none), top the largest: by the
   position of a node of the top graph in the driver's list (event nodes),
   and by record (stamps and activity, whose nodes are the records, in
   bodies too). */
typedef struct times { const double *at, *rec; double top; } times;

/* Adds the nodes and edges of g, numbered from *id on, labelled from the
   records; the bodies of conditional nodes as clusters, from what the
   capture noted in the pins (at pidx). tm: the profile's times, or NULL;
   top: g is the top graph. */
static void dotgraph(dotbuf *d, cg_graph *gr, CUgraph g, int pidx,
                     size_t *id, const times *tm, int top) {
  lua_State *L = d->L;
  cg_ctx *ctx = gr->h.ctx;
  size_t n = 0, ne = 0;
  CU(L, ctx, cuGraphGetNodes, g, NULL, &n);
  CU(L, ctx, cuGraphGetEdges, g, NULL, NULL, NULL, &ne);
  CUgraphNode *v = lua_newuserdatauv(L, (n + 2 * ne + 1) * sizeof *v +
                                     (ne + 1) * sizeof(CUgraphEdgeData), 0);
  CUgraphEdgeData *ed = (CUgraphEdgeData *)(void *)(v + n + 2 * ne + 1);
  cg_check_open(L, &gr->h);
  CU(L, ctx, cuGraphGetNodes, g, v, &n);
  if (ne) /* the driver refuses arrays for no edges */
    CU(L, ctx, cuGraphGetEdges, g, v + n, v + n + ne, ed, &ne);
  size_t base = *id;
  *id += n;
  cg_graph_resolve(L, gr);
  const cg_recs *r = gr->recs;
  for (size_t i = 0; i < n; i++) {
    const cg_rec *e = NULL;
    size_t at = 0;
    for (size_t j = 0; j < r->n && !e; j++)
      if (r->v[j].node == v[i]) e = &r->v[(at = j)];
    double us = -1;
    if (tm && top && tm->at[i] >= 0) us = tm->at[i];
    else if (tm && e && at < r->n) us = tm->rec[at];
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
    if (us >= 0) { /* white to red by its share of the most */
      double f = tm->top > 0 ? us / tm->top : 0;
      unsigned gb = 255 - (unsigned)(191 * (f > 1 ? 1 : f) + 0.5);
      char shade[96];
      snprintf(shade, sizeof shade, "\\n%.1f us\", style=filled, "
               "fillcolor=\"#ff%02x%02x", us, gb, gb);
      add(d, shade);
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
        dotgraph(d, gr, body, pidx, id, tm, 0);
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
    if (from < n && to < n)
      addf(d, ed[i].type == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC
           ? "  n%zu -> n%zu [label=\"programmatic\", style=bold];\n"
           : "  n%zu -> n%zu;\n", base + from, base + to);
  }
  lua_pop(L, 1); /* the node arrays */
}

/* The times of a g:profile result (at pidx): by event nodes, by position
   for the n nodes of the top graph (the nodes' node field); by stamps or
   activity, by record for the nr records of the graph (their index); in a
   userdata left on the stack. */
static void profile_times(lua_State *L, int pidx, size_t n, size_t nr,
                          times *tm) {
  double *us = lua_newuserdatauv(L, (n + nr + 1) * sizeof *us, 0);
  for (size_t i = 0; i < n + nr; i++) us[i] = -1;
  tm->at = us;
  tm->rec = us + n;
  tm->top = 0;
  int by_rec = lua_getfield(L, pidx, "method") == LUA_TSTRING; /* stamps, */
  lua_pop(L, 1);                            /* activity: nodes are records */
  if (lua_getfield(L, pidx, "nodes") != LUA_TTABLE)
    luaL_error(L, "g:dot: opts.profile must be what g:profile returned");
  for (lua_Integer k = 1; lua_rawgeti(L, -1, k) == LUA_TTABLE; k++) {
    lua_getfield(L, -1, by_rec ? "index" : "node");
    lua_getfield(L, -2, "us");
    lua_Integer at = lua_tointeger(L, -2);
    size_t count = by_rec ? nr : n;
    double *to = by_rec ? us + n : us;
    if (at >= 1 && (size_t)at <= count && lua_isnumber(L, -1)) {
      to[at - 1] = lua_tonumber(L, -1);
      if (to[at - 1] > tm->top) tm->top = to[at - 1];
    }
    lua_pop(L, 3);
  }
  lua_pop(L, 2);
}

/* Writes the graph's description to file; 0 when the driver lacks what
   it needs (the caller then asks the driver for its own). */
static int dot(lua_State *L, cg_graph *gr, const char *file, int pidx) {
  if (!gr->recs || !cg_drv.cuGraphGetEdges) return 0;
  int base = lua_gettop(L);
  lua_getiuservalue(L, 1, 1); /* base + 1: the pins */
  lua_newtable(L);            /* base + 2: the text */
  dotbuf d = { L, base + 2, 0 };
  size_t id = 0, n = 0;
  times tm;
  if (pidx) {
    CU(L, gr->h.ctx, cuGraphGetNodes, gr->g, NULL, &n);
    profile_times(L, pidx, n, gr->recs->n, &tm); /* base + 3 */
  }
  add(&d, "digraph cugraph {\n  node [shape=box];\n");
  dotgraph(&d, gr, gr->g, base + 1, &id, pidx ? &tm : NULL, 1);
  add(&d, "}\n");
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (lua_Integer i = 1; i <= d.n; i++) {
    lua_rawgeti(L, base + 2, i);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  size_t len;
  const char *s = lua_tolstring(L, -1, &len);
  FILE *f = fopen(file, "w");
  if (!f)
    return luaL_error(L, "g:dot: cannot open %s: %s", file, strerror(errno));
  int bad = fwrite(s, 1, len, f) != len;
  bad |= fclose(f) != 0;
  if (bad) return luaL_error(L, "g:dot: cannot write %s", file);
  lua_settop(L, base);
  return 1;
}

/* "png" or "svg" when path ends with .png or .svg, else NULL */
static const char *image_format(const char *path) {
  size_t n = strlen(path);
  if (n > 4 && !strcmp(path + n - 4, ".png")) return "png";
  if (n > 4 && !strcmp(path + n - 4, ".svg")) return "svg";
  return NULL;
}

/* A shell word: the text in single quotes */
static void add_quoted(luaL_Buffer *b, const char *s) {
  luaL_addchar(b, '\'');
  for (; *s; s++)
    if (*s == '\'') luaL_addstring(b, "'\\''");
    else luaL_addchar(b, *s);
  luaL_addchar(b, '\'');
}

/* Renders the description in file to path with Graphviz's dot
   (CUGRAPH_LUA_DOT names another) */
static void render(lua_State *L, const char *file, const char *path,
                   const char *fmt) {
  const char *dot = getenv("CUGRAPH_LUA_DOT"); /* else the PATH's */
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  add_quoted(&b, dot && *dot ? dot : "dot");
  luaL_addstring(&b, " -T");
  luaL_addstring(&b, fmt);
  luaL_addstring(&b, " -o ");
  add_quoted(&b, path);
  luaL_addchar(&b, ' ');
  add_quoted(&b, file);
  luaL_addstring(&b, " 2>&1");
  luaL_pushresult(&b);
  FILE *p = popen(lua_tostring(L, -1), "r");
  char out[256] = "";
  size_t got = p ? fread(out, 1, sizeof out - 1, p) : 0;
  out[got] = '\0';
  int st = p ? pclose(p) : -1;
  lua_pop(L, 1);
  if (st == 0) return;
  if (!p || (st > 0 && st >> 8 == 127))
    luaL_error(L, "g:dot: writing %s needs Graphviz's dot, which is not "
               "installed (a path ending in .dot needs nothing)", path);
  out[strcspn(out, "\n")] = '\0';
  luaL_error(L, "g:dot: dot could not render %s: %s", path, out);
}

#define TEMPFILE "cugraph.dot_file"
#define TEMPLATE "/tmp/cugraph-dot-XXXXXX"

/* __close of a temporary file's name: the file goes */
static int tempfile_close(lua_State *L) {
  char *name = luaL_checkudata(L, 1, TEMPFILE);
  if (*name) remove(name);
  *name = '\0';
  return 0;
}

/* g:dot(path [, verbose | {verbose =, profile =}]) */
static int graph_dot(lua_State *L) {
  static const char *const keys[] = { "verbose", "profile", NULL };
  cg_graph *gr = cg_checkobj(L, 1, CG_GRAPH);
  const char *path = cg_checkname(L, 2, NULL);
  int verbose = 0, pidx = 0;
  lua_settop(L, 3);
  if (lua_istable(L, 3)) {
    cg_check_options(L, 3, "g:dot", keys);
    lua_getfield(L, 3, "verbose");
    verbose = lua_toboolean(L, -1);
    if (lua_getfield(L, 3, "profile") != LUA_TNIL) {
      luaL_checktype(L, -1, LUA_TTABLE);
      pidx = lua_gettop(L);
    } else {
      lua_pop(L, 1);
    }
  } else {
    verbose = lua_toboolean(L, 3);
  }
  cg_hold(L); /* the walk calls the driver on the graph's nodes between
                 allocations: no finalizer may free the graph meanwhile */
  cg_check_open(L, &gr->h);
  const char *fmt = image_format(path);
  const char *file = path;
  if (fmt) { /* the description first, in a file removed however it ends */
    char *tmp = lua_newuserdatauv(L, sizeof TEMPLATE, 0);
    memcpy(tmp, TEMPLATE, sizeof TEMPLATE);
    int fd = mkstemp(tmp);
    if (fd < 0)
      return luaL_error(L, "g:dot: cannot make a temporary file: %s",
                        strerror(errno));
    close(fd);
    luaL_setmetatable(L, TEMPFILE);
    lua_toclose(L, -1);
    file = tmp;
  }
  unsigned flags = verbose ? CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE : 0;
  if (verbose || !dot(L, gr, file, pidx))
    CU(L, gr->h.ctx, cuGraphDebugDotPrint, gr->g, file, flags);
  if (fmt) render(L, file, path, fmt);
  lua_settop(L, 1);
  return 1;
}

void dot_open(lua_State *L) {
  luaL_newmetatable(L, TEMPFILE);
  lua_pushcfunction(L, tempfile_close);
  lua_setfield(L, -2, "__close");
  lua_pop(L, 1);
  luaL_getmetatable(L, cg_kind_names[CG_GRAPH]);
  lua_getfield(L, -1, "methods");
  lua_pushcfunction(L, graph_dot);
  lua_setfield(L, -2, "dot");
  lua_pop(L, 2);
}
