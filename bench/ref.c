/* The C reference of bench/bench.lua: each case makes the driver calls the
   binding makes for the same Lua loop, directly. libcuda is opened with
   dlopen (CUGRAPH_LUA_LIBCUDA overrides libcuda.so.1, and
   CUGRAPH_LUA_DEVICE picks the device, as in the binding), NVRTC likewise.

   Built as the Lua module build/bench/ref.so (BENCH_REF_MODULE), which
   bench.lua calls for one short timed block at a time, interleaved with
   the Lua side's blocks in the same process and thread:

     ref.open(ptx, args_ptx)  the context, module, stream and buffers
     ref.setup(case, k [, source [, exec, stream, pos [, start, tol]]])
     ref.setup("rebind", k, nil, exec, stream, node, a, b)
     ref.setup("pinned" | "pageable", bytes)
                              case eager (inc_i32), args (argsK), replay
                              (the graph exec of k inc_i32 that Lua
                              captured, on its stream), scalar (the same,
                              9 inc_i32 and mark_u32 reading the scalar at
                              pos, set before each launch), while (the
                              same, a graph of one while node of k turns),
                              cg (the solver's host-driven loop: the exec
                              start, then exec and a read of the residual
                              at pos an iteration while it is above tol,
                              at most k), capture (k launches), compile
                              (NVRTC compiles of source for compute_k),
                              compile_sm (for sm_k, the cubin fetched too) or
                              rebind (the exec of k inc_i32 on x and one on
                              a or b: node's parameters switched to the
                              other buffer, then a launch unless k is 0),
                              pinned or pageable (a copy of bytes from
                              pinned or pageable host memory to a buffer,
                              then inc_i32), nop (nop launched as
                              inc_i32 is), eagerk (k launches of inc_i32)
                              or setnodes (the exec of k inc_i32 on a or
                              b, every node's parameters switched to the
                              other buffer, then a launch); x zeroed
     ref.setup("setnodes", k, nil, exec, stream, {node, ...}, a, b)
     ref.block(n)             n iterations of the case's loop and a stream
                              synchronize: microseconds per iteration
     ref.floor(exec, stream, seconds)
                              the device's floor: microseconds per launch
                              of exec replayed back to back, by events
     ref.check()              raises unless x[0] counts every inc launched;
                              for a shared graph returns the inc_i32
                              launches of the C side and its last value
     ref.close()

   and as the program build/bench-ref, for process start:

     bench-ref --cold PTX
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
  X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuCtxSynchronize) \
  X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuMemAlloc) \
  X(cuMemFree) X(cuMemsetD32Async) X(cuMemcpyDtoHAsync) X(cuModuleLoadDataEx) \
  X(cuModuleUnload) X(cuModuleGetFunction) X(cuLaunchKernel) \
  X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphInstantiate) \
  X(cuGraphLaunch) X(cuGraphExecDestroy) X(cuGraphDestroy) \
  X(cuStreamGetCaptureInfo) X(cuGraphConditionalHandleCreate) \
  X(cuGraphAddNode) X(cuStreamUpdateCaptureDependencies) \
  X(cuStreamBeginCaptureToGraph) X(cuGraphKernelNodeGetParams) \
  X(cuGraphExecKernelNodeSetParams) X(cuMemHostAlloc) X(cuMemFreeHost) \
  X(cuMemcpyHtoDAsync) X(cuEventCreate) X(cuEventRecord) \
  X(cuEventSynchronize) X(cuEventElapsedTime) X(cuEventDestroy)

#define NVRTC(X) \
  X(nvrtcGetErrorString) X(nvrtcCreateProgram) X(nvrtcCompileProgram) \
  X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcGetPTXSize) \
  X(nvrtcGetPTX) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcDestroyProgram)

#define FIELD(f) __typeof__(f) *f;
static struct { DRIVER(FIELD) } cu;
static struct { NVRTC(FIELD) } nv;
#undef FIELD

enum { N = 256 }; /* elements of each buffer: one block of N threads */

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

/* -- the driver state ------------------------------------------------------ */

enum { NARGS = 5 }; /* args1, args2, args4, args8, args16 */

static struct {
  CUdevice dev;
  CUcontext ctx;
  CUmodule mod, amod;      /* kernels.ptx; the argsN kernels (or 0) */
  CUstream s;
  CUfunction inc, args[NARGS], nop; /* nop: from the argsN module */
  CUdeviceptr x;           /* i32[N] */
  int n, zero;             /* N, the kernels' n argument; argsN's values */
  void *inc_args[2], *aargs[16];
} b;

/* The case being run: its loop, its size (argsK's K, the graph's or the
   capture's launches), the inc launches of one iteration and the count. */
static struct {
  void (*loop)(long);
  int k, incs;
  long long count;
  long last;    /* the iterations of the last block (scalar: the value;
                   cg: the iterations of the last solve) */
  CUfunction f; /* argsK */
  CUgraphExec exec; /* replay and scalar: the graph Lua captured, */
  CUstream s;       /* its stream */
  CUdeviceptr pos;  /* and its scalar (cg: the residual) */
  CUgraphExec start; /* cg: the start graph, */
  double tol;        /* and the tolerance */
  CUgraphNode node;  /* rebind: the node of exec that switches buffers, */
  CUgraphNode *nodes; /* setnodes: its k nodes */
  CUDA_KERNEL_NODE_PARAMS kp; /* its parameters, */
  CUdeviceptr ab[2];          /* the two buffers, */
  void *argv[2][2];           /* its arguments with each, */
  int flip;                   /* and the one it has */
  void *host;       /* pinned and pageable: the host memory, */
  CUdeviceptr dst;  /* the device buffer, */
  size_t bytes;     /* and the bytes copied */
  int pinned;
} run;

/* The primary context of the device, current, as the binding uses it. */
static void start(void) {
  const char *ord = getenv("CUGRAPH_LUA_DEVICE");
  load_driver();
  CU(cuInit, 0);
  CU(cuDeviceGet, &b.dev, ord && *ord ? atoi(ord) : 0);
  CU(cuDevicePrimaryCtxRetain, &b.ctx, b.dev);
  CU(cuCtxSetCurrent, b.ctx);
}

static CUmodule load(const char *ptx) {
  CUmodule m;
  char *img = slurp(ptx);
  CU(cuModuleLoadDataEx, &m, img, 0, NULL, NULL);
  free(img);
  return m;
}

/* The inc_i32 launch on x, and the buffers and stream of the cases. */
static void setup(const char *ptx) {
  start();
  b.mod = load(ptx);
  CU(cuModuleGetFunction, &b.inc, b.mod, "inc_i32");
  b.n = N;
  b.inc_args[0] = &b.x;
  b.inc_args[1] = &b.n;
  b.aargs[0] = &b.x;
  for (int i = 1; i < 16; i++) b.aargs[i] = &b.zero;
  CU(cuStreamCreate, &b.s, CU_STREAM_NON_BLOCKING);
  CU(cuMemAlloc, &b.x, N * sizeof(int));
  CU(cuStreamSynchronize, b.s);
}

static void teardown(void) {
  if (b.x) CU(cuMemFree, b.x);
  CU(cuStreamDestroy, b.s);
  if (b.amod) CU(cuModuleUnload, b.amod);
  CU(cuModuleUnload, b.mod);
  CU(cuDevicePrimaryCtxRelease, b.dev);
  memset(&b, 0, sizeof b);
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

/* k launches of inc_i32. */
static void record(int k) {
  for (int i = 0; i < k; i++) launch_inc();
}

/* for i = 1, n do inc:launch(s, 1, 256, x, 256) end */
static void eager(long n) {
  for (long i = 0; i < n; i++) launch_inc();
}

/* for i = 1, n do nop:launch(s, 1, 256, x, 256) end */
static void eager_nop(long n) {
  for (long i = 0; i < n; i++)
    CU(cuLaunchKernel, b.nop, 1, 1, 1, N, 1, 1, 0, b.s, b.inc_args, NULL);
}

/* for i = 1, n do argsK:launch(s, 1, 256, x, 0, ..., 0) end */
static void args(long n) {
  for (long i = 0; i < n; i++)
    CU(cuLaunchKernel, run.f, 1, 1, 1, N, 1, 1, 0, b.s, b.aargs, NULL);
}

/* for i = 1, n do g:launch() end */
static void replay(long n) {
  for (long i = 0; i < n; i++) CU(cuGraphLaunch, run.exec, run.s);
}

/* for i = 1, n do pos:set(i); g:launch() end: a pending u32 scalar is
   written with cuMemsetD32Async on the launch stream (cg_scalar_flush). */
static void scalar(long n) {
  for (long i = 1; i <= n; i++) {
    CU(cuMemsetD32Async, run.pos, (unsigned)i, 1, run.s);
    CU(cuGraphLaunch, run.exec, run.s);
  }
}

/* for i = 1, n do k = solver.drive() end (examples/cg.lua): the start
   graph, then the step graph and res:get() (cuCtxSynchronize, then the
   copy on a stream of its own and its synchronize) an iteration while the
   residual is above tol and fewer than run.k iterations ran. */
static void cg(long n) {
  for (long i = 0; i < n; i++) {
    double res;
    long k = 0;
    CU(cuGraphLaunch, run.start, run.s);
    do {
      CU(cuGraphLaunch, run.exec, run.s);
      k++;
      cu_check("cuCtxSynchronize", cu.cuCtxSynchronize());
      CU(cuMemcpyDtoHAsync, &res, run.pos, sizeof res, b.s);
      CU(cuStreamSynchronize, b.s);
    } while (res > run.tol && k < run.k);
    run.last = k;
  }
}

/* for i = 1, n do g:rebind(cur, other); cur, other = other, cur;
   g:launch() end: the node's parameters with the other buffer
   (cg_rebind's one exec setter call), then the launch unless the case
   times the change alone (k = 0) */
static void rebind(long n) {
  for (long i = 0; i < n; i++) {
    run.flip ^= 1;
    run.kp.kernelParams = run.argv[run.flip];
    CU(cuGraphExecKernelNodeSetParams, run.exec, run.node, &run.kp);
    if (run.k) CU(cuGraphLaunch, run.exec, run.s);
  }
}

/* for i = 1, n do for j = 1, k do inc:launch(s, 1, 256, x, 256) end end */
static void eagerk(long n) {
  for (long i = 0; i < n; i++) record(run.k);
}

/* for i = 1, n do f(s, bufs[i % 2 + 1]) end, f graphed over k inc_i32 on
   its buffer: what the driver takes for it, each node's parameters set to
   the other buffer, then the launch */
static void setnodes(long n) {
  for (long i = 0; i < n; i++) {
    run.flip ^= 1;
    run.kp.kernelParams = run.argv[run.flip];
    for (int j = 0; j < run.k; j++)
      CU(cuGraphExecKernelNodeSetParams, run.exec, run.nodes[j], &run.kp);
    CU(cuGraphLaunch, run.exec, run.s);
  }
}

/* for i = 1, n do dst:upload(h, s); inc:launch(s, 1, 256, x, 256) end:
   from pinned memory (a cuda.host_buffer) or pageable (a Lua string) */
static void upload(long n) {
  for (long i = 0; i < n; i++) {
    CU(cuMemcpyHtoDAsync, run.dst, run.host, run.bytes, b.s);
    launch_inc();
  }
}

/* What the last case allocated. */
static void release_run(void) {
  if (run.dst) CU(cuMemFree, run.dst);
  if (run.host && run.pinned) CU(cuMemFreeHost, run.host);
  if (!run.pinned) free(run.host);
  free(run.nodes);
  memset(&run, 0, sizeof run);
}

/* for i = 1, n do s:capture(fn):free() end, fn: k launches of inc_i32 */
static void capture(long n) {
  for (long i = 0; i < n; i++) {
    CUgraph g;
    CUgraphExec e;
    CU(cuStreamBeginCapture, b.s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    record(run.k);
    CU(cuStreamEndCapture, b.s, &g);
    CU(cuGraphInstantiate, &e, g, 0);
    CU(cuGraphExecDestroy, e);
    CU(cuGraphDestroy, g);
  }
}

/* NVRTC: the source and options cuda.ptx(source, {arch = A, cache = false})
   compiles with: -arch=compute_SM (A = "compute_SM": PTX) or -arch=sm_SM
   (A = SM: PTX and a cubin, which is then fetched too), then the toolkit's
   include folders and the macro the binding adds with them. */
static struct {
  const char *src;
  const char *opts[4];
  int nopts, real;
  char arch[32], include[2][4200];
} cc;

static void compile_setup(const char *source, int arch, int real) {
  static const char *const subdirs[] = { "include", "include/cccl" };
  const char *home = getenv("CUDA_HOME");
  const char *roots[] = { home && *home ? home : NULL, "/usr/local/cuda" };
  struct stat st;
  snprintf(cc.arch, sizeof cc.arch, "-arch=%s_%d", real ? "sm" : "compute", arch);
  cc.real = real;
  if (cc.src) return; /* the source and folders once a process */
  load_nvrtc();
  cc.src = slurp(source);
  cc.opts[cc.nopts++] = cc.arch;
  for (size_t r = 0; r < 2 && cc.nopts == 1; r++) {
    if (!roots[r]) continue;
    for (size_t d = 0; d < 2; d++) {
      char *inc = cc.include[d];
      int w = snprintf(inc, sizeof cc.include[d], "-I%s/%s", roots[r], subdirs[d]);
      if (w > 0 && (size_t)w < sizeof cc.include[d] && stat(inc + 2, &st) == 0 &&
          S_ISDIR(st.st_mode))
        cc.opts[cc.nopts++] = inc;
    }
  }
  if (cc.nopts > 1) cc.opts[cc.nopts++] = "-D__CUDA_INCLUDE_COMPILER_INTERNAL_HEADERS__";
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
    if (cc.real) {
      NV(nvrtcGetCUBINSize, p, &size);
      if (size < 2 || !(ptx = malloc(size))) fail("compile", "no cubin");
      NV(nvrtcGetCUBIN, p, ptx);
      free(ptx);
    }
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
  if (b.s) CU(cuStreamSynchronize, run.s ? run.s : b.s); /* run.s: Lua's */
  return (now() - t0) * 1e6 / (double)n;
}

#ifdef BENCH_REF_MODULE
#include <lua.h>
#include <lauxlib.h>

static const int arities[NARGS] = {1, 2, 4, 8, 16};

/* ref.open(ptx [, args_ptx]): the state of the cases, in this process's
   primary context; args_ptx holds the argsN kernels. */
static int lopen(lua_State *L) {
  const char *ptx = luaL_checkstring(L, 1);
  const char *aptx = luaL_optstring(L, 2, NULL);
  char name[16];
  if (b.mod) return luaL_error(L, "ref.open: already open");
  setup(ptx);
  if (aptx) {
    b.amod = load(aptx);
    for (int i = 0; i < NARGS; i++) {
      snprintf(name, sizeof name, "args%d", arities[i]);
      CU(cuModuleGetFunction, &b.args[i], b.amod, name);
    }
    CU(cuModuleGetFunction, &b.nop, b.amod, "nop");
  }
  return 0;
}

/* An integer argument that is a handle or address from the binding. */
static void *handle(lua_State *L, int idx) {
  return (void *)(intptr_t)luaL_checkinteger(L, idx);
}

/* ref.setup(case, k [, source [, exec, stream, pos [, start, tol]]]): x
   zeroed, the last graph destroyed. replay and scalar launch the graph Lua
   captured (exec, on stream; scalar: memset pos first), so that both sides
   run the same work on the device: their x counts the C side's launches
   too. cg launches the solver's graphs Lua captured. */
static int lsetup(lua_State *L) {
  static const char *const names[] = {"eager", "args", "replay", "scalar",
                                      "capture", "while", "compile", "cg",
                                      "rebind", "pinned", "pageable", "nop",
                                      "compile_sm", "eagerk", "setnodes",
                                      NULL};
  int c = luaL_checkoption(L, 1, NULL, names);
  int k = (int)luaL_optinteger(L, 2, 0), i = 0;
  if (!b.mod) return luaL_error(L, "ref.setup: not open");
  CU(cuMemsetD32Async, b.x, 0, N, b.s);
  CU(cuStreamSynchronize, b.s);
  release_run();
  run.k = k;
  switch (c) {
  case 0: run.loop = eager; run.incs = 1; break;
  case 1:
    while (i < NARGS && arities[i] != k) i++;
    luaL_argcheck(L, i < NARGS && b.amod, 2, "no such argsN kernel");
    run.f = b.args[i];
    run.loop = args;
    run.incs = 1;
    break;
  case 2: case 3: case 5:
    luaL_argcheck(L, k > 0, 2, "expected a node count");
    run.exec = handle(L, 4);
    run.s = handle(L, 5);
    run.loop = c == 3 ? scalar : replay;
    run.incs = k;
    if (c == 3) run.pos = (CUdeviceptr)(uintptr_t)handle(L, 6);
    break;
  case 4:
    luaL_argcheck(L, k > 0, 2, "expected a launch count");
    run.loop = capture;
    break;
  case 7:
    luaL_argcheck(L, k > 0, 2, "expected an iteration limit");
    run.exec = handle(L, 4);
    run.s = handle(L, 5);
    run.pos = (CUdeviceptr)(uintptr_t)handle(L, 6);
    run.start = handle(L, 7);
    run.tol = luaL_checknumber(L, 8);
    run.loop = cg;
    break;
  case 8:
    luaL_argcheck(L, k >= 0, 2, "expected the node count on x");
    run.exec = handle(L, 4);
    run.s = handle(L, 5);
    run.node = handle(L, 6);
    run.ab[0] = (CUdeviceptr)(uintptr_t)handle(L, 7);
    run.ab[1] = (CUdeviceptr)(uintptr_t)handle(L, 8);
    for (i = 0; i < 2; i++) {
      run.argv[i][0] = &run.ab[i];
      run.argv[i][1] = &b.n;
    }
    CU(cuGraphKernelNodeGetParams, run.node, &run.kp); /* Lua's function */
    run.loop = rebind;
    run.incs = k;
    break;
  case 9: case 10:
    luaL_argcheck(L, k > 0, 2, "expected a byte count");
    run.bytes = (size_t)k;
    run.pinned = c == 9;
    if (run.pinned) CU(cuMemHostAlloc, &run.host, run.bytes, 0);
    else if (!(run.host = malloc(run.bytes))) fail("pageable", "out of memory");
    memset(run.host, 0, run.bytes);
    CU(cuMemAlloc, &run.dst, run.bytes);
    run.loop = upload;
    run.incs = 1;
    break;
  case 11:
    luaL_argcheck(L, b.nop != NULL, 1, "no nop kernel");
    run.loop = eager_nop;
    break;
  case 13:
    luaL_argcheck(L, k > 0, 2, "expected a launch count");
    run.loop = eagerk;
    run.incs = k;
    break;
  case 14:
    luaL_argcheck(L, k > 0, 2, "expected a node count");
    luaL_checktype(L, 6, LUA_TTABLE);
    run.exec = handle(L, 4);
    run.s = handle(L, 5);
    if (!(run.nodes = calloc((size_t)k, sizeof *run.nodes)))
      fail("setnodes", "out of memory");
    for (i = 0; i < k; i++) {
      lua_rawgeti(L, 6, i + 1);
      run.nodes[i] = handle(L, -1);
      lua_pop(L, 1);
    }
    run.ab[0] = (CUdeviceptr)(uintptr_t)handle(L, 7);
    run.ab[1] = (CUdeviceptr)(uintptr_t)handle(L, 8);
    for (i = 0; i < 2; i++) {
      run.argv[i][0] = &run.ab[i];
      run.argv[i][1] = &b.n;
    }
    CU(cuGraphKernelNodeGetParams, run.nodes[0], &run.kp); /* Lua's function */
    run.loop = setnodes;
    run.incs = k;
    break;
  default: /* compile, compile_sm */
    compile_setup(luaL_checkstring(L, 3), k, c == 12);
    run.loop = compile;
  }
  return 0;
}

/* ref.block(n) -> microseconds per iteration of n, the synchronize
   included. */
static int lblock(lua_State *L) {
  long n = (long)luaL_checkinteger(L, 1);
  luaL_argcheck(L, n > 0 && run.loop, 1, "no case set up, or n < 1");
  run.last = n;
  lua_pushnumber(L, timed(run.loop, n));
  run.count += (long long)run.incs * n;
  return 1;
}

/* ref.check(): the work of the blocks ran: x[0] counts every inc_i32 (and
   argsN) launched. The work of a shared graph is Lua's to check: returns
   the inc_i32 launches of the C side and its last value set (cg: the
   iterations of its last solve). */
static int lcheck(lua_State *L) {
  if (run.exec) {
    lua_pushinteger(L, (lua_Integer)run.count);
    lua_pushinteger(L, run.last);
    return 2;
  }
  unsigned got = peek(b.x, 0);
  if (got != (unsigned)run.count)
    return luaL_error(L, "C side: x[0] is %u, not %lld launches", got,
                      run.count);
  return 0;
}

/* ref.floor(exec, stream, seconds) -> microseconds per launch of the
   graph exec replayed back to back for at least seconds of device time,
   timed with events on its stream: the device's own floor for the graph,
   which no host loop can beat. */
static int lfloor(lua_State *L) {
  CUgraphExec e = handle(L, 1);
  CUstream s = handle(L, 2);
  double want = luaL_checknumber(L, 3) * 1e3; /* ms */
  CUevent t0, t1;
  float ms = 0;
  long n = 16;
  CU(cuEventCreate, &t0, CU_EVENT_DEFAULT);
  CU(cuEventCreate, &t1, CU_EVENT_DEFAULT);
  for (;;) {
    CU(cuEventRecord, t0, s);
    for (long i = 0; i < n; i++) CU(cuGraphLaunch, e, s);
    CU(cuEventRecord, t1, s);
    CU(cuEventSynchronize, t1);
    CU(cuEventElapsedTime, &ms, t0, t1);
    if (ms >= want) break;
    n = ms > 0 ? (long)((double)n * want / ms * 1.1) + 1 : n * 8;
  }
  CU(cuEventDestroy, t0);
  CU(cuEventDestroy, t1);
  lua_pushnumber(L, (double)ms * 1e3 / (double)n);
  return 1;
}

/* A new object of metatable name whose methods launch and rebind are
   call, pushed. */
static int caller(lua_State *L, const char *name, lua_CFunction call) {
  lua_newuserdatauv(L, 1, 0);
  if (luaL_newmetatable(L, name)) {
    lua_createtable(L, 0, 2);
    lua_pushcfunction(L, call);
    lua_setfield(L, -2, "launch");
    lua_pushcfunction(L, call);
    lua_setfield(L, -2, "rebind");
    lua_setfield(L, -2, "__index");
  }
  lua_setmetatable(L, -2);
  return 1;
}

/* ref.bare() -> an object whose methods each make one iteration of the
   set-up case's C loop, ignoring their arguments: the Lua loop of the
   case, called the same way, with no binding behind the call (the
   interpreter's share of a row). */
static int lbare_call(lua_State *L) {
  (void)L;
  run.loop(1);
  run.count += run.incs;
  return 0;
}

static int lbare(lua_State *L) {
  luaL_argcheck(L, run.loop != NULL, 1, "no case set up");
  return caller(L, "ref.bare", lbare_call);
}

/* ref.nothing() -> an object whose methods do nothing: the Lua
   interpreter's own cost of a launch's call (bench/ir.lua). */
static int lnothing_call(lua_State *L) {
  (void)L;
  return 0;
}

static int lnothing(lua_State *L) {
  return caller(L, "ref.nothing", lnothing_call);
}

/* ref.sync(): the C loop's stream synchronized, as its blocks end. */
static int lsync(lua_State *L) {
  (void)L;
  CU(cuStreamSynchronize, run.s ? run.s : b.s);
  return 0;
}

static int lclose(lua_State *L) {
  if (b.mod) {
    release_run();
    teardown();
  }
  return 0;
}

int luaopen_ref(lua_State *L);
int luaopen_ref(lua_State *L) {
  static const luaL_Reg funcs[] = {
    {"open", lopen}, {"setup", lsetup}, {"block", lblock},
    {"check", lcheck}, {"floor", lfloor}, {"bare", lbare}, {"sync", lsync},
    {"nothing", lnothing},
    {"close", lclose}, {NULL, NULL}
  };
  luaL_newlib(L, funcs);
  return 1;
}
#else
/* Process start to the first kernel result, as bench/cold.lua does it. */
static int cold(const char *ptx) {
  setup(ptx);
  CU(cuMemsetD32Async, b.x, 0, N, b.s);
  launch_inc();
  if (peek(b.x, 0) != 1) fail("cold", "inc_i32 gave a wrong result");
  teardown();
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 3 || strcmp(argv[1], "--cold")) {
    fputs("usage: bench-ref --cold PTX\n", stderr);
    return 2;
  }
  return cold(argv[2]);
}
#endif
