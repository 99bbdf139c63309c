/* The door to cuFFT: the part of its ABI the runtime uses (declared here,
   so that no cuFFT header is needed to build; its enums are ints) and the
   library, loaded with dlopen on first use (CUGRAPH_LUA_LIBCUFFT names
   another; with the software driver, its stand-in beside it is the
   default). */
#ifndef CUGRAPH_FFT_H
#define CUGRAPH_FFT_H

#include <cuda.h>
#include <stddef.h>

typedef int cufftHandle;
typedef int cufftResult;
enum { CUFFT_SUCCESS = 0 };
enum { CUFFT_FORWARD = -1, CUFFT_INVERSE = 1 };
enum { CUFFT_R2C = 0x2a, CUFFT_C2R = 0x2c, CUFFT_C2C = 0x29,
       CUFFT_D2Z = 0x6a, CUFFT_Z2D = 0x6c, CUFFT_Z2Z = 0x69 };

#define CG_FFT_FUNCS(X) \
  X(cufftCreate, (cufftHandle *)) \
  X(cufftDestroy, (cufftHandle)) \
  X(cufftGetVersion, (int *)) \
  X(cufftSetAutoAllocation, (cufftHandle, int)) \
  X(cufftMakePlanMany64, (cufftHandle, int, long long *, long long *, \
                          long long, long long, long long *, long long, \
                          long long, int, long long, size_t *)) \
  X(cufftSetWorkArea, (cufftHandle, void *)) \
  X(cufftSetStream, (cufftHandle, CUstream)) \
  X(cufftExecC2C, (cufftHandle, void *, void *, int)) \
  X(cufftExecZ2Z, (cufftHandle, void *, void *, int)) \
  X(cufftExecR2C, (cufftHandle, void *, void *)) \
  X(cufftExecD2Z, (cufftHandle, void *, void *)) \
  X(cufftExecC2R, (cufftHandle, void *, void *)) \
  X(cufftExecZ2D, (cufftHandle, void *, void *))

#define CG_FFT_FIELD(f, args) cufftResult (*f) args;
typedef struct cg_fft_table {
  CG_FFT_FUNCS(CG_FFT_FIELD)
} cg_fft_table;
#undef CG_FFT_FIELD

extern cg_fft_table cg_cufft;

/* What a cugraph.FFT owns (its cg_handle, freed in release.c): the plan,
   and the work area it was given (0 when it needs none). */
typedef struct cg_fft_res {
  cufftHandle plan;
  CUdeviceptr work;
  size_t bytes;
} cg_fft_res;

/* Loads cuFFT once per process: NULL, or why it is unusable. */
const char *cg_fft_load(void);
/* Each plan, and each call made without one, holds cuFFT from acquire to
   drop; with no holder left, unload closes it (a state's last context
   release calls it), which frees the device memory cuFFT keeps for the
   process: a later plan loads it again. */
const char *cg_fft_acquire(void);
void cg_fft_drop(void);
void cg_fft_unload(void);

#endif
