/* cuBLAS, loaded once per process (base/blas.h). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include "base/driver.h"
#include "base/loader.h"
#include "base/blas.h"

cg_blas_table cg_cublas;

/* The stand-in beside the software driver first, then the toolkit's. */
static int candidates(char paths[][CG_PATHLEN], int max) {
  static const char *const names[] = {
    "libcublas.so.13", "libcublas.so.12", "libcublas.so"
  };
  int n = cg_driver_standin("cugraph_blas_standin", paths[0], CG_PATHLEN);
  for (size_t i = 0; i < sizeof names / sizeof *names && n < max; i++)
    snprintf(paths[n++], CG_PATHLEN, "%s", names[i]);
  const char *home = getenv("CUDA_HOME");
  if (home && *home && n < max)
    snprintf(paths[n++], CG_PATHLEN, "%.400s/lib64/libcublas.so", home);
  if (n < max)
    snprintf(paths[n++], CG_PATHLEN, "/usr/local/cuda/lib64/libcublas.so");
  return n;
}

#define SYMBOL(f, args) { #f, &cg_cublas.f, 0 },
static const cg_symbol symbols[] = {
  CG_BLAS_FUNCS(SYMBOL)
  { "cublasGetStatusName", &cg_cublas.cublasGetStatusName, 1 },
  { "cublasGetStatusString", &cg_cublas.cublasGetStatusString, 1 },
  { NULL, NULL, 0 }
};
#undef SYMBOL

static cg_library libcublas = {
  "CUGRAPH_LUA_LIBCUBLAS", "cuBLAS",
  "; install the CUDA toolkit's cuBLAS, or name it with CUGRAPH_LUA_LIBCUBLAS",
  candidates, symbols, NULL, CG_LIBRARY_STATE
};

const char *cg_blas_load(void) { return cg_library_load(&libcublas); }
