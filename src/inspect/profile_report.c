/* What g:profile returns beside its nodes (profile.c): the sums per Lua
   line, and a replay as a Chrome trace. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "inspect/inspect.h"

#define PROFILE "cugraph.Profile" /* the results' metatable */

void cg_setnum(lua_State *L, const char *k, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
}

void *cg_profile_temp(lua_State *L, size_t n, size_t size) {
  void *p = lua_newuserdatauv(L, (n ? n : 1) * size, 0);
  memset(p, 0, (n ? n : 1) * size);
  return p;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double cg_median(const double *v, size_t n, size_t stride, double *tmp) {
  for (size_t i = 0; i < n; i++) tmp[i] = v[i * stride];
  qsort(tmp, n, sizeof *tmp, cmp_double);
  return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

void cg_profile_recnodes(lua_State *L, cg_recs *r, lua_Integer reps,
                         const double *us, const double *runs) {
  size_t n = cg_recs_count(r);
  size_t stride = n ? n : 1;
  double *tmp = cg_profile_temp(L, (size_t)reps, sizeof *tmp);
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    const cg_rec *e = &r->v[i];
    cg_push_record(L, r, i);
    int timed = 0;
    for (lua_Integer k = 0; k < reps && !timed; k++)
      timed = runs[(size_t)k * stride + i] > 0;
    if (timed) {
      const double *t = us + i;
      cg_setnum(L, "us", cg_median(t, (size_t)reps, stride, tmp));
      double lo = t[0], hi = t[0];
      for (lua_Integer k = 1; k < reps; k++) {
        double v = t[(size_t)k * stride];
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
      cg_setnum(L, "min_us", lo);
      cg_setnum(L, "max_us", hi);
    }
    if (e->kind == NK_COND) { /* its body nodes follow it: they count */
      lua_Integer kids = 0;
      for (size_t j = i + 1; j < n && r->v[j].depth > e->depth; j++) kids++;
      lua_pushinteger(L, kids);
      lua_setfield(L, -2, "children");
    } else if (timed) {
      lua_pushinteger(L, (lua_Integer)cg_median(runs + i, (size_t)reps,
                                                stride, tmp));
      lua_setfield(L, -2, "runs");
    }
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_remove(L, -2); /* tmp */
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
      cg_setnum(L, "us", 0);
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
    cg_setnum(L, "us", sum);
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
  double *row_end = cg_profile_temp(L, n, sizeof *row_end);
  unsigned char *placed = cg_profile_temp(L, n, 1);
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

void cg_profile_result(lua_State *L, lua_Integer reps, double plain,
                       double with, int timed, const char *method,
                       int nodes, const char *trace) {
  lua_createtable(L, 0, 10);
  luaL_setmetatable(L, PROFILE);
  lua_pushinteger(L, reps);
  lua_setfield(L, -2, "replays");
  cg_setnum(L, "us", 1e3 * plain);
  if (timed) {
    cg_setnum(L, "profiled_us", 1e3 * with);
    cg_setnum(L, "overhead", plain > 0 ? with / plain : 0);
  }
  if (method) {
    lua_pushstring(L, method);
    lua_setfield(L, -2, "method");
  }
  lua_pushvalue(L, nodes);
  lua_setfield(L, -2, "nodes");
  if (timed) {
    cg_profile_lines(L, nodes);
    lua_setfield(L, -2, "lines");
  }
  if (trace && timed) {
    lua_pushstring(L, trace);
    lua_setfield(L, -2, "trace");
  }
}

/* t[k] as a number, or def */
static double num(lua_State *L, int t, const char *k, double def) {
  double v = lua_getfield(L, t, k) == LUA_TNUMBER ? lua_tonumber(L, -1) : def;
  lua_pop(L, 1);
  return v;
}

/* Appends s to the parts table at index 3. */
static void part(lua_State *L, const char *s) {
  lua_pushstring(L, s);
  lua_rawseti(L, 3, (lua_Integer)lua_rawlen(L, 3) + 1);
}

/* The report print(p) shows: a line for the replay, then one a node in
   capture order (a body's or a child graph's nodes indented below theirs)
   with its kind, kernel, Lua line and time, and its runs, spread, or
   instructions; on the simulator, that the times are its clock's. */
static int profile_tostring(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  lua_getfield(L, 1, "nodes"); /* 2 */
  lua_newtable(L);             /* 3: the parts */
  char line[256];
  double us = num(L, 1, "us", 0), with = num(L, 1, "profiled_us", -1);
  int method = lua_getfield(L, 1, "method") == LUA_TSTRING;
  snprintf(line, sizeof line, "profile (%.20s): %.1f us a replay",
           method ? lua_tostring(L, -1) : "event nodes", us);
  lua_pop(L, 1);
  part(L, line);
  if (with >= 0) {
    snprintf(line, sizeof line, ", %.1f profiled (%.3fx)", with,
             num(L, 1, "overhead", 0));
    part(L, line);
  }
  if (cg_drv.cuSimEventInstructions) {
    double ins = num(L, 1, "instructions", -1);
    part(L, "\n  on the PTX simulator: its own clock, not a GPU's timings");
    if (ins >= 0) {
      snprintf(line, sizeof line, "; %.0f thread-instructions a replay",
               ins);
      part(L, line);
    }
  }
  if (lua_getfield(L, 1, "note") == LUA_TSTRING) {
    part(L, "\n  ");
    lua_rawseti(L, 3, (lua_Integer)lua_rawlen(L, 3) + 1);
  } else {
    lua_pop(L, 1);
  }
  for (lua_Integer i = 1; lua_istable(L, 2); i++) {
    if (lua_rawgeti(L, 2, i) != LUA_TTABLE) {
      lua_pop(L, 1);
      break;
    }
    int depth = (int)num(L, 4, "depth", 0);
    double t = num(L, 4, "us", -1), runs = num(L, 4, "runs", 1);
    double lo = num(L, 4, "min_us", -1), hi = num(L, 4, "max_us", -1);
    double kids = num(L, 4, "children", 0);
    double ins = num(L, 4, "instructions", -1);
    lua_getfield(L, 4, "kind");
    lua_getfield(L, 4, "name");
    lua_getfield(L, 4, "line");
    const char *kind = lua_tostring(L, 5), *name = lua_tostring(L, 6);
    char time[32] = "-", at[24] = "", more[96] = "";
    if (t >= 0) snprintf(time, sizeof time, "%.1f", t);
    if (lua_isinteger(L, 7))
      snprintf(at, sizeof at, "line %d", (int)lua_tointeger(L, 7));
    if (kids > 0)
      snprintf(more, sizeof more, "  (its body's %.0f nodes below)", kids);
    else if (runs > 1)
      snprintf(more, sizeof more, "  in %.0f runs", runs);
    else if (!method && lo >= 0 && hi > lo) /* event nodes: the spread */
      snprintf(more, sizeof more, "  (%.1f-%.1f)", lo, hi);
    if (ins >= 0)
      snprintf(more + strlen(more), sizeof more - strlen(more),
               "  %.0f instructions", ins);
    snprintf(line, sizeof line, "\n  %*s%-12.40s %-10.60s %-9s %10s us%s",
             2 * (depth > 8 ? 8 : depth), "", kind ? kind : "?",
             name ? name : "", at, time, more);
    lua_pop(L, 4);
    part(L, line);
  }
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (lua_Integer i = 1; lua_rawgeti(L, 3, i) == LUA_TSTRING; i++)
    luaL_addvalue(&b);
  lua_pop(L, 1);
  luaL_pushresult(&b);
  return 1;
}

void profile_report_open(lua_State *L) {
  luaL_newmetatable(L, PROFILE);
  lua_pushcfunction(L, profile_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
}

void cg_profile_scratch(lua_State *L, const char *name, lua_CFunction close) {
  luaL_newmetatable(L, name);
  lua_pushcfunction(L, close);
  lua_setfield(L, -2, "__close");
  lua_pushcfunction(L, close);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
}
