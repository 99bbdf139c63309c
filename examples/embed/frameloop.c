/* frameloop: an engine's frame loop, standing in for a game engine that
   replays a script's frame as one CUDA graph every frame.

   The engine owns two page-locked u64 counters and a stream and hands them
   to the script (cugraph_pushhostbuffer, cugraph_pushstream), which
   captures a 50-node frame graph (examples/embed/frameloop.lua): wait
   until the engine's "go" counter reaches the frame number, 48 kernels,
   write the frame number to the "done" counter. Each frame the engine
   waits until its frame before last is done (its own fence, a plain load
   of "done"), says the frame may start (a plain store to "go"), and replays
   the graph: from C (cugraph_scalar_set of the frame number, then
   cugraph_graph_launch) for the first half of the frames, through the
   script (frame(f): value:set(f); graph:launch()) for the second.

   It reports, for each way, the host time of the runtime's calls a frame
   (p50, p99, p99.9) and the bytes allocated a frame while they run: by
   Lua (the state's allocator) and by the runtime's C code (malloc, calloc
   and realloc called from this program, which links the runtime, on this
   thread), apart from the driver's own (libcuda's, the simulator's), which
   it counts too (not built with AddressSanitizer, which owns malloc). It
   exits 0 when every frame ran, the counters and the kernels' work add
   up, and the runtime and Lua allocated 0 bytes a frame.

     frameloop [frames [lua_dir [script]]]     (10000 frames)

   libcuda is opened with dlopen, as the runtime opens it
   (CUGRAPH_LUA_LIBCUDA names another: the test double, the simulator). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include "cugraph.h"

#ifndef CUGRAPH_LUA_DIR
#define CUGRAPH_LUA_DIR "lua"
#endif
#ifndef FRAMELOOP_SCRIPT
#define FRAMELOOP_SCRIPT "examples/embed/frameloop.lua"
#endif

/* -- counting allocations -------------------------------------------------- */

/* While counting is set on a thread, malloc, calloc and realloc called
   there are counted: from this program's code (the runtime is linked into
   it) in mine, from anywhere else (the driver, libc) in theirs. glibc's
   own allocator does the work. */
static _Thread_local int counting;
static size_t mine_bytes, mine_calls, theirs_bytes, theirs_calls;
#ifdef __SANITIZE_ADDRESS__ /* AddressSanitizer owns malloc: not counted */
enum { C_COUNTED = 0 };
static void *raw_realloc(void *p, size_t n) { return realloc(p, n); }
#else
enum { C_COUNTED = 1 };
extern char __executable_start, etext; /* this program's code */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
static void *raw_realloc(void *p, size_t n) { return __libc_realloc(p, n); }

static void count(void *caller, size_t n) {
  if ((char *)caller >= &__executable_start && (char *)caller < &etext) {
    mine_bytes += n;
    mine_calls++;
  } else {
    theirs_bytes += n;
    theirs_calls++;
  }
}

void *malloc(size_t n) {
  if (counting) count(__builtin_return_address(0), n);
  return __libc_malloc(n);
}

void *calloc(size_t n, size_t size) {
  if (counting) count(__builtin_return_address(0), n * size);
  return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n) {
  if (counting) count(__builtin_return_address(0), n);
  return __libc_realloc(p, n);
}
#endif

/* The state's allocator: Lua's bytes, counted while counting is set. */
static size_t lua_bytes, lua_calls;

static void *lua_alloc(void *ud, void *p, size_t osize, size_t nsize) {
  (void)ud;
  if (!nsize) {
    free(p);
    return NULL;
  }
  if (counting && nsize > (p ? osize : 0)) {
    lua_bytes += nsize;
    lua_calls++;
  }
  return raw_realloc(p, nsize);
}

/* -- the driver, the engine's own calls ------------------------------------ */

#define ENGINE_FUNCS(X) \
  X(cuInit) X(cuGetErrorName) X(cuDeviceGet) X(cuDeviceGetName) \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) \
  X(cuCtxSetCurrent) X(cuMemHostAlloc) X(cuMemFreeHost) X(cuStreamCreate) \
  X(cuStreamDestroy) X(cuStreamSynchronize)

#define FIELD(f) __typeof__(f) *f;
static struct { ENGINE_FUNCS(FIELD) } cu;
#undef FIELD
#define STR(x) #x
#define XSTR(x) STR(x)

static int load_driver(void) {
  const char *name = getenv("CUGRAPH_LUA_LIBCUDA");
  if (!name || !*name) name = "libcuda.so.1";
  void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "frameloop: no CUDA driver (%s): %s\n", name, dlerror());
    return 0;
  }
  void *p;
#define RESOLVE(f) \
  if (!(p = dlsym(lib, XSTR(f)))) { \
    fprintf(stderr, "frameloop: %s lacks %s\n", name, XSTR(f)); \
    return 0; \
  } \
  memcpy(&cu.f, &p, sizeof p);
  ENGINE_FUNCS(RESOLVE)
#undef RESOLVE
  return 1;
}

static int check(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS) return 1;
  const char *name = NULL;
  if (cu.cuGetErrorName(r, &name) != CUDA_SUCCESS || !name) name = "?";
  fprintf(stderr, "frameloop: %s: %s (%d)\n", what, name, (int)r);
  return 0;
}
#define CHECK(call) check((call), #call)

/* -- the script ------------------------------------------------------------ */

static int traceback(lua_State *L) {
  luaL_traceback(L, L, luaL_tolstring(L, 1, NULL), 1);
  return 1;
}

/* Calls the function below its nargs arguments, nres results kept;
   prints the error. */
static int pcall(lua_State *L, int nargs, int nres, const char *what) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, traceback);
  lua_insert(L, base);
  int ok = lua_pcall(L, nargs, nres, base) == LUA_OK;
  if (!ok) {
    fprintf(stderr, "frameloop: %s: %s\n", what, lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  lua_remove(L, base);
  return ok;
}

struct engine {
  CUstream stream;
  uint64_t *fences;     /* [0] go, [1] done: page-locked, loaded and
                           stored atomically (the device writes done) */
  cugraph_graph *graph;
  cugraph_scalar *value;
};

/* Under pcall: the engine's counters and stream become the script's
   globals go, done and stream; then the script runs, and C takes its graph
   and its frame number's scalar. */
static int setup(lua_State *L) {
  struct engine *e = lua_touserdata(L, 1);
  const char *script = lua_tostring(L, 2);
  cugraph_pushhostbuffer(L, &e->fences[0], "u64", 1);
  lua_setglobal(L, "go");
  cugraph_pushhostbuffer(L, &e->fences[1], "u64", 1);
  lua_setglobal(L, "done");
  cugraph_pushstream(L, e->stream);
  lua_setglobal(L, "stream");
  if (luaL_dofile(L, script) != LUA_OK) return lua_error(L);
  lua_getglobal(L, "graph");
  e->graph = cugraph_tograph(L, -1);
  lua_getglobal(L, "value");
  e->value = cugraph_toscalar(L, -1);
  return 0;
}

/* -- the loop -------------------------------------------------------------- */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The engine's wait for its frame before last: done must reach f - 2. */
static int paced(struct engine *e, uint64_t f) {
  double end = now() + 10;
  while (__atomic_load_n(&e->fences[1], __ATOMIC_ACQUIRE) + 2 < f)
    if (now() > end) {
      fprintf(stderr, "frameloop: frame %llu: the frame before last never "
              "finished\n", (unsigned long long)f - 2);
      return 0;
    }
  return 1;
}

/* Frames first .. last, replayed from C (by_lua 0) or by the script;
   their host times (seconds) into t. Counts allocations meanwhile, after
   the first frame: a graph's first launch may do work of its own once
   (with an NVTX tool attached, the trace names its nodes). */
static int frames(lua_State *L, struct engine *e, uint64_t first,
                  uint64_t last, int by_lua, double *t) {
  int ok = 1;
  for (uint64_t f = first; ok && f <= last; f++) {
    if (!(ok = paced(e, f))) break;
    __atomic_store_n(&e->fences[0], f, __ATOMIC_RELEASE); /* go */
    counting = f > first;
    double t0 = now();
    if (by_lua) {
      lua_getglobal(L, "frame");
      lua_pushinteger(L, (lua_Integer)f);
      ok = lua_pcall(L, 1, 0, 0) == LUA_OK;
    } else {
      cugraph_scalar_set(e->value, (const void *)&f);
      ok = check(cugraph_graph_launch(e->graph, e->stream),
                 "cugraph_graph_launch");
    }
    t[f - first] = now() - t0;
    counting = 0;
    if (!ok && by_lua) {
      fprintf(stderr, "frameloop: frame(%llu): %s\n", (unsigned long long)f,
              lua_tostring(L, -1));
      lua_pop(L, 1);
    }
  }
  return ok;
}

/* Prints the way's figures; whether the runtime and Lua allocated
   nothing. */
static int report(const char *way, double *t, size_t n) {
  qsort(t, n, sizeof *t, by_value);
  size_t p99 = n * 99 / 100, p999 = n * 999 / 1000;
  printf("  %s: p50 %.2f us, p99 %.2f us, p99.9 %.2f us a frame; ", way,
         t[n / 2] * 1e6, t[p99 < n ? p99 : n - 1] * 1e6,
         t[p999 < n ? p999 : n - 1] * 1e6);
  size_t counted = n - 1; /* the frames after the first */
  double per = counted ? (double)counted : 1.0;
  if (C_COUNTED)
    printf("%.2f bytes a frame by the runtime, %.2f by Lua (%zu and %zu "
           "allocations in %zu frames after the first); the driver's own: "
           "%.2f bytes a frame\n", (double)mine_bytes / per,
           (double)lua_bytes / per, mine_calls, lua_calls, counted,
           (double)theirs_bytes / per);
  else
    printf("%.2f bytes a frame by Lua (%zu allocations in %zu frames after "
           "the first); C's not counted under AddressSanitizer\n",
           (double)lua_bytes / per, lua_calls, counted);
  int clean = mine_bytes == 0 && lua_bytes == 0;
  mine_bytes = mine_calls = theirs_bytes = theirs_calls = 0;
  lua_bytes = lua_calls = 0;
  return clean;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? strtol(argv[1], NULL, 10) : 10000;
  const char *lua_dir = argc > 2 ? argv[2] : CUGRAPH_LUA_DIR;
  const char *script = argc > 3 ? argv[3] : FRAMELOOP_SCRIPT;
  if (n < 2 || n > 100000000) {
    fprintf(stderr, "usage: frameloop [frames (2 or more) [lua_dir [script]]]\n");
    return 2;
  }
  CUdevice dev;
  CUcontext ctx;
  char name[256];
  if (!load_driver() || !CHECK(cu.cuInit(0)) || !CHECK(cu.cuDeviceGet(&dev, 0)) ||
      !CHECK(cu.cuDeviceGetName(name, (int)sizeof name, dev)) ||
      !CHECK(cu.cuDevicePrimaryCtxRetain(&ctx, dev)))
    return 1;
  struct engine e = { 0 };
  void *fences = NULL;
  size_t half = (size_t)n / 2, rest = (size_t)n - half;
  double *t = malloc((size_t)n * sizeof *t);
  int ok = t && CHECK(cu.cuCtxSetCurrent(ctx)) &&
           CHECK(cu.cuMemHostAlloc(&fences, 2 * sizeof(uint64_t),
                                   CU_MEMHOSTALLOC_DEVICEMAP)) &&
           CHECK(cu.cuStreamCreate(&e.stream, CU_STREAM_NON_BLOCKING));
  lua_State *L = ok ? lua_newstate(lua_alloc, NULL) : NULL;
  if (ok && L) {
    memset(fences, 0, 2 * sizeof(uint64_t));
    e.fences = fences;
    luaL_openlibs(L);
    cugraph_openlibs(L, lua_dir);
    lua_pushcfunction(L, setup);
    lua_pushlightuserdata(L, &e);
    lua_pushstring(L, script);
    ok = pcall(L, 2, 0, "the script");
    lua_gc(L, LUA_GCCOLLECT);
    printf("frameloop: %ld frames of a 50-node frame graph on %s\n", n, name);
    ok = ok && frames(L, &e, 1, half, 0, t);
    int clean = ok && report("C replay (cugraph_scalar_set, "
                             "cugraph_graph_launch)", t, half);
    ok = ok && frames(L, &e, half + 1, (uint64_t)n, 1, t);
    clean = ok && report("Lua replay (value:set(f); graph:launch())", t,
                         rest) && clean;
    if (ok && !clean)
      fprintf(stderr, "frameloop: the runtime or Lua allocated in the "
              "frame loop\n");
    lua_getglobal(L, "check");
    lua_pushinteger(L, n);
    ok = ok && pcall(L, 1, 1, "check()");
    if (ok && lua_tointeger(L, -1) != 50) {
      fprintf(stderr, "frameloop: the frame graph has %d nodes, not 50\n",
              (int)lua_tointeger(L, -1));
      ok = 0;
    }
    ok = ok && clean;
    cugraph_graph_release(e.graph);
    cugraph_scalar_release(e.value);
    lua_close(L);
  } else {
    ok = 0;
  }
  if (e.stream) ok = CHECK(cu.cuStreamSynchronize(e.stream)) &&
                     CHECK(cu.cuStreamDestroy(e.stream)) && ok;
  if (fences) ok = CHECK(cu.cuMemFreeHost(fences)) && ok;
  cu.cuDevicePrimaryCtxRelease(dev);
  free(t);
  printf("frameloop: %s\n", ok ? "all checks passed" : "FAILED");
  return ok ? 0 : 1;
}
