/* Programmatic dependent launches made straight through the driver the
   suite runs on (the simulator or libcuda), as code that does not use the
   runtime would make them: the runtime refuses an unsafe pair before the
   driver, so the simulator's own check of such pairs is driven from here.

     pdl PTX MODE STEP...

   PTX is a file whose kernels take (const float *in, float *out, int n);
   four buffers b0..b3 of N = 256 floats, b0[i] = i + 1, the others 0.
   MODE eager sends the steps to one stream; MODE graph captures them
   there (a kernel sent with the attribute gets a programmatic edge, as
   the driver records it), then instantiates and launches the graph. Each
   STEP is

     [+]K:I:O   kernel K(bI, bO, N) on 2 blocks of 128 threads; with '+',
                with programmatic stream serialization
                (cuLaunchKernelEx, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_...)
     fill:O     bO set to 0
     copy:I:O   bI copied into bO
     sync       the stream synchronized (eager)

   and is named "step <n>" to the simulator (cuSimSetLuaLine, where the
   driver has it), the graph's launch "the launch". After the steps the
   stream is synchronized: "sync: <error name>" is printed, with "report:
   <text>" when the simulator has one (cuSimTakeReport), then "bI: <first>
   <last>" for each buffer. Exits 0 when every call but the
   synchronizations succeeded, 2 otherwise. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>

enum { N = 256, NBUF = 4 };

static CUresult (*p_init)(unsigned);
static CUresult (*p_device_get)(CUdevice *, int);
static CUresult (*p_retain)(CUcontext *, CUdevice);
static CUresult (*p_set_current)(CUcontext);
static CUresult (*p_load)(CUmodule *, const void *, unsigned, CUjit_option *,
                          void **);
static CUresult (*p_function)(CUfunction *, CUmodule, const char *);
static CUresult (*p_alloc)(CUdeviceptr *, size_t);
static CUresult (*p_free)(CUdeviceptr);
static CUresult (*p_htod)(CUdeviceptr, const void *, size_t, CUstream);
static CUresult (*p_dtoh)(void *, CUdeviceptr, size_t);
static CUresult (*p_dtod)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
static CUresult (*p_memset)(CUdeviceptr, unsigned, size_t, CUstream);
static CUresult (*p_stream_create)(CUstream *, unsigned);
static CUresult (*p_sync)(CUstream);
static CUresult (*p_launch)(const CUlaunchConfig *, CUfunction, void **,
                            void **);
static CUresult (*p_begin)(CUstream, CUstreamCaptureMode);
static CUresult (*p_end)(CUstream, CUgraph *);
static CUresult (*p_instantiate)(CUgraphExec *, CUgraph, unsigned long long);
static CUresult (*p_graph_launch)(CUgraphExec, CUstream);
static CUresult (*p_error_name)(CUresult, const char **);
static CUresult (*p_line)(const char *);           /* the simulator's */
static CUresult (*p_report)(char *, size_t);

static void *sym(void *h, const char *name) {
  void *p = dlsym(h, name);
  if (!p) {
    fprintf(stderr, "pdl: the driver lacks %s\n", name);
    exit(2);
  }
  return p;
}

static void check(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS) return;
  const char *name = "?";
  p_error_name(r, &name);
  fprintf(stderr, "pdl: %s: %s\n", what, name);
  exit(2);
}

static void line(const char *where) {
  if (p_line) p_line(where);
}

/* Synchronizes s and prints how it went, and the simulator's report. */
static void synchronize(CUstream s, const char *label) {
  const char *name = "?";
  p_error_name(p_sync(s), &name);
  printf("%s: %s\n", label, name);
  char text[2048];
  if (p_report && p_report(text, sizeof text) == CUDA_SUCCESS)
    printf("report: %s\n", text);
}

/* The buffer index at *p (a digit below NBUF), past it and a ':' or the
   end. */
static int buffer(const char **p) {
  int i = **p - '0';
  if (i < 0 || i >= NBUF) {
    fprintf(stderr, "pdl: bad buffer in a step\n");
    exit(2);
  }
  (*p)++;
  if (**p == ':') (*p)++;
  return i;
}

int main(int argc, char **argv) {
  if (argc < 4 || (strcmp(argv[2], "eager") && strcmp(argv[2], "graph"))) {
    fprintf(stderr, "usage: pdl PTX eager|graph STEP...\n");
    return 2;
  }
  int graph = !strcmp(argv[2], "graph");
  const char *lib = getenv("CUGRAPH_LUA_LIBCUDA");
  void *h = dlopen(lib && *lib ? lib : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "pdl: %s\n", dlerror());
    return 2;
  }
  *(void **)&p_init = sym(h, "cuInit");
  *(void **)&p_device_get = sym(h, "cuDeviceGet");
  *(void **)&p_retain = sym(h, "cuDevicePrimaryCtxRetain");
  *(void **)&p_set_current = sym(h, "cuCtxSetCurrent");
  *(void **)&p_load = sym(h, "cuModuleLoadDataEx");
  *(void **)&p_function = sym(h, "cuModuleGetFunction");
  *(void **)&p_alloc = sym(h, "cuMemAlloc_v2");
  *(void **)&p_free = sym(h, "cuMemFree_v2");
  *(void **)&p_htod = sym(h, "cuMemcpyHtoDAsync_v2");
  *(void **)&p_dtoh = sym(h, "cuMemcpyDtoH_v2");
  *(void **)&p_dtod = sym(h, "cuMemcpyDtoDAsync_v2");
  *(void **)&p_memset = sym(h, "cuMemsetD32Async");
  *(void **)&p_stream_create = sym(h, "cuStreamCreate");
  *(void **)&p_sync = sym(h, "cuStreamSynchronize");
  *(void **)&p_launch = sym(h, "cuLaunchKernelEx");
  *(void **)&p_begin = sym(h, "cuStreamBeginCapture_v2");
  *(void **)&p_end = sym(h, "cuStreamEndCapture");
  *(void **)&p_instantiate = sym(h, "cuGraphInstantiateWithFlags");
  *(void **)&p_graph_launch = sym(h, "cuGraphLaunch");
  *(void **)&p_error_name = sym(h, "cuGetErrorName");
  *(void **)&p_line = dlsym(h, "cuSimSetLuaLine");
  *(void **)&p_report = dlsym(h, "cuSimTakeReport");

  FILE *f = fopen(argv[1], "rb");
  static char ptx[1 << 20];
  size_t len = f ? fread(ptx, 1, sizeof ptx - 1, f) : 0;
  if (f) fclose(f);
  if (!len) {
    fprintf(stderr, "pdl: cannot read %s\n", argv[1]);
    return 2;
  }
  ptx[len] = '\0';

  CUdevice dev;
  CUcontext ctx;
  CUmodule m;
  CUstream s;
  check(p_init(0), "cuInit");
  check(p_device_get(&dev, 0), "cuDeviceGet");
  check(p_retain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(p_set_current(ctx), "cuCtxSetCurrent");
  check(p_load(&m, ptx, 0, NULL, NULL), "cuModuleLoadDataEx");
  check(p_stream_create(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  CUdeviceptr b[NBUF];
  static float host[N];
  for (int i = 0; i < N; i++) host[i] = (float)(i + 1);
  for (int i = 0; i < NBUF; i++) {
    check(p_alloc(&b[i], N * sizeof(float)), "cuMemAlloc");
    check(i ? p_memset(b[i], 0, N, s)
            : p_htod(b[i], host, sizeof host, s), "the buffers' values");
  }
  check(p_sync(s), "cuStreamSynchronize");

  if (graph) check(p_begin(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                   "cuStreamBeginCapture");
  for (int a = 3; a < argc; a++) {
    char where[32], name[128];
    snprintf(where, sizeof where, "step %d", a - 2);
    line(where);
    const char *p = argv[a];
    if (!strcmp(p, "sync") && !graph) {
      synchronize(s, where);
    } else if (!strncmp(p, "fill:", 5)) {
      p += 5;
      check(p_memset(b[buffer(&p)], 0, N, s), "cuMemsetD32Async");
    } else if (!strncmp(p, "copy:", 5)) {
      p += 5;
      int in = buffer(&p), out = buffer(&p);
      check(p_dtod(b[out], b[in], N * sizeof(float), s), "cuMemcpyDtoDAsync");
    } else {
      int prog = *p == '+';
      const char *colon = strchr(p + prog, ':');
      size_t n = colon ? (size_t)(colon - p - prog) : 0;
      if (!n || n >= sizeof name) {
        fprintf(stderr, "pdl: bad step %s\n", argv[a]);
        return 2;
      }
      memcpy(name, p + prog, n);
      name[n] = '\0';
      p = colon + 1;
      int in = buffer(&p), out = buffer(&p), count = N;
      CUfunction k;
      check(p_function(&k, m, name), name);
      void *args[] = {&b[in], &b[out], &count};
      CUlaunchAttribute attr;
      memset(&attr, 0, sizeof attr);
      attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attr.value.programmaticStreamSerializationAllowed = 1;
      CUlaunchConfig c;
      memset(&c, 0, sizeof c);
      c.gridDimX = 2;
      c.gridDimY = c.gridDimZ = 1;
      c.blockDimX = N / 2;
      c.blockDimY = c.blockDimZ = 1;
      c.hStream = s;
      c.attrs = &attr;
      c.numAttrs = prog ? 1 : 0;
      check(p_launch(&c, k, args, NULL), "cuLaunchKernelEx");
    }
  }
  if (graph) {
    CUgraph g;
    CUgraphExec x;
    line(NULL);
    check(p_end(s, &g), "cuStreamEndCapture");
    check(p_instantiate(&x, g, 0), "cuGraphInstantiate");
    line("the launch");
    check(p_graph_launch(x, s), "cuGraphLaunch");
  }
  line(NULL);
  synchronize(s, "sync");
  for (int i = 0; i < NBUF; i++) {
    float v[N];
    if (p_dtoh(v, b[i], sizeof v)) return 2;
    printf("b%d: %g %g\n", i, (double)v[0], (double)v[N - 1]);
  }
  for (int i = 0; i < NBUF; i++) check(p_free(b[i]), "cuMemFree");
  return 0;
}
