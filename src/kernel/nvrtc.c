/* core.compile: CUDA C++ source to PTX (and a cubin for a real sm_XX)
   through NVRTC, opened with dlopen on first use, with a disk cache
   (cache.c) keyed by everything that decides the output (NVRTC version,
   options in order, program name, source). The C types of extern "C"
   kernels come from the compiler: a name expression
   &cugraph_lua_sig_<decltype(&kernel)> lowers to a mangled name that spells
   the kernel's function type. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <nvrtc.h>
#include "base/loader.h"
#include "kernel/cache.h"
#include "kernel/kernel.h"

#define NV_FUNCS(X) \
  X(nvrtcVersion) X(nvrtcCreateProgram) X(nvrtcCompileProgram) \
  X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcGetPTXSize) \
  X(nvrtcGetPTX) X(nvrtcDestroyProgram) X(nvrtcGetErrorString) \
  X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcAddNameExpression) \
  X(nvrtcGetLoweredName)

/* Written once per process by the loader; read after cg_library_load. */
#define NV_FIELD(f) __typeof__(f) *f;
static struct { NV_FUNCS(NV_FIELD) } nv;
#undef NV_FIELD
static int nv_major, nv_minor; /* nvrtcVersion, part of every cache key */

#define GUARD "cugraph.nvrtcProgram" /* metatable of the program holder */
enum { DIRLEN = CG_CACHE_DIRLEN, PATHLEN = CG_CACHE_PATHLEN };

/* The variable template whose instantiations spell kernel types. */
#define SIG_DECL "\ntemplate <typename T> __device__ char cugraph_lua_sig_;\n"
#define SIG_PREFIX "_Z16cugraph_lua_sig_IPFv"

/* Stack slots of l_compile. LIST holds the NVRTC options in order; LIST[1]
   is the -arch option, filled last. NAME is the program name. */
enum { SRC = 1, OPTS, LIST, NAME };

/* The names NVRTC goes by, then the toolkit's own copy. */
static int candidates(char paths[][CG_PATHLEN], int max) {
  static const char *const names[] = {
    "libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"
  };
  const char *home = getenv("CUDA_HOME");
  int n = 0;
  for (size_t i = 0; i < sizeof names / sizeof *names && n < max; i++)
    snprintf(paths[n++], CG_PATHLEN, "%s", names[i]);
  if (home && *home && n < max)
    snprintf(paths[n++], CG_PATHLEN, "%s/lib64/libnvrtc.so", home);
  if (n < max) snprintf(paths[n++], CG_PATHLEN, "/usr/local/cuda/lib64/libnvrtc.so");
  return n;
}

static const char *start(char *msg, size_t n) {
  nvrtcResult r = nv.nvrtcVersion(&nv_major, &nv_minor);
  if (r == NVRTC_SUCCESS) return NULL;
  snprintf(msg, n, "nvrtcVersion failed: %s", nv.nvrtcGetErrorString(r));
  return msg;
}

#define NV_SYMBOL(f) { #f, &nv.f, 0 },
static const cg_symbol symbols[] = { NV_FUNCS(NV_SYMBOL) { NULL, NULL, 0 } };
#undef NV_SYMBOL

static cg_library libnvrtc = {
  "CUGRAPH_LUA_LIBNVRTC", "NVRTC",
  "; install the CUDA toolkit or set CUGRAPH_LUA_LIBNVRTC", candidates,
  symbols, start, CG_LIBRARY_STATE
};

/* Loads NVRTC once per process, raising why it is unusable. */
static void nv_open(lua_State *L) {
  const char *why = cg_library_load(&libnvrtc);
  if (why) luaL_error(L, "%s", why);
}

/* Pushes an error object; message NULL: "out of memory" from the name
   "NVRTC_ERROR_OUT_OF_MEMORY". */
static void nv_pusherror(lua_State *L, const char *api, nvrtcResult r,
                         const char *message) {
  const char *name = nv.nvrtcGetErrorString(r), *p = name;
  char desc[64];
  size_t i;
  if (!strncmp(p, "NVRTC_ERROR", 11)) p += 11;
  while (*p == '_' || *p == ' ') p++;
  for (i = 0; p[i] && i < sizeof desc - 1; i++)
    desc[i] = p[i] == '_' ? ' ' : (char)(p[i] | 0x20);
  desc[i] = '\0';
  cg_pusherror(L, api, (int)r, name, message ? message : desc);
}

/* ---- options ---------------------------------------------------------- */

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
    if (lua_isinteger(L, idx)) {
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
   only driver use here. Without a driver or a device it says to pass
   opts.arch. */
static void push_device_arch(lua_State *L) {
  const char *why = cg_driver_load();
  int major = 0, minor = 0, count = 0;
  if (!why && cg_drv.cuDeviceGetCount(&count) == CUDA_SUCCESS && count == 0)
    why = "no CUDA device found";
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

/* Fills LIST and NAME from the table at OPTS; returns opts.cache. */
static int parse_opts(lua_State *L, int *n) {
  static const char *const known[] = {
    "arch", "cache", "defines", "fast_math", "include", "lineinfo", "name",
    "options", "std", NULL
  };
  int cache, i;
  lua_pushnil(L);
  while (lua_next(L, OPTS)) {
    if (lua_type(L, -2) != LUA_TSTRING)
      luaL_error(L, "compile: opts: unexpected %s key",
                 luaL_typename(L, -2));
    for (i = 0; known[i] && strcmp(known[i], lua_tostring(L, -2)); i++) {}
    if (!known[i])
      luaL_error(L, "compile: opts: unknown field '%s'", lua_tostring(L, -2));
    lua_pop(L, 1);
  }
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
  if (opt_bool(L, "lineinfo", 0)) {
    lua_pushliteral(L, "-lineinfo");
    opt_add(L, n);
  }
  if (opt_bool(L, "fast_math", 0)) {
    lua_pushliteral(L, "--use_fast_math");
    opt_add(L, n);
  }
  opt_array(L, "options", "", n);
  if (opt_get(L, "arch") != LUA_TNIL) {
    push_arch(L, -1);
    lua_rawseti(L, LIST, 1);
  }
  lua_pop(L, 1);
  return cache;
}

/* Appends -I<toolkit>/include when it exists, so <cuda_fp16.h> and friends
   resolve: $CUDA_HOME/include, else /usr/local/cuda/include. */
static void opt_toolkit_include(lua_State *L, int *n) {
  const char *home = getenv("CUDA_HOME");
  char buf[PATHLEN];
  struct stat st;
  int w;
  if (home && *home) {
    w = snprintf(buf, sizeof buf, "%s/include", home);
    if (w > 0 && (size_t)w < sizeof buf && stat(buf, &st) == 0 &&
        S_ISDIR(st.st_mode)) {
      lua_pushfstring(L, "-I%s", buf);
      opt_add(L, n);
      return;
    }
  }
  if (stat("/usr/local/cuda/include", &st) == 0 && S_ISDIR(st.st_mode)) {
    lua_pushliteral(L, "-I/usr/local/cuda/include");
    opt_add(L, n);
  }
}

/* ---- compile ---------------------------------------------------------- */

static void prog_destroy(nvrtcProgram *prog) {
  if (*prog) nv.nvrtcDestroyProgram(prog);
  *prog = NULL;
}

/* __close of the program holder: a Lua error between create and destroy
   (out of memory while copying the log or PTX) still destroys it. */
static int guard_close(lua_State *L) {
  prog_destroy(lua_touserdata(L, 1));
  return 0;
}

/* A holder whose program lives only while its to-be-closed slot does. */
static nvrtcProgram *new_prog(lua_State *L) {
  nvrtcProgram *prog = lua_newuserdatauv(L, sizeof *prog, 0);
  *prog = NULL;
  luaL_setmetatable(L, GUARD);
  lua_toclose(L, -1);
  return prog;
}

static int prog_fail(lua_State *L, nvrtcProgram *prog, const char *api,
                     nvrtcResult r) {
  prog_destroy(prog);
  nv_pusherror(L, api, r, NULL);
  return lua_error(L);
}

/* Length of a C string NVRTC wrote into n bytes (n counts its NUL). */
static size_t nv_strlen(const char *s, size_t n) {
  const char *z = memchr(s, '\0', n);
  return z ? (size_t)(z - s) : n;
}

static void push_log(lua_State *L, nvrtcProgram *prog) {
  luaL_Buffer b;
  size_t size;
  char *p;
  nvrtcResult r = nv.nvrtcGetProgramLogSize(*prog, &size);
  if (r != NVRTC_SUCCESS) prog_fail(L, prog, "nvrtcGetProgramLogSize", r);
  p = luaL_buffinitsize(L, &b, size);
  r = nv.nvrtcGetProgramLog(*prog, p);
  if (r != NVRTC_SUCCESS) prog_fail(L, prog, "nvrtcGetProgramLog", r);
  luaL_pushresultsize(&b, nv_strlen(p, size));
}

/* Pushes the PTX (text) or the cubin (binary) of a compiled program. */
static void push_output(lua_State *L, nvrtcProgram *prog, int cubin) {
  luaL_Buffer b;
  size_t size;
  char *p;
  nvrtcResult r = cubin ? nv.nvrtcGetCUBINSize(*prog, &size)
                        : nv.nvrtcGetPTXSize(*prog, &size);
  if (r != NVRTC_SUCCESS)
    prog_fail(L, prog, cubin ? "nvrtcGetCUBINSize" : "nvrtcGetPTXSize", r);
  p = luaL_buffinitsize(L, &b, size);
  r = cubin ? nv.nvrtcGetCUBIN(*prog, p) : nv.nvrtcGetPTX(*prog, p);
  if (r != NVRTC_SUCCESS)
    prog_fail(L, prog, cubin ? "nvrtcGetCUBIN" : "nvrtcGetPTX", r);
  luaL_pushresultsize(&b, cubin ? size : nv_strlen(p, size));
}

/* Compiles SRC with the n options of argv; pushes the log, the PTX and the
   cubin ("" for a virtual architecture). A failed compile raises an error
   object whose message is the whole log. */
static void compile_main(lua_State *L, const char **argv, int n, int real,
                         nvrtcProgram *prog) {
  nvrtcResult r, cr;
  const char *s;
  size_t len;
  int log;
  r = nv.nvrtcCreateProgram(prog, lua_tostring(L, SRC), lua_tostring(L, NAME),
                            0, NULL, NULL);
  if (r != NVRTC_SUCCESS) prog_fail(L, prog, "nvrtcCreateProgram", r);
  cr = nv.nvrtcCompileProgram(*prog, n, argv);
  push_log(L, prog);
  if (cr != NVRTC_SUCCESS) {
    log = lua_gettop(L);
    s = lua_tolstring(L, log, &len);
    while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == '\r' ||
                       s[len - 1] == ' '))
      len--;
    prog_destroy(prog);
    nv_pusherror(L, "nvrtcCompileProgram", cr,
                 len ? lua_pushlstring(L, s, len) : NULL);
    lua_pushvalue(L, log);
    lua_setfield(L, -2, "log");
    lua_error(L);
  }
  push_output(L, prog, 0);
  if (real) push_output(L, prog, 1);
  else lua_pushliteral(L, "");
  prog_destroy(prog);
}

/* Pushes the types text of the PTX at ptxidx: a line "<entry> <name>" for
   each extern "C" entry (untyped in PTX) whose function type the compiler
   spelled. <name> is a function name ptx_demangle reads,
   _ZN1_<entry>E<parameters>: its prefix stands in for the template's name
   among the substitutions. The program is compiled again, front end only
   (argv holds room for one more option), with SIG_DECL and a name
   expression per entry; when that fails (an extern "C" kernel inside a
   namespace, say) the kernels keep their PTX types. */
static void compile_types(lua_State *L, int ptxidx, const char **argv, int n,
                          nvrtcProgram *prog) {
  size_t len, m, plen = strlen(SIG_PREFIX);
  const char *ptx = lua_tolstring(L, ptxidx, &len), *low, *q;
  char err[200], expr[320], num[24];
  /* entry names are shorter than the PTX that holds them */
  char *names = lua_newuserdatauv(L, len + 1, 0), *w = names;
  int ne, i, k = 0;
  ptx_entry *e = ptx_parse(ptx, len, &ne, err, sizeof err);
  luaL_Buffer b;
  nvrtcResult r;
  if (e) {
    for (i = 0; i < ne; i++)
      if (!e[i].typed && e[i].nparams > 0) {
        m = strlen(e[i].name) + 1;
        memcpy(w, e[i].name, m);
        w += m;
        k++;
      }
    free(e);
  }
  if (k == 0) {
    lua_pushliteral(L, "");
    return;
  }
  lua_pushvalue(L, SRC);
  lua_pushliteral(L, SIG_DECL);
  lua_concat(L, 2);
  r = nv.nvrtcCreateProgram(prog, lua_tostring(L, -1), lua_tostring(L, NAME),
                            0, NULL, NULL);
  if (r != NVRTC_SUCCESS) prog_fail(L, prog, "nvrtcCreateProgram", r);
  for (i = 0, q = names; i < k; i++, q += strlen(q) + 1) {
    snprintf(expr, sizeof expr, "&cugraph_lua_sig_<decltype(&%s)>", q);
    r = nv.nvrtcAddNameExpression(*prog, expr);
    if (r != NVRTC_SUCCESS) prog_fail(L, prog, "nvrtcAddNameExpression", r);
  }
  argv[n] = "-fdevice-syntax-only";
  if (nv.nvrtcCompileProgram(*prog, n + 1, argv) != NVRTC_SUCCESS) {
    prog_destroy(prog);
    lua_pushliteral(L, "");
    return;
  }
  luaL_buffinit(L, &b);
  for (i = 0, q = names; i < k; i++, q += strlen(q) + 1) {
    snprintf(expr, sizeof expr, "&cugraph_lua_sig_<decltype(&%s)>", q);
    if (nv.nvrtcGetLoweredName(*prog, expr, &low) != NVRTC_SUCCESS || !low ||
        strncmp(low, SIG_PREFIX, plen) || (m = strlen(low)) < plen + 2 ||
        strcmp(low + m - 2, "EE"))
      continue;
    snprintf(num, sizeof num, "%zu", strlen(q));
    luaL_addstring(&b, q);
    luaL_addstring(&b, " _ZN1_");
    luaL_addstring(&b, num);
    luaL_addstring(&b, q);
    luaL_addchar(&b, 'E');
    luaL_addlstring(&b, low + plen, m - plen - 2);
    luaL_addchar(&b, '\n');
  }
  luaL_pushresult(&b);
  prog_destroy(prog);
}

/* cg_cache_get's memory: a userdata left on the stack. */
static void *stack_alloc(void *ud, size_t n) {
  return lua_newuserdatauv(ud, n, 0);
}

/* Pushes ptx, cubin, types from a cache payload; 0 when it is malformed. */
static int unpack(lua_State *L, int idx) {
  size_t len, a = 0, c = 0;
  const char *s = lua_tolstring(L, idx, &len), *p = s, *end = s + len;
  while (p < end && *p >= '0' && *p <= '9' && a <= len)
    a = a * 10 + (size_t)(*p++ - '0');
  if (p == end || *p++ != ' ') return 0;
  while (p < end && *p >= '0' && *p <= '9' && c <= len)
    c = c * 10 + (size_t)(*p++ - '0');
  if (p == end || *p++ != '\n' || a > (size_t)(end - p) ||
      c > (size_t)(end - p) - a)
    return 0;
  lua_pushlstring(L, p, a);
  lua_pushlstring(L, p + a, c);
  lua_pushlstring(L, p + a + c, (size_t)(end - p) - a - c);
  return 1;
}

/* core.compile(source [, opts]) -> ptx, log, cubin, types: the cubin is
   "" for a virtual architecture; types is the text compile_types makes. */
static int l_compile(lua_State *L) {
  char dir[DIRLEN], path[PATHLEN], key[33], ver[32];
  const char *s, **argv;
  size_t len;
  cg_hash h = CG_HASH_INIT;
  int n = 1, i, cache = 1, have_dir, real, top, types;
  if (lua_type(L, SRC) != LUA_TSTRING)
    luaL_error(L, "compile: source: expected a string, got %s",
               luaL_typename(L, SRC));
  s = lua_tolstring(L, SRC, &len);
  if (strlen(s) != len) luaL_error(L, "compile: source: contains a NUL byte");
  if (!lua_isnoneornil(L, OPTS) && !lua_istable(L, OPTS))
    luaL_error(L, "compile: opts: expected a table, got %s",
               luaL_typename(L, OPTS));
  lua_settop(L, OPTS);
  lua_newtable(L);                 /* LIST */
  lua_pushliteral(L, "kernel.cu"); /* NAME */
  if (lua_istable(L, OPTS)) cache = parse_opts(L, &n);
  if (lua_rawgeti(L, LIST, 1) == LUA_TNIL) {
    push_device_arch(L);
    lua_rawseti(L, LIST, 1);
  }
  lua_pop(L, 1);
  opt_toolkit_include(L, &n);

  nv_open(L);
  cg_hash_field(&h, cg_cache_magic, strlen(cg_cache_magic));
  snprintf(ver, sizeof ver, "%d.%d", nv_major, nv_minor);
  cg_hash_field(&h, ver, strlen(ver));
  for (i = 1; i <= n; i++) {
    lua_rawgeti(L, LIST, i);
    s = lua_tolstring(L, -1, &len);
    cg_hash_field(&h, s, len);
    lua_pop(L, 1);
  }
  s = lua_tolstring(L, NAME, &len);
  cg_hash_field(&h, s, len);
  s = lua_tolstring(L, SRC, &len);
  cg_hash_field(&h, s, len);
  snprintf(key, sizeof key, "%016llx%016llx", (unsigned long long)h.a,
           (unsigned long long)h.b);

  have_dir = cache && cg_cache_dir(dir, sizeof dir) &&
             cg_cache_path(path, sizeof path, dir, key);
  const char *hit = have_dir ? cg_cache_get(path, key, &len, stack_alloc, L)
                             : NULL;
  if (hit) {
    lua_pushlstring(L, hit, len);
    if (unpack(L, -1)) { /* ptx, log, cubin, types */
      lua_pushliteral(L, "");
      lua_insert(L, -3);
      return 4;
    }
    lua_pop(L, 1);
  }
  argv = lua_newuserdatauv(L, (size_t)(n + 1) * sizeof *argv, 0);
  for (i = 0; i < n; i++) { /* the strings stay anchored in LIST */
    lua_rawgeti(L, LIST, i + 1);
    argv[i] = lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  real = !strncmp(argv[0], "-arch=sm_", 9);
  compile_main(L, argv, n, real, new_prog(L)); /* log, ptx, cubin */
  top = lua_gettop(L);
  compile_types(L, top - 1, argv, n, new_prog(L));
  types = lua_gettop(L);
  if (have_dir) {
    lua_pushfstring(L, "%I %I\n", (LUAI_UACINT)lua_rawlen(L, top - 1),
                    (LUAI_UACINT)lua_rawlen(L, top));
    lua_pushvalue(L, top - 1);
    lua_pushvalue(L, top);
    lua_pushvalue(L, types);
    lua_concat(L, 4);
    s = lua_tolstring(L, -1, &len);
    cg_cache_put(dir, key, s, len);
  }
  lua_pushvalue(L, top - 1);
  lua_pushvalue(L, top - 2);
  lua_pushvalue(L, top);
  lua_pushvalue(L, types);
  return 4;
}

/* core.compile_cache_dir() -> the cache directory (nil when unusable), and
   its size cap in bytes */
static int l_compile_cache_dir(lua_State *L) {
  char dir[DIRLEN];
  if (cg_cache_dir(dir, sizeof dir)) lua_pushstring(L, dir);
  else lua_pushnil(L);
  lua_pushinteger(L, (lua_Integer)cg_cache_cap());
  return 2;
}

/* core.nvrtc_version() -> "13.0", or nil and why NVRTC is unusable */
static int l_nvrtc_version(lua_State *L) {
  const char *why = cg_library_load(&libnvrtc);
  if (why) {
    lua_pushnil(L);
    lua_pushstring(L, why);
    return 2;
  }
  lua_pushfstring(L, "%d.%d", nv_major, nv_minor);
  return 1;
}

void nvrtc_open(lua_State *L) {
  luaL_newmetatable(L, GUARD);
  lua_pushcfunction(L, guard_close);
  lua_setfield(L, -2, "__close");
  lua_pop(L, 1);
  lua_pushcfunction(L, l_compile);
  lua_setfield(L, -2, "compile");
  lua_pushcfunction(L, l_compile_cache_dir);
  lua_setfield(L, -2, "compile_cache_dir");
  lua_pushcfunction(L, l_nvrtc_version);
  lua_setfield(L, -2, "nvrtc_version");
}
