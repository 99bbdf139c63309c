/* cuFFT, loaded once per process (base/fft.h). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include "base/driver.h"
#include "base/loader.h"
#include "base/fft.h"

cg_fft_table cg_cufft;

/* The stand-in beside the software driver first, then the toolkit's. */
static int candidates(char paths[][CG_PATHLEN], int max) {
  static const char *const names[] = {
    "libcufft.so.12", "libcufft.so.11", "libcufft.so"
  };
  int n = cg_driver_standin("cugraph_fft_standin", paths[0], CG_PATHLEN);
  for (size_t i = 0; i < sizeof names / sizeof *names && n < max; i++)
    snprintf(paths[n++], CG_PATHLEN, "%s", names[i]);
  const char *home = getenv("CUDA_HOME");
  if (home && *home && n < max)
    snprintf(paths[n++], CG_PATHLEN, "%.400s/lib64/libcufft.so", home);
  if (n < max)
    snprintf(paths[n++], CG_PATHLEN, "/usr/local/cuda/lib64/libcufft.so");
  return n;
}

#define SYMBOL(f, args) { #f, &cg_cufft.f, 0 },
static const cg_symbol symbols[] = { CG_FFT_FUNCS(SYMBOL) { NULL, NULL, 0 } };
#undef SYMBOL

static cg_library libcufft = {
  "CUGRAPH_LUA_LIBCUFFT", "cuFFT",
  "; install the CUDA toolkit's cuFFT, or name it with CUGRAPH_LUA_LIBCUFFT",
  candidates, symbols, NULL, CG_LIBRARY_STATE
};

const char *cg_fft_load(void) { return cg_library_load(&libcufft); }
const char *cg_fft_acquire(void) { return cg_library_acquire(&libcufft); }
void cg_fft_drop(void) { cg_library_drop(&libcufft); }
/* the stand-in holds no device memory: it stays */
void cg_fft_unload(void) { cg_library_unload(&libcufft, "cugraph_fft_double"); }
