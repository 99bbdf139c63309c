/* Device memory in use, for the leak checks of the spec hosts. On a GPU,
   what NVML counts for this process: other processes on the device (make
   sanitize-gpu runs several specs at once) do not move it. On the
   software drivers (CUGRAPH_LUA_LIBCUDA), or where NVML cannot say, the
   whole device's used memory from the cuMemGetInfo the host passes. */
#ifndef SPEC_DEVMEM_H
#define SPEC_DEVMEM_H

#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <cuda.h>

/* NVML's process record (nvmlProcessInfo_v2_t) and the calls used */
typedef struct {
  unsigned int pid;
  unsigned long long used;
  unsigned int gpu_instance, compute_instance;
} devmem_proc;
typedef int (*devmem_init_fn)(void);
typedef int (*devmem_handle_fn)(const char *, void **);
typedef int (*devmem_procs_fn)(void *, unsigned int *, devmem_proc *);

static void *devmem_nvml_device(CUdevice dev, devmem_procs_fn *procs) {
  static void *lib;
  static void *handle;
  static devmem_procs_fn list;
  if (handle) {
    *procs = list;
    return handle;
  }
  if (getenv("CUGRAPH_LUA_LIBCUDA") && *getenv("CUGRAPH_LUA_LIBCUDA"))
    return NULL;
  if (!lib && !(lib = dlopen("libnvidia-ml.so.1", RTLD_NOW))) return NULL;
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
  CUresult (*busid)(char *, int, CUdevice) = NULL;
  devmem_init_fn init;
  devmem_handle_fn get;
  if (cuda) *(void **)&busid = dlsym(cuda, "cuDeviceGetPCIBusId");
  *(void **)&init = dlsym(lib, "nvmlInit_v2");
  *(void **)&get = dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
  *(void **)&list = dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3");
  if (!list)
    *(void **)&list = dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v2");
  char id[32];
  if (!busid || !init || !get || !list || init() != 0 ||
      busid(id, (int)sizeof id, dev) != CUDA_SUCCESS || get(id, &handle) != 0)
    return handle = NULL;
  *procs = list;
  return handle;
}

/* Bytes in use: this process's (NVML), else the device's; 0 on failure,
   with *ok cleared. */
static size_t devmem_used(CUresult (*meminfo)(size_t *, size_t *),
                          CUdevice dev, int *ok) {
  devmem_procs_fn procs;
  void *h = devmem_nvml_device(dev, &procs);
  if (h) {
    devmem_proc v[256];
    unsigned int n = sizeof v / sizeof *v;
    if (procs(h, &n, v) == 0) {
      for (unsigned int i = 0; i < n; i++)
        if (v[i].pid == (unsigned int)getpid()) return (size_t)v[i].used;
      /* not listed (another pid namespace): the device's, below */
    }
  }
  size_t fr, total;
  if (meminfo(&fr, &total) != CUDA_SUCCESS) {
    *ok = 0;
    return 0;
  }
  return total - fr;
}

/* Bytes in use once they are at most target, or after 10 s: the memory a
   released graph used is freed by a thread of the runtime once the
   driver says its last launch is over, after the release returned. */
static size_t devmem_settled(CUresult (*meminfo)(size_t *, size_t *),
                             CUdevice dev, size_t target, int *ok) {
  size_t used = devmem_used(meminfo, dev, ok);
  for (int i = 0; *ok && used > target && i < 1000; i++) {
    struct timespec ms10 = { 0, 10000000 };
    nanosleep(&ms10, NULL);
    used = devmem_used(meminfo, dev, ok);
  }
  return used;
}

#endif
