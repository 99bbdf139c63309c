/* Stream capture modes across threads, on the driver the suite runs on (the
   test double, the simulator or libcuda): thread A begins a capture in each
   mode; thread B, which captures nothing, then allocates; then A allocates
   and ends its capture. By the Driver API's rules (cuStreamBeginCapture),
   with both threads in the default interaction mode (global):

     A's mode       B's cuMemAlloc   A's cuMemAlloc   A's cuStreamEndCapture
     global         refused          refused          invalidated
     thread_local   allowed          refused          invalidated
     relaxed        allowed          allowed          a graph

   (refused: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; invalidated:
   CUDA_ERROR_STREAM_CAPTURE_INVALIDATED). Prints a line per mode; exits 0
   only if every call went as the table says.

     modes */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <cuda.h>

static CUresult (*p_init)(unsigned);
static CUresult (*p_device_get)(CUdevice *, int);
static CUresult (*p_retain)(CUcontext *, CUdevice);
static CUresult (*p_set_current)(CUcontext);
static CUresult (*p_stream_create)(CUstream *, unsigned);
static CUresult (*p_stream_destroy)(CUstream);
static CUresult (*p_begin)(CUstream, CUstreamCaptureMode);
static CUresult (*p_end)(CUstream, CUgraph *);
static CUresult (*p_alloc)(CUdeviceptr *, size_t);
static CUresult (*p_free)(CUdeviceptr);
static CUresult (*p_graph_destroy)(CUgraph);

static CUcontext ctx;
static pthread_barrier_t step;
static CUresult b_alloc;

static void *sym(void *h, const char *name) {
  void *p = dlsym(h, name);
  if (!p) {
    fprintf(stderr, "modes: the driver lacks %s\n", name);
    exit(2);
  }
  return p;
}

/* B: between A's begin and A's own allocation */
static void *other(void *arg) {
  (void)arg;
  p_set_current(ctx);
  pthread_barrier_wait(&step);
  CUdeviceptr d = 0;
  b_alloc = p_alloc(&d, 256);
  if (b_alloc == CUDA_SUCCESS) p_free(d);
  pthread_barrier_wait(&step);
  return NULL;
}

static const char *code(CUresult r) {
  switch (r) {
  case CUDA_SUCCESS: return "allowed";
  case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: return "refused";
  case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: return "invalidated";
  default: return "another error";
  }
}

int main(void) {
  const char *lib = getenv("CUGRAPH_LUA_LIBCUDA");
  void *h = dlopen(lib && *lib ? lib : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "modes: %s\n", dlerror());
    return 2;
  }
  *(void **)&p_init = sym(h, "cuInit");
  *(void **)&p_device_get = sym(h, "cuDeviceGet");
  *(void **)&p_retain = sym(h, "cuDevicePrimaryCtxRetain");
  *(void **)&p_set_current = sym(h, "cuCtxSetCurrent");
  *(void **)&p_stream_create = sym(h, "cuStreamCreate");
  *(void **)&p_stream_destroy = sym(h, "cuStreamDestroy_v2");
  *(void **)&p_begin = sym(h, "cuStreamBeginCapture_v2");
  *(void **)&p_end = sym(h, "cuStreamEndCapture");
  *(void **)&p_alloc = sym(h, "cuMemAlloc_v2");
  *(void **)&p_free = sym(h, "cuMemFree_v2");
  *(void **)&p_graph_destroy = sym(h, "cuGraphDestroy");
  CUdevice dev;
  if (p_init(0) || p_device_get(&dev, 0) || p_retain(&ctx, dev) ||
      p_set_current(ctx)) {
    fprintf(stderr, "modes: no device\n");
    return 2;
  }
  static const struct {
    CUstreamCaptureMode mode;
    const char *name;
    CUresult b, a, end;
  } cases[] = {
    { CU_STREAM_CAPTURE_MODE_GLOBAL, "global",
      CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
      CUDA_ERROR_STREAM_CAPTURE_INVALIDATED },
    { CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, "thread_local", CUDA_SUCCESS,
      CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED },
    { CU_STREAM_CAPTURE_MODE_RELAXED, "relaxed", CUDA_SUCCESS, CUDA_SUCCESS,
      CUDA_SUCCESS },
  };
  int failed = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    CUstream s;
    if (p_stream_create(&s, CU_STREAM_NON_BLOCKING)) return 2;
    pthread_barrier_init(&step, NULL, 2);
    pthread_t t;
    if (pthread_create(&t, NULL, other, NULL)) return 2;
    CUresult begin = p_begin(s, cases[i].mode);
    pthread_barrier_wait(&step); /* B allocates */
    pthread_barrier_wait(&step);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&step);
    CUdeviceptr d = 0;
    CUresult a = p_alloc(&d, 256);
    if (a == CUDA_SUCCESS) p_free(d);
    CUgraph g = NULL;
    CUresult end = p_end(s, &g);
    if (g) p_graph_destroy(g);
    p_stream_destroy(s);
    int ok = begin == CUDA_SUCCESS && b_alloc == cases[i].b && a == cases[i].a &&
             end == cases[i].end && (end != CUDA_SUCCESS || g);
    failed |= !ok;
    printf("%s %s: the other thread's alloc %s, its own %s, its end %s (%d %d %d)\n",
           ok ? "ok" : "FAILED", cases[i].name, code(b_alloc), code(a),
           end == CUDA_SUCCESS ? "a graph" : code(end), (int)b_alloc, (int)a, (int)end);
  }
  return failed;
}
