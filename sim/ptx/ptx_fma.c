/* f32 fma of a whole group with the FMA instructions of an x86-64 CPU
   that has them and AVX2 (ptx_exec.c asks, through run_ctx.fma). Apart
   from the loop's translation unit because it is built without
   -frounding-math (the Makefile), which keeps GCC from vectorizing fmaf:
   it runs only for fma.rn, while the rounding mode is to nearest. */
#include "ptx_exec.h"

#ifdef SIM_X86_FMA
/* D = A * B + C for each of the 32 lanes, rounded once (as fmaf): 1, or
   0 with D untouched when an operand or a result is a NaN (the caller
   gives the GPU's NaN). The results go through t, so that D
   may be one of A, B and C. */
__attribute__((target("avx2,fma"))) int exec_fma_f32_x86(
    uint64_t *D, const uint64_t *A, const uint64_t *B, const uint64_t *C) {
  uint32_t t[32];
  int nan = 0;
  for (int l = 0; l < 32; l++) {
    uint32_t a = (uint32_t)A[l], b = (uint32_t)B[l], c = (uint32_t)C[l];
    float x, y, z, r;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    memcpy(&z, &c, 4);
    nan |= (x != x) | (y != y) | (z != z);
    r = __builtin_fmaf(x, y, z);
    nan |= r != r;
    memcpy(&t[l], &r, 4);
  }
  if (nan) return 0;
  for (int l = 0; l < 32; l++) D[l] = t[l];
  return 1;
}
#endif
