/* What the library stand-ins (sim/nccl, sim/blas, sim/fft) need of the
   software driver that loaded them: its capture test and host nodes, and
   the simulator's run of a stream's work still to run, found
   among the process's libcuda* objects by the symbol only the software
   driver exports (it is opened by path, with RTLD_LOCAL, and --sim names it
   by no variable). */
#ifndef SIM_STANDIN_H
#define SIM_STANDIN_H

#include <cuda.h>
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Calls counted per entry point: for a trace, and for the faults armed
   for the n-th call. */
typedef struct standin_calls {
  pthread_mutex_t lock;
  struct { const char *name; unsigned long calls; } at[32];
} standin_calls;

/* Counts one call of name; returns how many there were. */
static inline unsigned long standin_count(standin_calls *t, const char *name) {
  pthread_mutex_lock(&t->lock);
  int i = 0;
  while (i < 32 && t->at[i].name && strcmp(t->at[i].name, name)) i++;
  unsigned long n = 0;
  if (i < 32) {
    t->at[i].name = name;
    n = ++t->at[i].calls;
  }
  pthread_mutex_unlock(&t->lock);
  return n;
}

/* The code the n-th call of name fails with under the variable var
   ("name:n:code[,...]"), or 0. */
static inline int standin_fault(const char *var, const char *name,
                                unsigned long n) {
  const char *spec = getenv(var);
  size_t len = strlen(name);
  for (const char *p = spec; p && *p;
       p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
    unsigned long at;
    int code;
    if (!strncmp(p, name, len) && p[len] == ':' &&
        sscanf(p + len + 1, "%lu:%d", &at, &code) == 2 && at == n)
      return code;
  }
  return 0;
}

typedef CUresult (*standin_capturing_fn)(CUstream, CUstreamCaptureStatus *);
typedef CUresult (*standin_host_fn)(CUstream, CUhostFn, void *);

static int standin_find(struct dl_phdr_info *info, size_t size, void *out) {
  (void)size;
  const char *name = info->dlpi_name, *base = name ? strrchr(name, '/') : NULL;
  base = base ? base + 1 : name;
  /* only a driver's file is asked for its symbol: opening other objects,
     even with RTLD_NOLOAD, can map their dependencies (leaked under LSan) */
  if (!base || strncmp(base, "libcuda", 7)) return 0;
  void *lib = dlopen(info->dlpi_name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (!lib) return 0;
  if (dlsym(lib, "cugraph_nccl_standin")) {
    *(void **)out = lib;
    return 1;
  }
  dlclose(lib);
  return 0;
}

/* The software driver's cuStreamIsCapturing and cuLaunchHostFunc; left
   NULL when no software driver is loaded. */
static void standin_driver(standin_capturing_fn *capturing,
                           standin_host_fn *host) {
  void *lib = NULL;
  dl_iterate_phdr(standin_find, &lib);
  if (!lib) return;
  void *p = dlsym(lib, "cuStreamIsCapturing");
  memcpy(capturing, &p, sizeof p);
  p = dlsym(lib, "cuLaunchHostFunc");
  memcpy(host, &p, sizeof p);
}

typedef CUresult (*standin_run_fn)(CUstream);

/* Before a call computes at once on the stream s: the work sent to s
   before it runs first (the simulator's strict mode runs work only when
   something waits for it: cuSimRunStream). */
static inline void standin_settle(CUstream s) {
  static standin_run_fn run;
  static int looked;
  if (!__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) {
    void *lib = NULL;
    dl_iterate_phdr(standin_find, &lib);
    void *p = lib ? dlsym(lib, "cuSimRunStream") : NULL;
    memcpy(&run, &p, sizeof p);
    __atomic_store_n(&looked, 1, __ATOMIC_RELEASE);
  }
  if (run) run(s);
}

#endif
