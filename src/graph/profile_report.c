/* What g:profile returns beside its nodes (profile.c): the sums per Lua
   line, and a replay as a Chrome trace. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "graph/graph.h"

static void setnum(lua_State *L, const char *k, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
}

/* Zeroed room that the collector frees, left on the stack */
static void *temp(lua_State *L, size_t n, size_t size) {
  void *p = lua_newuserdatauv(L, (n ? n : 1) * size, 0);
  memset(p, 0, (n ? n : 1) * size);
  return p;
}

/* The lines array from the nodes array at idx: {source, line, us, nodes},
   the most time first; nodes with no line count under source "?". */
void cg_profile_lines(lua_State *L, int nodes) {
  lua_newtable(L); /* by "source:line" */
  int by = lua_gettop(L);
  lua_newtable(L); /* the array */
  int arr = by + 1, n = 0;
  for (lua_Integer i = 1; lua_rawgeti(L, nodes, i) == LUA_TTABLE; i++) {
    int skip = lua_getfield(L, -1, "children") != LUA_TNIL; /* its nodes */
    skip |= lua_getfield(L, -2, "us") == LUA_TNIL; /* count; an untimed */
    lua_pop(L, 2);                                 /* node does not */
    if (skip) {
      lua_pop(L, 1);
      continue;
    }
    lua_getfield(L, -1, "source");
    lua_getfield(L, -2, "line");
    lua_getfield(L, -3, "us");
    double us = lua_tonumber(L, -1);
    lua_getfield(L, -4, "instructions");
    lua_Integer ins = lua_tointeger(L, -1);
    int counted = lua_isinteger(L, -1);
    lua_pop(L, 1);
    const char *src = lua_isstring(L, -3) ? lua_tostring(L, -3) : "?";
    lua_Integer line = lua_tointeger(L, -2);
    lua_pushfstring(L, "%s:%I", src, (LUAI_UACINT)line);
    if (lua_rawget(L, by) != LUA_TTABLE) {
      lua_pop(L, 1);
      lua_createtable(L, 0, 4);
      lua_pushstring(L, src);
      lua_setfield(L, -2, "source");
      lua_pushinteger(L, line);
      lua_setfield(L, -2, "line");
      setnum(L, "us", 0);
      lua_pushinteger(L, 0);
      lua_setfield(L, -2, "nodes");
      lua_pushfstring(L, "%s:%I", src, (LUAI_UACINT)line);
      lua_pushvalue(L, -2);
      lua_rawset(L, by);
      lua_pushvalue(L, -1);
      lua_rawseti(L, arr, ++n);
    }
    lua_getfield(L, -1, "us");
    double sum = lua_tonumber(L, -1) + us;
    lua_pop(L, 1);
    setnum(L, "us", sum);
    lua_getfield(L, -1, "nodes");
    lua_Integer count = lua_tointeger(L, -1) + 1;
    lua_pop(L, 1);
    lua_pushinteger(L, count);
    lua_setfield(L, -2, "nodes");
    if (counted) {
      lua_getfield(L, -1, "instructions");
      lua_Integer sum_ins = lua_tointeger(L, -1) + ins;
      lua_pop(L, 1);
      lua_pushinteger(L, sum_ins);
      lua_setfield(L, -2, "instructions");
    }
    lua_pop(L, 5); /* entry, us, line, source, node */
  }
  lua_pop(L, 1); /* the nil that ended the loop */
  /* the most time first: insertion sort, a few lines */
  for (int i = 2; i <= n; i++)
    for (int j = i; j > 1; j--) {
      lua_rawgeti(L, arr, j - 1);
      lua_rawgeti(L, arr, j);
      lua_getfield(L, -2, "us");
      lua_getfield(L, -2, "us");
      int swap = lua_tonumber(L, -1) > lua_tonumber(L, -2);
      lua_pop(L, 2);
      if (!swap) {
        lua_pop(L, 2);
        break;
      }
      lua_rawseti(L, arr, j - 1);
      lua_rawseti(L, arr, j);
    }
  lua_remove(L, by);
}

/* A replay as a Chrome trace (the Trace Event Format, which Perfetto and
   chrome://tracing read): one complete event per run of a node, on the
   first row free at its start. */
void cg_profile_trace(lua_State *L, int nodes, size_t n, const size_t *node_of,
                      const double *start, const double *dur, const char *path,
                      unsigned id) {
  FILE *f = fopen(path, "w");
  if (!f)
    luaL_error(L, "g:profile: cannot open %s: %s", path, strerror(errno));
  double *row_end = temp(L, n, sizeof *row_end);
  unsigned char *placed = temp(L, n, 1);
  double t0 = 0;
  for (size_t i = 0; i < n; i++)
    if (i == 0 || start[i] < t0) t0 = start[i];
  fprintf(f, "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n");
  fprintf(f, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, "
             "\"args\": {\"name\": \"cugraph.Graph #%u\"}}", id);
  size_t rows = 0;
  for (size_t k = 0; k < n; k++) {
    size_t i = n; /* the earliest start not placed yet */
    for (size_t j = 0; j < n; j++)
      if (!placed[j] && (i == n || start[j] < start[i])) i = j;
    placed[i] = 1;
    double ts = 1e3 * (start[i] - t0), d = 1e3 * dur[i];
    size_t row = 0;
    while (row < rows && row_end[row] > ts) row++;
    if (row == rows) rows++;
    row_end[row] = ts + d;
    size_t node = node_of ? node_of[i] : i;
    lua_rawgeti(L, nodes, (lua_Integer)node + 1);
    lua_getfield(L, -1, "name");
    lua_getfield(L, -2, "kind");
    lua_getfield(L, -3, "source");
    lua_getfield(L, -4, "line");
    lua_getfield(L, -5, "label");
    fprintf(f, ",\n{\"name\": ");
    cg_json_string(f, lua_isstring(L, -5) ? lua_tostring(L, -5)
                                       : lua_tostring(L, -4));
    fprintf(f, ", \"cat\": ");
    cg_json_string(f, lua_tostring(L, -4));
    fprintf(f, ", \"ph\": \"X\", \"pid\": 1, \"tid\": %zu, \"ts\": %.3f, "
               "\"dur\": %.3f, \"args\": {\"node\": %zu", row + 1, ts, d,
            node + 1);
    if (lua_isstring(L, -3)) {
      fprintf(f, ", \"line\": ");
      lua_pushfstring(L, "%s:%d", lua_tostring(L, -3),
                      (int)lua_tointeger(L, -2));
      cg_json_string(f, lua_tostring(L, -1));
      lua_pop(L, 1);
    }
    if (lua_isstring(L, -1)) {
      fprintf(f, ", \"label\": ");
      cg_json_string(f, lua_tostring(L, -1));
    }
    fprintf(f, "}}");
    lua_pop(L, 6);
  }
  fprintf(f, "\n]}\n");
  lua_pop(L, 2);
  if (fclose(f) != 0) luaL_error(L, "g:profile: cannot write %s", path);
}
