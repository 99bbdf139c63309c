#define _POSIX_C_SOURCE 200809L
/* core.compile: CUDA C++ source to PTX (and a cubin for a real sm_XX)
   through NVRTC, opened with dlopen on first use, with an on-disk cache. The
   C types of extern "C" kernels come from the compiler: a name expression
   &cugraph_lua_sig_<decltype(&kernel)> lowers to a mangled name that spells
   the kernel's function type. A cache entry is named by a 128-bit hash of
   everything that decides the output (NVRTC version, options in order,
   program name, source) and is used only when its header, length and
   checksum all agree; anything else is recompiled and rewritten. The cache
   is kept under a size cap by evicting the least recently used entries. */
#include <dirent.h>
#include <dlfcn.h>
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
#include "base/core.h"
#include "kernel/ptx.h"

#define NV_FUNCS(X) \
  X(nvrtcVersion) X(nvrtcCreateProgram) X(nvrtcCompileProgram) \
  X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcGetPTXSize) \
  X(nvrtcGetPTX) X(nvrtcDestroyProgram) X(nvrtcGetErrorString) \
  X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcAddNameExpression) \
  X(nvrtcGetLoweredName)

/* Written by nv_load, once per process, under nv_lock; read only after
   nv_open took it (a lock rather than pthread_once, so that helgrind and
   DRD see the ordering too). */
#define NV_FIELD(f) __typeof__(f) *f;
static struct { NV_FUNCS(NV_FIELD) } nv;
#undef NV_FIELD

static pthread_mutex_t nv_lock = PTHREAD_MUTEX_INITIALIZER;
static int nv_tried;
static char nv_error[1024];    /* why NVRTC is unusable, or "" */
static int nv_major, nv_minor; /* nvrtcVersion, part of every cache key */

#define GUARD "cugraph.nvrtcProgram" /* metatable of the program holder */
#define CACHE_MAGIC "cugraph-lua-nvrtc 2" /* bump when the format changes */
#define CACHE_EXT ".nvrtc"
#define CACHE_MAX ((off_t)1 << 30)       /* larger entries are not read */
#define CACHE_CAP ((uint64_t)256 << 20)  /* default size cap of the cache */
enum { DIRLEN = 3968, PATHLEN = 4096 };  /* dir + "/<key>.nvrtc.tmp..." fits */

/* The variable template whose instantiations spell kernel types. */
#define SIG_DECL "\ntemplate <typename T> __device__ char cugraph_lua_sig_;\n"
#define SIG_PREFIX "_Z16cugraph_lua_sig_IPFv"

/* Stack slots of l_compile. LIST holds the NVRTC options in order; LIST[1]
   is the -arch option, filled last. NAME is the program name. */
enum { SRC = 1, OPTS, LIST, NAME };

static void *nv_try(const char *name, char *err, size_t errlen) {
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!h && !err[0]) snprintf(err, errlen, "%s", dlerror());
  return h;
}

static void nv_load(void) {
  static const char *const names[] = {
    "libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"
  };
  const char *env = getenv("CUGRAPH_LUA_LIBNVRTC");
  const char *home = getenv("CUDA_HOME");
  const char *missing = NULL;
  char err[512] = "", path[PATHLEN];
  void *h = NULL, *sym;
  size_t i;
  nvrtcResult r;
  if (env && *env) {
    h = nv_try(env, err, sizeof err);
  } else {
    for (i = 0; !h && i < sizeof names / sizeof *names; i++)
      h = nv_try(names[i], err, sizeof err);
    if (!h && home && *home &&
        snprintf(path, sizeof path, "%s/lib64/libnvrtc.so", home) <
          (int)sizeof path)
      h = nv_try(path, err, sizeof err);
    if (!h) h = nv_try("/usr/local/cuda/lib64/libnvrtc.so", err, sizeof err);
  }
  if (!h) {
    snprintf(nv_error, sizeof nv_error, "NVRTC not found (%s): %s; install "
             "the CUDA toolkit or set CUGRAPH_LUA_LIBNVRTC",
             env && *env ? env : "libnvrtc.so", err);
    return;
  }
#define NV_SYM(f) \
  if ((sym = dlsym(h, #f)) != NULL) memcpy(&nv.f, &sym, sizeof nv.f); \
  else if (!missing) missing = #f;
  NV_FUNCS(NV_SYM)
#undef NV_SYM
  if (missing) {
    dlclose(h);
    snprintf(nv_error, sizeof nv_error, "NVRTC library %s lacks %s",
             env && *env ? env : "libnvrtc", missing);
    return;
  }
  r = nv.nvrtcVersion(&nv_major, &nv_minor);
  if (r != NVRTC_SUCCESS) {
    snprintf(nv_error, sizeof nv_error, "nvrtcVersion failed: %s",
             nv.nvrtcGetErrorString(r));
    dlclose(h);
  } /* the library stays open for the life of the process */
}

/* Loads NVRTC once per process; returns why it is unusable, or NULL. */
static const char *nv_try_open(void) {
  pthread_mutex_lock(&nv_lock);
  if (!nv_tried) nv_load();
  nv_tried = 1;
  pthread_mutex_unlock(&nv_lock);
  return nv_error[0] ? nv_error : NULL;
}

/* The same, raising why at every call. */
static void nv_open(lua_State *L) {
  if (nv_try_open()) luaL_error(L, "%s", nv_error);
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

/* ---- cache ------------------------------------------------------------ */

/* Two unrelated 64-bit lanes, FNV-1a and multiply/xorshift: a 128-bit key
   that no accidental pair of inputs shares. */
typedef struct hash { uint64_t a, b; } hash;
#define HASH_INIT {0xcbf29ce484222325u, 0x6a09e667f3bcc909u}

static void hash_bytes(hash *h, const void *p, size_t n) {
  const unsigned char *s = p;
  size_t i;
  for (i = 0; i < n; i++) {
    h->a = (h->a ^ s[i]) * 0x100000001b3u;
    h->b = (h->b ^ s[i]) * 0x9e3779b97f4a7c15u;
    h->b ^= h->b >> 29;
  }
}

/* Length-prefixed, so a sequence of fields hashes unambiguously. */
static void hash_field(hash *h, const char *s, size_t n) {
  unsigned char len[8];
  int i;
  for (i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)n >> (8 * i));
  hash_bytes(h, len, sizeof len);
  hash_bytes(h, s, n);
}

/* Writes the cache directory into out, creating it (and its parents) mode
   0700 as needed: $CUGRAPH_LUA_CACHE_DIR, else $XDG_CACHE_HOME/cugraph-lua,
   else $HOME/.cache/cugraph-lua; returns 0 when it is not usable. */
static int cache_dir(char *out, size_t n) {
  const char *own = getenv("CUGRAPH_LUA_CACHE_DIR");
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  struct stat st;
  char *p;
  int w;
  if (own && *own)
    w = snprintf(out, n, "%s", own);
  else if (xdg && xdg[0] == '/') /* XDG: relative paths are invalid */
    w = snprintf(out, n, "%s/cugraph-lua", xdg);
  else if (home && home[0] == '/')
    w = snprintf(out, n, "%s/.cache/cugraph-lua", home);
  else
    return 0;
  if (w <= 0 || (size_t)w >= n) return 0;
  for (p = out + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    mkdir(out, 0700); /* failures show in the stat below */
    *p = '/';
  }
  mkdir(out, 0700);
  return stat(out, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The size cap: $CUGRAPH_LUA_CACHE_SIZE, bytes with an optional K, M or G
   (powers of 1024); unset or malformed: 256M. */
static uint64_t cache_cap(void) {
  const char *s = getenv("CUGRAPH_LUA_CACHE_SIZE");
  char *end;
  unsigned long long v;
  int shift = 0;
  if (!s || !*s || *s < '0' || *s > '9') return CACHE_CAP;
  errno = 0;
  v = strtoull(s, &end, 10);
  if (*end == 'K' || *end == 'k') shift = 10;
  else if (*end == 'M' || *end == 'm') shift = 20;
  else if (*end == 'G' || *end == 'g') shift = 30;
  if (errno || end[shift != 0] != '\0' || v > (UINT64_MAX >> shift))
    return CACHE_CAP;
  return (uint64_t)v << shift;
}

static size_t read_all(int fd, char *buf, size_t n) {
  size_t got = 0;
  ssize_t r;
  while (got < n) {
    r = read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  return got;
}

static int write_all(int fd, const char *buf, size_t n) {
  ssize_t r;
  while (n > 0) {
    r = write(fd, buf, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;
    buf += r;
    n -= (size_t)r;
  }
  return 1;
}

/* Entry: "<magic> <key> <payload length> <checksum>\n" then the payload:
   "<ptx length> <cubin length>\n", the PTX, the cubin, the types text. */
static int cache_header(char *out, size_t n, const char *key, const char *data,
                        size_t len) {
  hash h = HASH_INIT;
  hash_bytes(&h, data, len);
  return snprintf(out, n, "%s %s %zu %016llx\n", CACHE_MAGIC, key, len,
                  (unsigned long long)(h.a ^ h.b));
}

/* Pushes the payload of the entry at path and returns 1, or returns 0 with
   nothing pushed when the entry is absent or fails any check. A hit makes
   the entry the most recently used (its times are the LRU clock). */
static int cache_get(lua_State *L, const char *path, const char *key) {
  struct stat st;
  char *buf, *p, want[128];
  size_t size, got = 0, hdr, len = 0, skip = strlen(CACHE_MAGIC) + 34;
  int fd;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > CACHE_MAX)
    return 0;
  size = (size_t)st.st_size;
  buf = lua_newuserdatauv(L, size + 1, 0); /* +1: sees a file that grew */
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    got = read_all(fd, buf, size + 1);
    close(fd);
  }
  buf[got < size ? got : size] = '\0';
  p = memchr(buf, '\n', got);
  if (got != size || !p) goto miss;
  hdr = (size_t)(p - buf) + 1;
  /* the length follows "<magic> <32 hex> "; all of it is checked below */
  if (hdr > 100 || hdr <= skip) goto miss;
  for (p = buf + skip; *p >= '0' && *p <= '9' && len <= size; p++)
    len = len * 10 + (size_t)(*p - '0');
  if (len != size - hdr ||
      (size_t)cache_header(want, sizeof want, key, buf + hdr, len) != hdr ||
      memcmp(want, buf, hdr))
    goto miss;
  lua_pushlstring(L, buf + hdr, len);
  lua_remove(L, -2);
  utimensat(AT_FDCWD, path, NULL, 0);
  return 1;
miss:
  lua_pop(L, 1);
  return 0;
}

typedef struct cache_file {
  struct timespec used;
  uint64_t size;
  char name[40];
} cache_file;

static int older(const void *a, const void *b) {
  const struct timespec *x = &((const cache_file *)a)->used;
  const struct timespec *y = &((const cache_file *)b)->used;
  if (x->tv_sec != y->tv_sec) return x->tv_sec < y->tv_sec ? -1 : 1;
  return x->tv_nsec < y->tv_nsec ? -1 : x->tv_nsec > y->tv_nsec;
}

/* An entry's file name: 32 hex digits and the extension (or ".ptx", the
   entries of the first format, left to age out). */
static int entry_name(const char *s) {
  size_t n = strlen(s);
  return n > 32 && strspn(s, "0123456789abcdef") == 32 &&
         (!strcmp(s + 32, CACHE_EXT) || !strcmp(s + 32, ".ptx"));
}

/* Removes the least recently used entries until the rest fit in cap. No
   Lua call: the list is plain malloc'd memory. */
static void cache_evict(const char *dir, uint64_t cap) {
  DIR *d = opendir(dir);
  struct dirent *de;
  struct stat st;
  cache_file *v = NULL, *grown;
  size_t n = 0, c = 0, i;
  uint64_t total = 0;
  char path[PATHLEN];
  if (!d) return;
  while ((de = readdir(d)) != NULL) {
    if (!entry_name(de->d_name) ||
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= PATHLEN ||
        stat(path, &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    if (n == c) {
      c = c ? 2 * c : 64;
      if (!(grown = realloc(v, c * sizeof *v))) break;
      v = grown;
    }
    v[n].used = st.st_mtim;
    v[n].size = (uint64_t)st.st_size;
    snprintf(v[n].name, sizeof v[n].name, "%s", de->d_name);
    total += v[n++].size;
  }
  closedir(d);
  if (total > cap) qsort(v, n, sizeof *v, older);
  for (i = 0; i < n && total > cap; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, v[i].name);
    if (unlink(path) == 0) total -= v[i].size;
  }
  free(v);
}

/* Writes the entry to a private temporary file, then renames it into place,
   so readers, in any thread or process, see a whole entry or none. The
   temporary name holds the pid and a hash of the time and the thread, so
   concurrent writers do not share one; O_EXCL turns a clash into one lost
   write. Failures leave no file behind. Then the cache is brought under
   its cap. */
static void cache_put(const char *dir, const char *key, const char *data,
                      size_t len) {
  char path[PATHLEN], tmp[PATHLEN], hdr[128];
  struct timespec ts;
  hash h = HASH_INIT;
  pthread_t self = pthread_self();
  int fd, n, ok;
  clock_gettime(CLOCK_REALTIME, &ts);
  hash_bytes(&h, &ts, sizeof ts);
  hash_bytes(&h, &self, sizeof self);
  if (snprintf(path, sizeof path, "%s/%s" CACHE_EXT, dir, key) >= PATHLEN ||
      snprintf(tmp, sizeof tmp, "%s/%s" CACHE_EXT ".tmp.%ld.%016llx", dir, key,
               (long)getpid(), (unsigned long long)(h.a ^ h.b)) >= PATHLEN)
    return;
  n = cache_header(hdr, sizeof hdr, key, data, len);
  fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return;
  ok = write_all(fd, hdr, (size_t)n) && write_all(fd, data, len);
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) unlink(tmp);
  cache_evict(dir, cache_cap());
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
  hash h = HASH_INIT;
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
  hash_field(&h, CACHE_MAGIC, strlen(CACHE_MAGIC));
  snprintf(ver, sizeof ver, "%d.%d", nv_major, nv_minor);
  hash_field(&h, ver, strlen(ver));
  for (i = 1; i <= n; i++) {
    lua_rawgeti(L, LIST, i);
    s = lua_tolstring(L, -1, &len);
    hash_field(&h, s, len);
    lua_pop(L, 1);
  }
  s = lua_tolstring(L, NAME, &len);
  hash_field(&h, s, len);
  s = lua_tolstring(L, SRC, &len);
  hash_field(&h, s, len);
  snprintf(key, sizeof key, "%016llx%016llx", (unsigned long long)h.a,
           (unsigned long long)h.b);

  have_dir = cache && cache_dir(dir, sizeof dir);
  if (have_dir) {
    snprintf(path, sizeof path, "%s/%s" CACHE_EXT, dir, key);
    if (cache_get(L, path, key)) {
      if (unpack(L, -1)) { /* ptx, log, cubin, types */
        lua_pushliteral(L, "");
        lua_insert(L, -3);
        return 4;
      }
      lua_pop(L, 1);
    }
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
    cache_put(dir, key, s, len);
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
  if (cache_dir(dir, sizeof dir)) lua_pushstring(L, dir);
  else lua_pushnil(L);
  lua_pushinteger(L, (lua_Integer)cache_cap());
  return 2;
}

/* core.nvrtc_version() -> "13.0", or nil and why NVRTC is unusable */
static int l_nvrtc_version(lua_State *L) {
  if (nv_try_open()) {
    lua_pushnil(L);
    lua_pushstring(L, nv_error);
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
