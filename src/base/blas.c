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

cg_blaslt_table cg_cublaslt;

static int lt_candidates(char paths[][CG_PATHLEN], int max) {
  static const char *const names[] = {
    "libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"
  };
  int n = cg_driver_standin("cugraph_blas_standin", paths[0], CG_PATHLEN);
  char dir[CG_PATHLEN / 2];
  if (!n && cg_library_dir(libcublas.handle, "cublasCreate_v2", dir,
                           sizeof dir)) /* the one beside cuBLAS */
    snprintf(paths[n++], CG_PATHLEN, "%s/libcublasLt.so", dir);
  for (size_t i = 0; i < sizeof names / sizeof *names && n < max; i++)
    snprintf(paths[n++], CG_PATHLEN, "%s", names[i]);
  return n;
}

#define LT_SYMBOL(f, args) { #f, &cg_cublaslt.f, 0 },
static const cg_symbol lt_symbols[] = {
  CG_BLASLT_FUNCS(LT_SYMBOL) { NULL, NULL, 0 }
};
#undef LT_SYMBOL

static cg_library libcublaslt = {
  "CUGRAPH_LUA_LIBCUBLASLT", "cuBLASLt",
  "; install the CUDA toolkit's cuBLAS, or name it with "
  "CUGRAPH_LUA_LIBCUBLASLT",
  lt_candidates, lt_symbols, NULL, CG_LIBRARY_STATE
};

const char *cg_blaslt_load(void) {
  const char *why = cg_blas_load();
  return why ? why : cg_library_load(&libcublaslt);
}
