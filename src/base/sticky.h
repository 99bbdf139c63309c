/* The errors after which a CUDA context can never work again: the binding
   poisons its context on them, the software driver breaks its device. One
   list for both (sim/ includes this header). */
#ifndef CUGRAPH_STICKY_H
#define CUGRAPH_STICKY_H

#include <cuda.h>

static inline int cg_sticky(CUresult r) {
  switch (r) {
  case CUDA_ERROR_ILLEGAL_ADDRESS: case CUDA_ERROR_LAUNCH_FAILED:
  case CUDA_ERROR_MISALIGNED_ADDRESS: case CUDA_ERROR_ILLEGAL_INSTRUCTION:
  case CUDA_ERROR_HARDWARE_STACK_ERROR: case CUDA_ERROR_INVALID_PC:
  case CUDA_ERROR_INVALID_ADDRESS_SPACE: case CUDA_ERROR_ASSERT:
  case CUDA_ERROR_LAUNCH_TIMEOUT: case CUDA_ERROR_ECC_UNCORRECTABLE:
  case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    return 1;
  default:
    return 0;
  }
}

#endif
