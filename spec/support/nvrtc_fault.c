/* libnvrtc-fault.so: NVRTC with injected failures, for the fault sweep.
   Each entry point the runtime loads forwards to the real NVRTC (the
   library NVRTC_FAULT_REAL names, else the usual names and the toolkit's
   lib64); NVRTC_FAULT=name:n:code[,...] makes the n-th call of name
   return code instead, doing nothing, and NVRTC_FAULT_TRACE=path writes
   "name count" lines of every call at exit. A front-end-only compile
   (-fdevice-syntax-only) goes by nvrtcCompileProgram-syntax. The runtime takes it through
   CUGRAPH_LUA_LIBNVRTC. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nvrtc.h>

#define FUNCS(X) \
  X(nvrtcVersion) X(nvrtcCreateProgram) X(nvrtcCompileProgram) \
  X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcGetPTXSize) \
  X(nvrtcGetPTX) X(nvrtcDestroyProgram) X(nvrtcGetErrorString) \
  X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcAddNameExpression) \
  X(nvrtcGetLoweredName)

enum {
#define ENUM(f) I_##f,
  FUNCS(ENUM)
#undef ENUM
  I_syntax, /* nvrtcCompileProgram with -fdevice-syntax-only */
  NFUNCS
};
static const char *const names[] = {
#define NAME(f) #f,
  FUNCS(NAME)
#undef NAME
  "nvrtcCompileProgram-syntax"
};
#define FIELD(f) __typeof__(f) *f;
static struct { FUNCS(FIELD) } real;
#undef FIELD
static unsigned long calls[NFUNCS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void write_trace(void) {
  const char *path = getenv("NVRTC_FAULT_TRACE");
  FILE *f = path ? fopen(path, "w") : NULL;
  if (!f) return;
  for (int i = 0; i < NFUNCS; i++)
    if (calls[i]) fprintf(f, "%s %lu\n", names[i], calls[i]);
  fclose(f);
}

static void load(void) {
  static const char *const tries[] = {
    "libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
    "/usr/local/cuda/lib64/libnvrtc.so", NULL
  };
  const char *env = getenv("NVRTC_FAULT_REAL");
  void *h = env ? dlopen(env, RTLD_NOW | RTLD_LOCAL) : NULL;
  for (int i = 0; !h && !env && tries[i]; i++)
    h = dlopen(tries[i], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "libnvrtc-fault: no NVRTC to forward to\n");
    abort();
  }
#define SYM(f) *(void **)&real.f = dlsym(h, #f);
  FUNCS(SYM)
#undef SYM
  atexit(write_trace);
}

/* Counts a call of function i; the code it fails with, or 0. */
static int fault(int i) {
  pthread_once(&once, load);
  pthread_mutex_lock(&lock);
  unsigned long n = ++calls[i];
  pthread_mutex_unlock(&lock);
  const char *spec = getenv("NVRTC_FAULT");
  size_t len = strlen(names[i]);
  for (const char *p = spec; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
    unsigned long at;
    int code;
    if (!strncmp(p, names[i], len) && p[len] == ':' &&
        sscanf(p + len, ":%lu:%d", &at, &code) == 2 && at == n)
      return code;
  }
  return 0;
}

#define CALL(f, ...) \
  do { int c_ = fault(I_##f); \
       if (c_) return (nvrtcResult)c_; \
       return real.f(__VA_ARGS__); } while (0)

nvrtcResult nvrtcVersion(int *major, int *minor) { CALL(nvrtcVersion, major, minor); }
nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog, const char *src,
                               const char *name, int n,
                               const char *const *headers,
                               const char *const *include_names) {
  CALL(nvrtcCreateProgram, prog, src, name, n, headers, include_names);
}
nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int n, const char *const *opts) {
  int syntax = 0;
  for (int i = 0; i < n; i++) syntax |= !strcmp(opts[i], "-fdevice-syntax-only");
  int c = fault(syntax ? I_syntax : I_nvrtcCompileProgram);
  return c ? (nvrtcResult)c : real.nvrtcCompileProgram(prog, n, opts);
}
nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t *size) {
  CALL(nvrtcGetProgramLogSize, prog, size);
}
nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char *log) {
  CALL(nvrtcGetProgramLog, prog, log);
}
nvrtcResult nvrtcGetPTXSize(nvrtcProgram prog, size_t *size) {
  CALL(nvrtcGetPTXSize, prog, size);
}
nvrtcResult nvrtcGetPTX(nvrtcProgram prog, char *ptx) { CALL(nvrtcGetPTX, prog, ptx); }
nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t *size) {
  CALL(nvrtcGetCUBINSize, prog, size);
}
nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char *cubin) {
  CALL(nvrtcGetCUBIN, prog, cubin);
}
nvrtcResult nvrtcAddNameExpression(nvrtcProgram prog, const char *expr) {
  CALL(nvrtcAddNameExpression, prog, expr);
}
nvrtcResult nvrtcGetLoweredName(nvrtcProgram prog, const char *expr,
                                const char **lowered) {
  CALL(nvrtcGetLoweredName, prog, expr, lowered);
}
/* A failed destroy still destroys: the sweep checks the runtime records
   the failure, and the program must not leak under valgrind. */
nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog) {
  int c = fault(I_nvrtcDestroyProgram);
  nvrtcResult r = real.nvrtcDestroyProgram(prog);
  return c ? (nvrtcResult)c : r;
}
/* A failed nvrtcGetErrorString is one that returns no text. */
const char *nvrtcGetErrorString(nvrtcResult r) {
  return fault(I_nvrtcGetErrorString) ? NULL : real.nvrtcGetErrorString(r);
}
