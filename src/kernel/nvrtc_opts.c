/* The options of core.compile: opts into NVRTC's argument list. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "kernel/kernel.h"
#include "kernel/nvrtc.h"

enum { PATHLEN = 4096 };

/* Raises "compile: opts.<field>[i]: <msg>"; i == 0 leaves out the index. */
static int opt_error(lua_State *L, const char *field, lua_Integer i,
                     const char *msg) {
  if (i) return luaL_error(L, "compile: opts.%s[%I]: %s", field, i, msg);
  return luaL_error(L, "compile: opts.%s: %s", field, msg);
}

/* The string at idx, which must hold no NUL byte (NVRTC takes C strings). */
static const char *opt_str(lua_State *L, int idx, const char *field,
                           lua_Integer i) {
  size_t len;
  const char *s;
  if (lua_type(L, idx) != LUA_TSTRING)
    opt_error(L, field, i, lua_pushfstring(L, "expected a string, got %s",
                                           luaL_typename(L, idx)));
  s = lua_tolstring(L, idx, &len);
  if (strlen(s) != len) opt_error(L, field, i, "contains a NUL byte");
  return s;
}

/* Pushes opts[field] (raw) and returns its type. */
static int opt_get(lua_State *L, const char *field) {
  lua_pushstring(L, field);
  return lua_rawget(L, OPTS);
}

/* Appends the string on top to LIST, popping it. */
static void opt_add(lua_State *L, int *n) {
  lua_rawseti(L, LIST, ++*n);
}

static int opt_bool(lua_State *L, const char *field, int dflt) {
  int t = opt_get(L, field);
  if (t == LUA_TBOOLEAN) dflt = lua_toboolean(L, -1);
  else if (t != LUA_TNIL)
    opt_error(L, field, 0, lua_pushfstring(L, "expected a boolean, got %s",
                                           luaL_typename(L, -1)));
  lua_pop(L, 1);
  return dflt;
}

/* Appends prefix..s for each string s of the array opts[field]. */
static void opt_array(lua_State *L, const char *field, const char *prefix,
                      int *n) {
  int t = opt_get(L, field);
  lua_Integer i, len;
  if (t == LUA_TTABLE) {
    len = (lua_Integer)lua_rawlen(L, -1);
    for (i = 1; i <= len; i++) {
      lua_rawgeti(L, -1, i);
      lua_pushfstring(L, "%s%s", prefix, opt_str(L, -1, field, i));
      opt_add(L, n);
      lua_pop(L, 1);
    }
  } else if (t != LUA_TNIL) {
    opt_error(L, field, 0, lua_pushfstring(L,
              "expected an array of strings, got %s", luaL_typename(L, -1)));
  }
  lua_pop(L, 1);
}

/* opts.names: C++ names of kernels (template instantiations, overloads)
   into NAMES, each once. */
static void opt_names(lua_State *L) {
  int t = opt_get(L, "names");
  if (t == LUA_TTABLE) {
    lua_Integer len = (lua_Integer)lua_rawlen(L, -1);
    for (lua_Integer i = 1; i <= len; i++) {
      lua_rawgeti(L, -1, i);
      const char *s = opt_str(L, -1, "names", i);
      size_t k = strlen(s);
      if (!k) opt_error(L, "names", i, "is empty");
      if (k > 200) opt_error(L, "names", i, "is longer than 200 bytes");
      if (strchr(s, '\n')) opt_error(L, "names", i, "contains a newline");
      for (lua_Integer j = 1; j < i; j++) {
        lua_rawgeti(L, NAMES, j);
        int same = !strcmp(lua_tostring(L, -1), s);
        lua_pop(L, 1);
        if (same) opt_error(L, "names", i, lua_pushfstring(L,
                            "'%s' is given twice", s));
      }
      lua_rawseti(L, NAMES, i);
    }
  } else if (t != LUA_TNIL) {
    opt_error(L, "names", 0, lua_pushfstring(L,
              "expected an array of strings, got %s", luaL_typename(L, -1)));
  }
  lua_pop(L, 1);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Pushes -Dname[=value] for the value on top, or nothing for false.
   Returns whether it pushed. */
static int push_define(lua_State *L, const char *name) {
  int idx = lua_gettop(L), prec;
  const char *type = luaL_typename(L, idx), *s;
  char num[32];
  size_t len;
  double v;
  switch (lua_type(L, idx)) {
  case LUA_TBOOLEAN:
    if (!lua_toboolean(L, idx)) return 0;
    lua_pushfstring(L, "-D%s", name);
    return 1;
  case LUA_TSTRING:
    s = lua_tolstring(L, idx, &len);
    if (strlen(s) != len)
      opt_error(L, lua_pushfstring(L, "defines.%s", name), 0,
                "contains a NUL byte");
    lua_pushfstring(L, "-D%s=%s", name, s);
    return 1;
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx)) { /* -2^63 is no C literal: an expression */
      if (lua_tointeger(L, idx) == LUA_MININTEGER)
        lua_pushfstring(L, "-D%s=(-9223372036854775807LL-1)", name);
      else
        lua_pushfstring(L, "-D%s=%I", name, lua_tointeger(L, idx));
      return 1;
    }
    v = lua_tonumber(L, idx);
    if (!isfinite(v))
      opt_error(L, lua_pushfstring(L, "defines.%s", name), 0,
                "expected a finite number");
    /* shortest form that reads back exactly, and a C floating literal */
    for (prec = 15; prec <= 17; prec++) {
      snprintf(num, sizeof num, "%.*g", prec, v);
      if (strtod(num, NULL) == v) break;
    }
    lua_pushfstring(L, "-D%s=%s%s", name, num,
                    strpbrk(num, ".e") ? "" : ".0");
    return 1;
  default:
    s = lua_pushfstring(L, "defines.%s", name);
    return opt_error(L, s, 0, lua_pushfstring(L, "expected true, false, a "
                                              "string or a number, got %s",
                                              type));
  }
}

/* Appends the defines sorted by name, so the cache key does not depend on
   the order of table traversal. */
static void opt_defines(lua_State *L, int *n) {
  int t = opt_get(L, "defines"), d = lua_gettop(L);
  size_t count = 0, i = 0;
  const char **names;
  if (t == LUA_TTABLE) {
    lua_pushnil(L);
    while (lua_next(L, d)) {
      count++;
      lua_pop(L, 1);
    }
    names = lua_newuserdatauv(L, count * sizeof *names, 0);
    lua_pushnil(L);
    while (lua_next(L, d)) {   /* keys stay anchored in the table */
      const char *k;
      if (lua_type(L, -2) != LUA_TSTRING)
        opt_error(L, "defines", 0, lua_pushfstring(L,
                  "expected names as keys, got a %s key",
                  luaL_typename(L, -2)));
      k = lua_tostring(L, -2);
      if (strlen(k) != lua_rawlen(L, -2) || strchr(k, '=') ||
          !(k[0] == '_' || (k[0] >= 'A' && k[0] <= 'Z') ||
            (k[0] >= 'a' && k[0] <= 'z')))
        opt_error(L, "defines", 0, lua_pushfstring(L,
                  "'%s' is not a macro name", k));
      names[i++] = k;
      lua_pop(L, 1);
    }
    qsort(names, count, sizeof *names, cmp_str);
    for (i = 0; i < count; i++) {
      lua_pushstring(L, names[i]);
      lua_rawget(L, d);
      if (push_define(L, names[i])) opt_add(L, n);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  } else if (t != LUA_TNIL) {
    opt_error(L, "defines", 0, lua_pushfstring(L,
              "expected a table of name = value, got %s",
              luaL_typename(L, -1)));
  }
  lua_pop(L, 1);
}

/* Pushes the -arch option for opts.arch at idx: "sm_90", "compute_90a",
   "90" or 90. A compute_ name is virtual (PTX only); the others are real
   (-arch=sm_XX: a cubin and its PTX). NVRTC itself rejects the numbers it
   does not know. */
static void push_arch(lua_State *L, int idx) {
  const char *s, *p;
  size_t digits;
  lua_Integer v;
  int ok;
  if (lua_type(L, idx) == LUA_TNUMBER) {
    v = lua_tointegerx(L, idx, &ok);
    if (!ok || v <= 0 || v > 9999)
      opt_error(L, "arch", 0, lua_pushfstring(L,
                "expected a compute capability like 90, got %s",
                luaL_tolstring(L, idx, NULL)));
    lua_pushfstring(L, "-arch=sm_%I", v);
    return;
  }
  if (lua_type(L, idx) != LUA_TSTRING)
    opt_error(L, "arch", 0, lua_pushfstring(L,
              "expected a string like 'sm_90' or an integer, got %s",
              luaL_typename(L, idx)));
  s = lua_tostring(L, idx);
  p = !strncmp(s, "sm_", 3) ? s + 3 : !strncmp(s, "compute_", 8) ? s + 8 : s;
  digits = strspn(p, "0123456789");
  /* digits, then at most one feature letter: 90, 90a, 100f */
  if (digits == 0 || digits > 4 || p[0] == '0' ||
      strlen(p) != digits + (p[digits] >= 'a' && p[digits] <= 'z') ||
      strlen(s) != lua_rawlen(L, idx))
    opt_error(L, "arch", 0, lua_pushfstring(L,
              "expected a string like 'sm_90' or an integer, got '%s'", s));
  lua_pushfstring(L, "-arch=%s_%s", p == s + 8 ? "compute" : "sm", p);
}

/* The current device's compute capability, as a real architecture; the
   only driver use here. Without a driver or a device: for PTX alone
   (cuda.ptx) it says to pass opts.arch; for a module (cuda.compile, which
   a driver must load), or when the simulator was asked for and is
   missing, it says why first and ends with what runs without a GPU. */
void cg_nvrtc_device_arch(lua_State *L, int module) {
  const char *why = cg_driver_load(), *env = getenv("CUGRAPH_LUA_LIBCUDA");
  int major = 0, minor = 0, count = 0;
  if (!why && cg_drv.cuDeviceGetCount(&count) == CUDA_SUCCESS && count == 0)
    why = "no CUDA device found";
  if (why && (module || (env && !strcmp(env, "sim"))))
    luaL_error(L, "compile: %s%s", why, strstr(why, "simulator") ? "" :
               "; without a GPU, run on the PTX simulator: cugraph-lua "
               "--sim script.lua (or CUGRAPH_LUA_LIBCUDA=sim)");
  if (why)
    luaL_error(L, "compile: no GPU to take the architecture from (%s); pass "
               "one, e.g. {arch = \"sm_90\"}", why);
  cg_ctx *ctx = cg_context(L);
  CU(L, ctx, cuDeviceGetAttribute, &major,
     CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, ctx->dev);
  CU(L, ctx, cuDeviceGetAttribute, &minor,
     CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, ctx->dev);
  lua_pushfstring(L, "-arch=sm_%d%d", major, minor);
}

/* lineinfo is on by default on the simulator: its faults name the
   source line (the Lua file's, through cuda.compile's #line). */
int cg_nvrtc_lineinfo(void) {
  return !cg_driver_load() && cg_drv.cuSimSetLuaLine;
}

/* Fills LIST and NAME from the table at OPTS; returns opts.cache. */
int cg_nvrtc_options(lua_State *L, int *n) {
  static const char *const known[] = {
    "arch", "cache", "defines", "fast_math", "include", "lineinfo", "name",
    "names", "options", "std", NULL
  };
  int cache;
  cg_check_options(L, OPTS, "compile", known);
  if (opt_get(L, "name") != LUA_TNIL) {
    if (!*opt_str(L, -1, "name", 0)) opt_error(L, "name", 0, "is empty");
    lua_replace(L, NAME);
  } else {
    lua_pop(L, 1);
  }
  cache = opt_bool(L, "cache", 1);
  if (opt_get(L, "std") != LUA_TNIL) {
    lua_pushfstring(L, "-std=%s", opt_str(L, -1, "std", 0));
    opt_add(L, n);
  }
  lua_pop(L, 1);
  opt_defines(L, n);
  opt_array(L, "include", "-I", n);
  if (opt_bool(L, "lineinfo", cg_nvrtc_lineinfo())) {
    lua_pushliteral(L, "-lineinfo");
    opt_add(L, n);
  }
  if (opt_bool(L, "fast_math", 0)) {
    lua_pushliteral(L, "--use_fast_math");
    opt_add(L, n);
  }
  opt_array(L, "options", "", n);
  opt_names(L);
  if (opt_get(L, "arch") != LUA_TNIL) {
    push_arch(L, -1);
    lua_rawseti(L, LIST, 1);
  }
  lua_pop(L, 1);
  return cache;
}

/* Appends -I for the toolkit's headers: the first of $CUDA_HOME and
   /usr/local/cuda that has include/, and the folders beside it that the
   toolkit keeps headers in (CUDA 13 moved CCCL, whose <cuda/std/...> the
   cooperative groups headers include, to include/cccl). NVRTC compiles
   without cuda_runtime.h, so a header meant to be included on its own
   (<cuda_device_runtime_api.h>, for cudaGraphSetConditional) reaches
   crt/host_defines.h unannounced and warns that it is misused; the macro
   cuda_runtime.h sets for it says that it is not. */
void cg_nvrtc_toolkit_include(lua_State *L, int *n) {
  static const char *const subdirs[] = { "include", "include/cccl" };
  const char *home = getenv("CUDA_HOME");
  const char *roots[] = { home && *home ? home : NULL, "/usr/local/cuda" };
  char buf[PATHLEN];
  struct stat st;
  for (size_t r = 0; r < 2; r++) {
    if (!roots[r]) continue;
    int found = 0;
    for (size_t d = 0; d < sizeof subdirs / sizeof *subdirs; d++) {
      int w = snprintf(buf, sizeof buf, "%s/%s", roots[r], subdirs[d]);
      if (w <= 0 || (size_t)w >= sizeof buf || stat(buf, &st) != 0 ||
          !S_ISDIR(st.st_mode))
        continue;
      lua_pushfstring(L, "-I%s", buf);
      lua_rawseti(L, LIST, ++*n);
      found = 1;
    }
    if (found) {
      lua_pushliteral(L, "-D__CUDA_INCLUDE_COMPILER_INTERNAL_HEADERS__");
      lua_rawseti(L, LIST, ++*n);
      return;
    }
  }
}
