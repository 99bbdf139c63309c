/* bench-ref: the C reference of bench/bench.lua. Each case makes the driver
   calls the binding makes for the same Lua loop, directly. libcuda is
   opened with dlopen (CUGRAPH_LUA_LIBCUDA overrides libcuda.so.1, and
   CUGRAPH_LUA_DEVICE picks the device, as in the binding), NVRTC likewise.

     bench-ref --case NAME --ptx FILE --n N --repeats R --warmup W
     bench-ref --case compile --source FILE --arch SM --n N --repeats R
               --warmup W
         prints "NAME MICROSECONDS": wall time per iteration of the loop
         (N iterations, then cuStreamSynchronize), the median of R timed
         runs after W untimed ones. NAME is eager, graph1, graph10,
         graph100, scalar, capture or compile.
     bench-ref --cold --ptx FILE
         process start to the first kernel result: inc_i32 launched once
         and read back; exits 1 unless the result is right. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <cuda.h>
#include <nvrtc.h>

#define STR(x) #x
#define XSTR(x) STR(x)

/* Found under the versioned names cuda.h maps the plain names to
   (cuMemAlloc is cuMemAlloc_v2, cuGraphInstantiate is
   cuGraphInstantiateWithFlags). */
#define DRIVER(X) \
  X(cuInit) X(cuGetErrorName) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) \
  X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuStreamCreate) \
  X(cuStreamDestroy) X(cuStreamSynchronize) X(cuMemAlloc) X(cuMemFree) \
  X(cuMemsetD32Async) X(cuMemcpyDtoHAsync) X(cuModuleLoadDataEx) \
  X(cuModuleUnload) X(cuModuleGetFunction) X(cuLaunchKernel) \
  X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphInstantiate) \
  X(cuGraphLaunch) X(cuGraphExecDestroy) X(cuGraphDestroy)

#define NVRTC(X) \
  X(nvrtcGetErrorString) X(nvrtcCreateProgram) X(nvrtcCompileProgram) \
  X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcGetPTXSize) \
  X(nvrtcGetPTX) X(nvrtcDestroyProgram)

#define FIELD(f) __typeof__(f) *f;
static struct { DRIVER(FIELD) } cu;
static struct { NVRTC(FIELD) } nv;
#undef FIELD

enum { N = 256,         /* elements of each buffer: one block of N threads */
       MAX_REPEATS = 1000 };

_Noreturn static void fail(const char *what, const char *why) {
  fprintf(stderr, "bench-ref: %s: %s\n", what, why);
  exit(1);
}

/* Every call is checked, as the binding checks it. */
#define CU(fn, ...) cu_check(#fn, cu.fn(__VA_ARGS__))
#define NV(fn, ...) nv_check(#fn, nv.fn(__VA_ARGS__))

static void cu_check(const char *api, CUresult r) {
  const char *name = NULL;
  if (r == CUDA_SUCCESS) return;
  if (cu.cuGetErrorName(r, &name) != CUDA_SUCCESS || !name) name = "error";
  fail(api, name);
}

static void nv_check(const char *api, nvrtcResult r) {
  if (r != NVRTC_SUCCESS) fail(api, nv.nvrtcGetErrorString(r));
}

static void *open_lib(const char *name) {
  return dlopen(name, RTLD_NOW | RTLD_LOCAL);
}

static void load_driver(void) {
  const char *name = getenv("CUGRAPH_LUA_LIBCUDA");
  void *lib, *p;
  if (!name || !*name) name = "libcuda.so.1";
  if (!(lib = open_lib(name))) fail(name, dlerror());
#define RESOLVE(f) \
  if (!(p = dlsym(lib, XSTR(f)))) fail(name, "missing " XSTR(f)); \
  memcpy(&cu.f, &p, sizeof p);
  DRIVER(RESOLVE)
#undef RESOLVE
}

/* The binding's search: CUGRAPH_LUA_LIBNVRTC, else the sonames, else
   $CUDA_HOME/lib64, else /usr/local/cuda/lib64. */
static void load_nvrtc(void) {
  static const char *const names[] = {
    "libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"
  };
  const char *env = getenv("CUGRAPH_LUA_LIBNVRTC");
  const char *home = getenv("CUDA_HOME");
  char path[4096];
  void *lib = NULL, *p;
  if (env && *env) {
    lib = open_lib(env);
  } else {
    for (size_t i = 0; !lib && i < sizeof names / sizeof *names; i++)
      lib = open_lib(names[i]);
    if (!lib && home && *home &&
        snprintf(path, sizeof path, "%s/lib64/libnvrtc.so", home) <
          (int)sizeof path)
      lib = open_lib(path);
    if (!lib) lib = open_lib("/usr/local/cuda/lib64/libnvrtc.so");
  }
  if (!lib) fail("NVRTC not found", dlerror());
#define RESOLVE(f) \
  if (!(p = dlsym(lib, #f))) fail("NVRTC", "missing " #f); \
  memcpy(&nv.f, &p, sizeof p);
  NVRTC(RESOLVE)
#undef RESOLVE
}

/* The whole file, NUL-terminated. */
static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  char *buf;
  long len;
  if (!f || fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 ||
      fseek(f, 0, SEEK_SET))
    fail(path, "cannot read");
  if (!(buf = malloc((size_t)len + 1))) fail(path, "out of memory");
  if (fread(buf, 1, (size_t)len, f) != (size_t)len) fail(path, "cannot read");
  buf[len] = '\0';
  fclose(f);
  return buf;
}

/* -- the driver state of a run ------------------------------------------- */

static struct {
  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUstream s;           /* NULL for compile: nothing to synchronize */
  CUfunction inc, mark;
  CUdeviceptr x, out, pos; /* i32[N], u32[N], the scalar (8 bytes) */
  int n;                /* N, the kernels' n argument */
  void *inc_args[2], *mark_args[3];
  CUgraph graph;
  CUgraphExec exec;
} b;

/* The primary context of the device, current, as the binding uses it. */
static void start(void) {
  const char *ord = getenv("CUGRAPH_LUA_DEVICE");
  load_driver();
  CU(cuInit, 0);
  CU(cuDeviceGet, &b.dev, ord && *ord ? atoi(ord) : 0);
  CU(cuDevicePrimaryCtxRetain, &b.ctx, b.dev);
  CU(cuCtxSetCurrent, b.ctx);
}

static void load(const char *ptx) {
  char *img = slurp(ptx);
  CU(cuModuleLoadDataEx, &b.mod, img, 0, NULL, NULL);
  free(img);
  CU(cuModuleGetFunction, &b.inc, b.mod, "inc_i32");
  b.n = N;
  b.inc_args[0] = &b.x;
  b.inc_args[1] = &b.n;
}

static void setup(const char *ptx) {
  start();
  load(ptx);
  CU(cuModuleGetFunction, &b.mark, b.mod, "mark_u32");
  b.mark_args[0] = &b.out;
  b.mark_args[1] = &b.pos;
  b.mark_args[2] = &b.n;
  CU(cuStreamCreate, &b.s, CU_STREAM_NON_BLOCKING);
  CU(cuMemAlloc, &b.x, N * sizeof(int));
  CU(cuMemAlloc, &b.out, N * sizeof(unsigned));
  CU(cuMemAlloc, &b.pos, 8);
  CU(cuMemsetD32Async, b.x, 0, N, b.s);
  CU(cuMemsetD32Async, b.out, 0, N, b.s);
  CU(cuMemsetD32Async, b.pos, 0, 2, b.s);
  CU(cuStreamSynchronize, b.s);
}

static void teardown(void) {
  if (b.exec) CU(cuGraphExecDestroy, b.exec);
  if (b.graph) CU(cuGraphDestroy, b.graph);
  CU(cuMemFree, b.x);
  if (b.out) CU(cuMemFree, b.out);
  if (b.pos) CU(cuMemFree, b.pos);
  CU(cuStreamDestroy, b.s);
  CU(cuModuleUnload, b.mod);
  CU(cuDevicePrimaryCtxRelease, b.dev);
}

/* Element i of the device array at p (4-byte elements). */
static unsigned peek(CUdeviceptr p, int i) {
  unsigned v = 0;
  CU(cuMemcpyDtoHAsync, &v, p + (CUdeviceptr)i * 4, 4, b.s);
  CU(cuStreamSynchronize, b.s);
  return v;
}

/* -- the loops: each is the Lua loop of the case of the same name --------- */

static void launch_inc(void) {
  CU(cuLaunchKernel, b.inc, 1, 1, 1, N, 1, 1, 0, b.s, b.inc_args, NULL);
}

/* k launches of inc_i32, then mark_u32 reading the scalar when mark. */
static void record(int k, int mark) {
  for (int i = 0; i < k; i++) launch_inc();
  if (mark)
    CU(cuLaunchKernel, b.mark, 1, 1, 1, 1, 1, 1, 0, b.s, b.mark_args, NULL);
}

/* The case's graph, captured as s:capture(fn) captures it. */
static void build(int k, int mark) {
  CU(cuStreamBeginCapture, b.s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  record(k, mark);
  CU(cuStreamEndCapture, b.s, &b.graph);
  CU(cuGraphInstantiate, &b.exec, b.graph, 0);
}

/* for i = 1, n do inc:launch(s, 1, 256, x, 256) end */
static void eager(long n) {
  for (long i = 0; i < n; i++) launch_inc();
}

/* for i = 1, n do g:launch() end */
static void replay(long n) {
  for (long i = 0; i < n; i++) CU(cuGraphLaunch, b.exec, b.s);
}

/* for i = 1, n do pos:set(i); g:launch() end: a pending u32 scalar is
   written with cuMemsetD32Async on the launch stream (cg_scalar_flush). */
static void scalar(long n) {
  for (long i = 1; i <= n; i++) {
    CU(cuMemsetD32Async, b.pos, (unsigned)i, 1, b.s);
    CU(cuGraphLaunch, b.exec, b.s);
  }
}

/* for i = 1, n do local g = s:capture(fn); g:free() end, fn: 10 launches */
static void capture(long n) {
  for (long i = 0; i < n; i++) {
    CUgraph g;
    CUgraphExec e;
    CU(cuStreamBeginCapture, b.s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    record(10, 0);
    CU(cuStreamEndCapture, b.s, &g);
    CU(cuGraphInstantiate, &e, g, 0);
    CU(cuGraphExecDestroy, e);
    CU(cuGraphDestroy, g);
  }
}

/* NVRTC: the source and options cuda.ptx(source, {arch = SM, cache =
   false}) compiles with: -arch=compute_SM, then the toolkit's include. */
static struct {
  const char *src;
  const char *opts[2];
  int nopts;
  char arch[32], include[4200];
} cc;

static void compile_setup(const char *source, int arch) {
  const char *home = getenv("CUDA_HOME");
  struct stat st;
  int w;
  load_nvrtc();
  cc.src = slurp(source);
  snprintf(cc.arch, sizeof cc.arch, "-arch=compute_%d", arch);
  cc.opts[cc.nopts++] = cc.arch;
  w = home && *home
    ? snprintf(cc.include, sizeof cc.include, "-I%s/include", home) : -1;
  if (w > 0 && (size_t)w < sizeof cc.include && stat(cc.include + 2, &st) == 0
      && S_ISDIR(st.st_mode)) {
    cc.opts[cc.nopts++] = cc.include;
  } else if (stat("/usr/local/cuda/include", &st) == 0 && S_ISDIR(st.st_mode)) {
    snprintf(cc.include, sizeof cc.include, "-I/usr/local/cuda/include");
    cc.opts[cc.nopts++] = cc.include;
  }
}

static void compile(long n) {
  for (long i = 0; i < n; i++) {
    nvrtcProgram p;
    size_t size;
    char *ptx;
    NV(nvrtcCreateProgram, &p, cc.src, "kernel.cu", 0, NULL, NULL);
    if (nv.nvrtcCompileProgram(p, cc.nopts, cc.opts) != NVRTC_SUCCESS) {
      NV(nvrtcGetProgramLogSize, p, &size);
      if (!(ptx = malloc(size))) fail("compile", "out of memory");
      NV(nvrtcGetProgramLog, p, ptx);
      fail("nvrtcCompileProgram", ptx);
    }
    NV(nvrtcGetPTXSize, p, &size);
    if (size < 2 || !(ptx = malloc(size))) fail("compile", "no PTX");
    NV(nvrtcGetPTX, p, ptx);
    free(ptx);
    NV(nvrtcDestroyProgram, &p);
  }
}

/* -- timing --------------------------------------------------------------- */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Microseconds per iteration of loop(n), its final synchronize included. */
static double timed(void (*loop)(long), long n) {
  double t0 = now();
  loop(n);
  if (b.s) CU(cuStreamSynchronize, b.s);
  return (now() - t0) * 1e6 / (double)n;
}

static int cmp(const void *pa, const void *pb) {
  double a = *(const double *)pa, c = *(const double *)pb;
  return (a > c) - (a < c);
}

/* The median of `repeats` timed runs after `warmup` untimed ones. */
static double measure(void (*loop)(long), long n, int repeats, int warmup) {
  static double v[MAX_REPEATS];
  for (int i = 0; i < warmup; i++) timed(loop, n);
  for (int i = 0; i < repeats; i++) v[i] = timed(loop, n);
  qsort(v, (size_t)repeats, sizeof *v, cmp);
  return repeats % 2 ? v[repeats / 2]
                     : (v[repeats / 2 - 1] + v[repeats / 2]) / 2;
}

/* -- the command line ----------------------------------------------------- */

_Noreturn static void usage(void) {
  fputs("usage: bench-ref --case NAME --ptx FILE --n N --repeats R "
        "--warmup W\n"
        "       bench-ref --case compile --source FILE --arch SM --n N "
        "--repeats R --warmup W\n"
        "       bench-ref --cold --ptx FILE\n", stderr);
  exit(2);
}

static long number(const char *s, long lo, long hi) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v < lo || v > hi) usage();
  return v;
}

/* Process start to the first kernel result, as bench/cold.lua does it. */
static int cold(const char *ptx) {
  start();
  load(ptx);
  CU(cuMemAlloc, &b.x, N * sizeof(int));
  CU(cuStreamCreate, &b.s, CU_STREAM_NON_BLOCKING);
  CU(cuMemsetD32Async, b.x, 0, N, b.s);
  launch_inc();
  if (peek(b.x, 0) != 1) fail("cold", "inc_i32 gave a wrong result");
  teardown();
  return 0;
}

/* The GPU cases: the loop, the inc_i32 nodes of the case's graph (0: no
   graph), whether mark_u32 ends it, and inc_i32 launches run per iteration. */
static const struct {
  const char *name;
  void (*loop)(long);
  int nodes, mark, incs;
} cases[] = {
  {"eager", eager, 0, 0, 1},       {"graph1", replay, 1, 0, 1},
  {"graph10", replay, 10, 0, 10},  {"graph100", replay, 100, 0, 100},
  {"scalar", scalar, 9, 1, 9},     {"capture", capture, 0, 0, 0},
};

/* Checks that the work of case c ran: x[0] counts every inc_i32, and the
   graph read each value of the scalar (the first, 1, marks out[1]; the last
   is n). runs: timed and untimed loops of n iterations. */
static void verify(size_t c, long n, long runs) {
  if (peek(b.x, 0) != (unsigned)(cases[c].incs * runs * n))
    fail(cases[c].name, "x[0] is not the number of inc_i32 launches");
  if (cases[c].mark && (peek(b.pos, 0) != (unsigned)n || peek(b.out, 1) != 2))
    fail(cases[c].name, "the graph did not see the scalar's values");
}

static size_t find_case(const char *name) {
  size_t c = 0;
  while (c < sizeof cases / sizeof *cases && strcmp(cases[c].name, name)) c++;
  return c;
}

#ifdef BENCH_REF_MODULE
#include <lua.h>
#include <lauxlib.h>

/* ref.run(case, ptx, n, warmup) -> microseconds per iteration: the case's
   loop run in this process (its own module, stream and buffers in the same
   primary context), so that Lua and C see the same GPU state. */
static int lrun(lua_State *L) {
  size_t c = find_case(luaL_checkstring(L, 1));
  const char *ptx = luaL_checkstring(L, 2);
  long n = (long)luaL_checkinteger(L, 3), warmup = (long)luaL_checkinteger(L, 4);
  luaL_argcheck(L, c < sizeof cases / sizeof *cases, 1, "no such case");
  setup(ptx);
  if (cases[c].nodes) build(cases[c].nodes, cases[c].mark);
  for (long i = 0; i < warmup; i++) timed(cases[c].loop, n);
  double us = timed(cases[c].loop, n);
  verify(c, n, warmup + 1);
  teardown();
  memset(&b, 0, sizeof b);
  lua_pushnumber(L, us);
  return 1;
}

int luaopen_ref(lua_State *L);
int luaopen_ref(lua_State *L) {
  lua_newtable(L);
  lua_pushcfunction(L, lrun);
  lua_setfield(L, -2, "run");
  return 1;
}
#else
int main(int argc, char **argv) {
  const char *name = NULL, *ptx = NULL, *source = NULL;
  long n = 0, arch = 0, repeats = 0, warmup = -1;
  int is_cold = 0;
  size_t c;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--cold")) { is_cold = 1; continue; }
    if (!v) usage();
    i++;
    if (!strcmp(a, "--case")) name = v;
    else if (!strcmp(a, "--ptx")) ptx = v;
    else if (!strcmp(a, "--source")) source = v;
    else if (!strcmp(a, "--arch")) arch = number(v, 1, 9999);
    else if (!strcmp(a, "--n")) n = number(v, 1, 1000000000);
    else if (!strcmp(a, "--repeats")) repeats = number(v, 1, MAX_REPEATS);
    else if (!strcmp(a, "--warmup")) warmup = number(v, 0, 1000);
    else usage();
  }
  if (is_cold) {
    if (!ptx || name) usage();
    return cold(ptx);
  }
  if (!name || !n || !repeats || warmup < 0) usage();
  if (!strcmp(name, "compile")) {
    if (!source || !arch) usage();
    compile_setup(source, (int)arch);
    printf("compile %.17g\n", measure(compile, n, (int)repeats, (int)warmup));
    return 0;
  }
  c = find_case(name);
  if (!ptx || c == sizeof cases / sizeof *cases) usage();
  setup(ptx);
  if (cases[c].nodes) build(cases[c].nodes, cases[c].mark);
  printf("%s %.17g\n", name, measure(cases[c].loop, n, (int)repeats,
                                     (int)warmup));
  verify(c, n, warmup + repeats);
  teardown();
  return 0;
}
#endif
