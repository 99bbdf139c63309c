/* NCCL's library: found, opened and resolved once per process. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include "base/driver.h"
#include "base/loader.h"
#include "base/nccl.h"

cg_nccl_table cg_nccl;

/* With the software driver, its NCCL stand-in (named by the driver's
   cugraph_nccl_standin, in the driver's folder) comes first. */
static int candidates(char paths[][CG_PATHLEN], int max) {
  int n = cg_driver_standin("cugraph_nccl_standin", paths[0], CG_PATHLEN);
  if (n < max) snprintf(paths[n++], CG_PATHLEN, "libnccl.so.2");
  return n;
}

#define SYMBOL(f, args) { #f, &cg_nccl.f, 0 },
static const cg_symbol symbols[] = {
  CG_NCCL_FUNCS(SYMBOL)
  { "ncclGetErrorString", &cg_nccl.ncclGetErrorString, 0 },
  { "ncclGetLastError", &cg_nccl.ncclGetLastError, 1 },
  { NULL, NULL, 0 }
};
#undef SYMBOL

static cg_library libnccl = {
  "CUGRAPH_LUA_LIBNCCL", "NCCL",
  "; install NCCL 2.9 or later, or name it with CUGRAPH_LUA_LIBNCCL",
  candidates, symbols, NULL, CG_LIBRARY_STATE
};

const char *cg_nccl_load(void) { return cg_library_load(&libnccl); }

const char *cg_nccl_result_name(ncclResult_t r) {
  static const char *const names[] = {
    "ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError",
    "ncclInternalError", "ncclInvalidArgument", "ncclInvalidUsage",
    "ncclRemoteError", "ncclInProgress"
  };
  return r >= 0 && r <= ncclInProgress ? names[r] : NULL;
}
