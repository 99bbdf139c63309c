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
#include "kernel/nvrtc.h"

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
#define SIG_VAR "_Z16cugraph_lua_sig_I" /* and a variable's type */


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
  const char *name = nv.nvrtcGetErrorString(r);
  snprintf(msg, n, "nvrtcVersion failed: %s", name ? name : "NVRTC_ERROR_UNKNOWN");
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
  const char *name = nv.nvrtcGetErrorString(r), *p;
  char desc[64];
  if (!name) name = "NVRTC_ERROR_UNKNOWN";
  p = name;
  size_t i;
  if (!strncmp(p, "NVRTC_ERROR", 11)) p += 11;
  while (*p == '_' || *p == ' ') p++;
  for (i = 0; p[i] && i < sizeof desc - 1; i++)
    desc[i] = p[i] == '_' ? ' ' : (char)(p[i] | 0x20);
  desc[i] = '\0';
  cg_pusherror(L, api, (int)r, name, message ? message : desc);
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

/* Drops the lines of the n bytes of PTX at p that declare the signature
   variables (SIG_PREFIX..., made by the guessed name expressions; nothing
   refers to them); returns the new length. */
static size_t strip_sigs(char *p, size_t n) {
  size_t r = 0, w = 0;
  while (r < n) {
    const char *nl = memchr(p + r, '\n', n - r);
    size_t e = nl ? (size_t)(nl - p) + 1 : n, len = e - r;
    char keep = p[e - 1];
    p[e - 1] = '\0'; /* the line as a string, for strstr */
    int sig = strstr(p + r, SIG_VAR) != NULL && p[r] == '.';
    p[e - 1] = keep;
    if (!sig) {
      memmove(p + w, p + r, len);
      w += len;
    }
    r = e;
  }
  return w;
}

/* Pushes the PTX (text) or the cubin (binary) of a compiled program. */
static void push_output(lua_State *L, nvrtcProgram *prog, int cubin,
                        int strip) {
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
  size = cubin ? size : nv_strlen(p, size);
  luaL_pushresultsize(&b, strip && !cubin ? strip_sigs(p, size) : size);
}

/* Pushes "=<lowered> <C++ name>" lines for the C++ names of NAMES, whose
   name expressions the compiled program holds. */
static void push_lowered(lua_State *L, nvrtcProgram *prog) {
  luaL_Buffer b;
  const char *low;
  lua_Integer n = (lua_Integer)lua_rawlen(L, NAMES);
  luaL_buffinit(L, &b);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, NAMES, i);
    const char *cxx = lua_tostring(L, -1);
    nvrtcResult r = nv.nvrtcGetLoweredName(*prog, cxx, &low);
    lua_pop(L, 1);
    if (r != NVRTC_SUCCESS) prog_fail(L, prog, "nvrtcGetLoweredName", r);
    if (!low) continue;
    luaL_addchar(&b, '=');
    luaL_addstring(&b, low);
    luaL_addchar(&b, ' ');
    lua_rawgeti(L, NAMES, i);
    luaL_addvalue(&b);
    luaL_addchar(&b, '\n');
  }
  luaL_pushresult(&b);
}

static void sig_expr(char *expr, size_t n, const char *q);
static void sig_line(luaL_Buffer *b, const char *q, const char *low);

/* Compiles SRC with the n options of argv and a name expression for each
   name of NAMES and each of the k guessed names (cg_nvrtc_guess; SIG_DECL
   then ends the source); pushes the log, the PTX (without the guesses'
   variables), the cubin ("" for a virtual architecture), the lowered names
   (push_lowered) and the types text of the guesses (sig_line). A failed
   compile raises an error object whose message is the whole log, but for
   one a guess broke: that returns 0, pushing nothing. */
static int compile_main(lua_State *L, const char **argv, int n, int real,
                        nvrtcProgram *prog, const char *guess, int k) {
  nvrtcResult r, cr;
  const char *s, *q;
  char expr[320];
  size_t len;
  int log, i;
  lua_pushvalue(L, SRC);
  if (k) lua_pushliteral(L, SIG_DECL);
  lua_concat(L, k ? 2 : 1);
  r = nv.nvrtcCreateProgram(prog, lua_tostring(L, -1), lua_tostring(L, NAME),
                            0, NULL, NULL);
  lua_pop(L, 1);
  if (r != NVRTC_SUCCESS) prog_fail(L, prog, "nvrtcCreateProgram", r);
  for (lua_Integer j = 1; j <= (lua_Integer)lua_rawlen(L, NAMES); j++) {
    lua_rawgeti(L, NAMES, j);
    r = nv.nvrtcAddNameExpression(*prog, lua_tostring(L, -1));
    lua_pop(L, 1);
    if (r != NVRTC_SUCCESS) prog_fail(L, prog, "nvrtcAddNameExpression", r);
  }
  for (i = 0, q = guess; i < k; i++, q += strlen(q) + 1) {
    sig_expr(expr, sizeof expr, q);
    r = nv.nvrtcAddNameExpression(*prog, expr);
    if (r != NVRTC_SUCCESS) prog_fail(L, prog, "nvrtcAddNameExpression", r);
  }
  cr = nv.nvrtcCompileProgram(*prog, n, argv);
  push_log(L, prog);
  if (cr != NVRTC_SUCCESS && k && strstr(lua_tostring(L, -1), "cugraph_lua_sig_")) {
    lua_pop(L, 1); /* a guess was wrong: compiled again without them */
    prog_destroy(prog);
    return 0;
  }
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
  push_output(L, prog, 0, k);
  if (real) push_output(L, prog, 1, 0);
  else lua_pushliteral(L, "");
  push_lowered(L, prog);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (i = 0, q = guess; i < k; i++, q += strlen(q) + 1) {
    sig_expr(expr, sizeof expr, q);
    if (nv.nvrtcGetLoweredName(*prog, expr, &s) == NVRTC_SUCCESS && s)
      sig_line(&b, q, s);
  }
  luaL_pushresult(&b);
  prog_destroy(prog);
  return 1;
}

/* The element type a lowered name of &cugraph_lua_sig_<decltype(var)>
   spells for a variable of a builtin type or an array of one
   (_Z16cugraph_lua_sig_IA5_fE: float[5]), or NULL. */
static const char *var_type(const char *low) {
  static const char *const codes[][2] = {
    {"f", "f32"}, {"d", "f64"}, {"a", "i8"}, {"c", "i8"}, {"h", "u8"},
    {"s", "i16"}, {"t", "u16"}, {"i", "i32"}, {"j", "u32"}, {"l", "i64"},
    {"x", "i64"}, {"m", "u64"}, {"y", "u64"}, {"6__half", "f16"},
    {"13__nv_bfloat16", "bf16"},
  };
  const char *p = low + strlen(SIG_VAR);
  if (strncmp(low, SIG_VAR, strlen(SIG_VAR))) return NULL;
  for (;;) { /* cv-qualifiers and array bounds */
    if (*p == 'K' || *p == 'V') {
      p++;
    } else if (*p == 'A' && p[1] >= '0' && p[1] <= '9') {
      for (p++; *p >= '0' && *p <= '9'; p++) {}
      if (*p++ != '_') return NULL;
    } else {
      break;
    }
  }
  for (size_t i = 0; i < sizeof codes / sizeof *codes; i++) {
    size_t n = strlen(codes[i][0]);
    if (!strncmp(p, codes[i][0], n) && !strcmp(p + n, "E")) return codes[i][1];
  }
  return NULL;
}

/* A module variable whose type a name expression can ask for: declared in
   the program at file scope (not mangled, not the compiler's own). */
static int askable(const char *name) {
  return strncmp(name, "_Z", 2) && strncmp(name, "__nv", 4) &&
         strncmp(name, "__cuda", 6) && name[0] != '$';
}

/* The name expression of names' i-th entry (a kernel) or variable ('@'). */
static void sig_expr(char *expr, size_t n, const char *q) {
  if (*q == '@') snprintf(expr, n, "&cugraph_lua_sig_<decltype(%s)>", q + 1);
  else snprintf(expr, n, "&cugraph_lua_sig_<decltype(&%s)>", q);
}

/* Compiles the program again, front end only, with SIG_DECL and a name
   expression for each of the k names (kernels, then '@'variables); pushes
   the types text, or returns 0 when the compile fails. */
static int types_pass(lua_State *L, const char **argv, int n,
                      nvrtcProgram *prog, const char *names, int k) {
  const char *low, *q;
  char expr[320];
  luaL_Buffer b;
  int i;
  lua_pushvalue(L, SRC);
  lua_pushliteral(L, SIG_DECL);
  lua_concat(L, 2);
  nvrtcResult r = nv.nvrtcCreateProgram(prog, lua_tostring(L, -1),
                                        lua_tostring(L, NAME), 0, NULL, NULL);
  lua_pop(L, 1);
  if (r != NVRTC_SUCCESS) prog_fail(L, prog, "nvrtcCreateProgram", r);
  for (i = 0, q = names; i < k; i++, q += strlen(q) + 1) {
    sig_expr(expr, sizeof expr, q);
    r = nv.nvrtcAddNameExpression(*prog, expr);
    if (r != NVRTC_SUCCESS) prog_fail(L, prog, "nvrtcAddNameExpression", r);
  }
  argv[n] = "-fdevice-syntax-only";
  if (nv.nvrtcCompileProgram(*prog, n + 1, argv) != NVRTC_SUCCESS) {
    prog_destroy(prog);
    return 0;
  }
  luaL_buffinit(L, &b);
  for (i = 0, q = names; i < k; i++, q += strlen(q) + 1) {
    sig_expr(expr, sizeof expr, q);
    if (nv.nvrtcGetLoweredName(*prog, expr, &low) == NVRTC_SUCCESS && low)
      sig_line(&b, q, low);
  }
  luaL_pushresult(&b);
  prog_destroy(prog);
  return 1;
}

/* Adds the types line of the name q (a kernel, or '@' and a variable)
   whose signature's lowered name is low, when low spells one. */
static void sig_line(luaL_Buffer *b, const char *q, const char *low) {
  size_t m, plen = strlen(SIG_PREFIX);
  const char *t;
  char num[24];
  if (*q == '@') { /* "@<variable> <element type>" */
    if (!(t = var_type(low))) return;
    luaL_addstring(b, q);
    luaL_addchar(b, ' ');
    luaL_addstring(b, t);
    luaL_addchar(b, '\n');
    return;
  }
  if (strncmp(low, SIG_PREFIX, plen) || (m = strlen(low)) < plen + 2 ||
      strcmp(low + m - 2, "EE"))
    return;
  snprintf(num, sizeof num, "%zu", strlen(q));
  luaL_addstring(b, q);
  luaL_addstring(b, " _ZN1_");
  luaL_addstring(b, num);
  luaL_addstring(b, q);
  luaL_addchar(b, 'E');
  luaL_addlstring(b, low + plen, m - plen - 2);
  luaL_addchar(b, '\n');
}

/* Whether the n bytes at s are one of the count names of list (each
   ended by a NUL). */
static int listed(const char *list, int count, const char *s, size_t n) {
  for (int i = 0; i < count; i++, list += strlen(list) + 1)
    if (strlen(list) == n && !memcmp(list, s, n)) return 1;
  return 0;
}

/* Pushes the types text of the PTX at ptxidx: a line "<entry> <name>" for
   each extern "C" entry (untyped in PTX) whose function type the compiler
   spelled, and "@<variable> <type>" for each module variable of a builtin
   element type. <name> is a function name ptx_demangle reads,
   _ZN1_<entry>E<parameters>: its prefix stands in for the template's name
   among the substitutions. The lines of the names the compile guessed are
   those of the text at sigidx; the names it missed are asked for in a
   front-end compile. When that fails (an extern "C" kernel inside a
   namespace, say) it is tried again for the kernels alone, and then the
   kernels keep their PTX types. */
static void compile_types(lua_State *L, int ptxidx, int sigidx,
                          const char **argv, int n, nvrtcProgram *prog,
                          const char *guess, int kguess) {
  size_t len, m;
  const char *ptx = lua_tolstring(L, ptxidx, &len);
  char err[200];
  /* the names, each with a NUL and maybe an '@', are shorter than the PTX
     that holds them with their declarations */
  char *names = lua_newuserdatauv(L, 2 * len + 2, 0), *w = names;
  int ne, ng, i, k = 0, kg = 0;
  ptx_entry *e = ptx_parse(ptx, len, &ne, err, sizeof err);
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
  ptx_global *g = ptx_globals(ptx, len, &ng, err, sizeof err);
  for (i = 0; g && i < ng; i++)
    if (askable(g[i].name)) {
      *w++ = '@';
      m = strlen(g[i].name) + 1;
      memcpy(w, g[i].name, m);
      w += m;
      kg++;
    }
  free(g);
  /* the lines of the guesses that are needed, then the names missed */
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  const char *t = lua_tostring(L, sigidx), *nl;
  for (; *t; t = nl + 1) {
    nl = strchr(t, '\n');
    if (listed(names, k + kg, t, strcspn(t, " ")))
      luaL_addlstring(&b, t, (size_t)(nl - t) + 1);
  }
  luaL_pushresult(&b);
  char *miss = lua_newuserdatauv(L, (size_t)(w - names) + 1, 0), *mw = miss;
  int mk = 0, mkg = 0;
  const char *q = names;
  for (i = 0; i < k + kg; i++, q += strlen(q) + 1)
    if (!listed(guess, kguess, q, strlen(q))) {
      memcpy(mw, q, strlen(q) + 1);
      mw += strlen(q) + 1;
      if (i < k) mk++;
      else mkg++;
    }
  if ((mk + mkg == 0 || !types_pass(L, argv, n, prog, miss, mk + mkg)) &&
      (mkg == 0 || mk == 0 || !types_pass(L, argv, n, prog, miss, mk)))
    lua_pushliteral(L, "");
  lua_remove(L, -2); /* the missed names */
  lua_concat(L, 2);
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

/* The cache's size cap, raising when CUGRAPH_LUA_CACHE_SIZE is malformed. */
static uint64_t cache_cap(lua_State *L) {
  uint64_t cap;
  char err[256];
  if (cg_cache_cap(&cap, err, sizeof err)) luaL_error(L, "%s", err);
  return cap;
}

/* core.compile(source [, opts [, module]]) -> ptx, log, cubin, types: the
   cubin is "" for a virtual architecture; types is the text push_lowered
   and compile_types make; module: the caller loads the result (its
   message without a driver names the simulator, not opts.arch). */
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
  int module = lua_toboolean(L, OPTS + 1);
  lua_settop(L, OPTS);
  lua_newtable(L);                 /* LIST */
  lua_pushliteral(L, "kernel.cu"); /* NAME */
  lua_newtable(L);                 /* NAMES */
  if (lua_istable(L, OPTS)) {
    cache = cg_nvrtc_options(L, &n);
  } else if (cg_nvrtc_lineinfo()) {
    lua_pushliteral(L, "-lineinfo");
    lua_rawseti(L, LIST, ++n);
  }
  if (lua_rawgeti(L, LIST, 1) == LUA_TNIL) {
    cg_nvrtc_device_arch(L, module);
    lua_rawseti(L, LIST, 1);
  }
  lua_pop(L, 1);
  cg_nvrtc_toolkit_include(L, &n);

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
  for (i = 1; i <= (int)lua_rawlen(L, NAMES); i++) {
    lua_rawgeti(L, NAMES, i);
    s = lua_tolstring(L, -1, &len);
    cg_hash_field(&h, "names", 5);
    cg_hash_field(&h, s, len);
    lua_pop(L, 1);
  }
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
  s = lua_tolstring(L, SRC, &len);
  char *guess = lua_newuserdatauv(L, 2 * len + 2, 0);
  int kguess = cg_nvrtc_guess(s, len, guess);
  /* log, ptx, cubin, lowered names, the guesses' types */
  if (!compile_main(L, argv, n, real, new_prog(L), guess, kguess))
    compile_main(L, argv, n, real, new_prog(L), guess, kguess = 0);
  top = lua_gettop(L) - 2;
  compile_types(L, top - 1, top + 2, argv, n, new_prog(L), guess, kguess);
  lua_pushvalue(L, top + 1); /* the lowered names, then the types */
  lua_insert(L, -2);
  lua_concat(L, 2);
  types = lua_gettop(L);
  if (have_dir) {
    lua_pushfstring(L, "%I %I\n", (LUAI_UACINT)lua_rawlen(L, top - 1),
                    (LUAI_UACINT)lua_rawlen(L, top));
    lua_pushvalue(L, top - 1);
    lua_pushvalue(L, top);
    lua_pushvalue(L, types);
    lua_concat(L, 4);
    s = lua_tolstring(L, -1, &len);
    cg_cache_put(dir, key, s, len, cache_cap(L));
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
  uint64_t cap = cache_cap(L);
  if (cg_cache_dir(dir, sizeof dir)) lua_pushstring(L, dir);
  else lua_pushnil(L);
  lua_pushinteger(L, (lua_Integer)cap);
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
  cache_cap(L); /* a malformed CUGRAPH_LUA_CACHE_SIZE fails the load */
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
