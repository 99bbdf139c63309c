/* What a CUDA user object retained by a graph costs its launches
   (make bench-userobj, GPU): graphs of 1, 10 and 100 empty kernels, the
   same graph instantiated twice, once after cuGraphRetainUserObject, each
   launched back to back on one stream between two events; microseconds a
   launch, the median of 7 blocks after a warm-up, the two interleaved.
   The runtime's graphs hold one (the keep of the memory their nodes use,
   base.h), so this is the device time that keep adds to every replay.
   libcuda is opened with dlopen (CUGRAPH_LUA_LIBCUDA overrides it). */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define FNS(X) X(cuInit) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) \
  X(cuCtxSetCurrent) X(cuModuleLoadDataEx) X(cuModuleGetFunction) \
  X(cuStreamCreate) X(cuStreamBeginCapture) X(cuStreamEndCapture) \
  X(cuLaunchKernel) X(cuUserObjectCreate) X(cuGraphRetainUserObject) \
  X(cuGraphInstantiate) X(cuGraphUpload) X(cuGraphLaunch) \
  X(cuGraphExecDestroy) X(cuGraphDestroy) X(cuStreamSynchronize) \
  X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize) \
  X(cuEventElapsedTime) X(cuEventDestroy) X(cuGetErrorName)
#define DECL(f) static __typeof__(&f) p_##f;
FNS(DECL)

#define CK(x) check((x), #x)
static void check(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS) return;
  const char *name = "?";
  if (p_cuGetErrorName) p_cuGetErrorName(r, &name);
  fprintf(stderr, "bench-userobj: %s: %s\n", what, name);
  exit(1);
}

static const char ptx[] =
  ".version 7.0\n.target sm_70\n.address_size 64\n"
  ".visible .entry nop(.param .u64 a, .param .u32 n) { ret; }\n";

static CUfunction fn;
static CUstream st;

static void CUDA_CB nothing(void *p) { (void)p; }

static CUgraphExec make(int nodes, int user_object) {
  CUgraph g;
  CUgraphExec e;
  CUdeviceptr a = 0;
  unsigned n = 1;
  void *args[] = { &a, &n };
  CK(p_cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  for (int i = 0; i < nodes; i++)
    CK(p_cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, st, args, NULL));
  CK(p_cuStreamEndCapture(st, &g));
  if (user_object) {
    CUuserObject u;
    CK(p_cuUserObjectCreate(&u, NULL, nothing, 1,
                            CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    CK(p_cuGraphRetainUserObject(g, u, 1, CU_GRAPH_USER_OBJECT_MOVE));
  }
  CK(p_cuGraphInstantiate(&e, g, 0));
  CK(p_cuGraphUpload(e, st));
  CK(p_cuStreamSynchronize(st));
  CK(p_cuGraphDestroy(g));
  return e;
}

static int by_value(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* us a launch of e, one block of n launches */
static float block(CUgraphExec e, int n, CUevent t0, CUevent t1) {
  float ms;
  CK(p_cuEventRecord(t0, st));
  for (int i = 0; i < n; i++) CK(p_cuGraphLaunch(e, st));
  CK(p_cuEventRecord(t1, st));
  CK(p_cuEventSynchronize(t1));
  CK(p_cuEventElapsedTime(&ms, t0, t1));
  return ms * 1000.0f / (float)n;
}

int main(void) {
  const char *name = getenv("CUGRAPH_LUA_LIBCUDA");
  void *lib = dlopen(name && *name ? name : "libcuda.so.1",
                     RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "bench-userobj: %s\n", dlerror());
    return 1;
  }
/* by the names cuda.h's macros give (cuGraphInstantiate is
   cuGraphInstantiateWithFlags, ...), as the binding loads them */
#define STR(x) #x
#define XSTR(x) STR(x)
#define LOAD(f) if (!(*(void **)&p_##f = dlsym(lib, XSTR(f)))) { \
    fprintf(stderr, "bench-userobj: libcuda has no %s\n", XSTR(f)); \
    return 1; }
  FNS(LOAD)
  CUdevice dev;
  CUcontext cx;
  CUmodule mod;
  CUevent t0, t1;
  CK(p_cuInit(0));
  CK(p_cuDeviceGet(&dev, 0));
  CK(p_cuDevicePrimaryCtxRetain(&cx, dev));
  CK(p_cuCtxSetCurrent(cx));
  CK(p_cuModuleLoadDataEx(&mod, ptx, 0, NULL, NULL));
  CK(p_cuModuleGetFunction(&fn, mod, "nop"));
  CK(p_cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
  CK(p_cuEventCreate(&t0, 0));
  CK(p_cuEventCreate(&t1, 0));
  printf("graph launches back to back, us a launch (median of 7 blocks)\n");
  printf("%6s %10s %12s %8s\n", "nodes", "plain", "user object", "added");
  for (int nodes = 1; nodes <= 100; nodes *= 10) {
    CUgraphExec e[2] = { make(nodes, 0), make(nodes, 1) };
    int n = nodes == 1 ? 4000 : nodes == 10 ? 2000 : 400;
    float t[2][7];
    for (int k = 0; k < 2; k++) (void)block(e[k], n, t0, t1); /* warm-up */
    for (int r = 0; r < 7; r++)
      for (int k = 0; k < 2; k++) t[k][r] = block(e[k], n, t0, t1);
    for (int k = 0; k < 2; k++) qsort(t[k], 7, sizeof t[k][0], by_value);
    printf("%6d %10.3f %12.3f %+8.3f\n", nodes, t[0][3], t[1][3],
           t[1][3] - t[0][3]);
    for (int k = 0; k < 2; k++) CK(p_cuGraphExecDestroy(e[k]));
  }
  CK(p_cuEventDestroy(t0));
  CK(p_cuEventDestroy(t1));
  return 0;
}
