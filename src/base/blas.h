/* The door to cuBLAS: the part of its ABI the runtime uses (declared here,
   so that no cuBLAS header is needed to build; its enums are ints) and the
   library, loaded with dlopen on first use (CUGRAPH_LUA_LIBCUBLAS names
   another; with the software driver, its stand-in beside it is the
   default). */
#ifndef CUGRAPH_BLAS_H
#define CUGRAPH_BLAS_H

#include <cuda.h>

typedef struct cublasContext *cublasHandle_t;
typedef int cublasStatus_t;
enum { CUBLAS_STATUS_SUCCESS = 0 };
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum { CUBLAS_POINTER_MODE_HOST = 0, CUBLAS_POINTER_MODE_DEVICE = 1 };
enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3 };
enum { CUBLAS_GEMM_DEFAULT = -1 };
/* cudaDataType and cublasComputeType_t */
enum { CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_64F = 70,
       CUBLAS_COMPUTE_32F_FAST_TF32 = 77 };

#define CG_BLAS_FUNCS(X) \
  X(cublasCreate_v2, (cublasHandle_t *)) \
  X(cublasDestroy_v2, (cublasHandle_t)) \
  X(cublasGetProperty, (int, int *)) \
  X(cublasSetStream_v2, (cublasHandle_t, CUstream)) \
  X(cublasSetWorkspace_v2, (cublasHandle_t, void *, size_t)) \
  X(cublasSetPointerMode_v2, (cublasHandle_t, int)) \
  X(cublasGemmEx, (cublasHandle_t, int, int, int, int, int, const void *, \
                   const void *, int, int, const void *, int, int, \
                   const void *, void *, int, int, int, int)) \
  X(cublasGemmStridedBatchedEx, (cublasHandle_t, int, int, int, int, int, \
                   const void *, const void *, int, int, long long, \
                   const void *, int, int, long long, const void *, void *, \
                   int, int, long long, int, int, int)) \
  X(cublasSgemv_v2, (cublasHandle_t, int, int, int, const float *, \
                     const float *, int, const float *, int, const float *, \
                     float *, int)) \
  X(cublasDgemv_v2, (cublasHandle_t, int, int, int, const double *, \
                     const double *, int, const double *, int, \
                     const double *, double *, int)) \
  X(cublasSaxpy_v2, (cublasHandle_t, int, const float *, const float *, int, \
                     float *, int)) \
  X(cublasDaxpy_v2, (cublasHandle_t, int, const double *, const double *, \
                     int, double *, int)) \
  X(cublasSdot_v2, (cublasHandle_t, int, const float *, int, const float *, \
                    int, float *)) \
  X(cublasDdot_v2, (cublasHandle_t, int, const double *, int, \
                    const double *, int, double *)) \
  X(cublasSnrm2_v2, (cublasHandle_t, int, const float *, int, float *)) \
  X(cublasDnrm2_v2, (cublasHandle_t, int, const double *, int, double *))

#define CG_BLAS_FIELD(f, args) cublasStatus_t (*f) args;
typedef struct cg_blas_table {
  CG_BLAS_FUNCS(CG_BLAS_FIELD)
  const char *(*cublasGetStatusName)(cublasStatus_t);
  const char *(*cublasGetStatusString)(cublasStatus_t);
} cg_blas_table;
#undef CG_BLAS_FIELD

extern cg_blas_table cg_cublas;

/* cuBLASLt, for matrix products with fused epilogues (blas:matmul). */
typedef struct cublasLtContext *cublasLtHandle_t;
typedef void *cublasLtMatmulDesc_t, *cublasLtMatrixLayout_t,
             *cublasLtMatmulPreference_t;
typedef struct { unsigned long long data[8]; } cublasLtMatmulAlgo_t;
typedef struct {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
} cublasLtMatmulHeuristicResult_t;
enum { CUBLASLT_MATMUL_DESC_POINTER_MODE = 2, CUBLASLT_MATMUL_DESC_TRANSA = 3,
       CUBLASLT_MATMUL_DESC_TRANSB = 4, CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
       CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
       CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1 };
enum { CUBLASLT_EPILOGUE_DEFAULT = 1, CUBLASLT_EPILOGUE_RELU = 2,
       CUBLASLT_EPILOGUE_BIAS = 4, CUBLASLT_EPILOGUE_GELU = 32 };

#define CG_BLASLT_FUNCS(X) \
  X(cublasLtCreate, (cublasLtHandle_t *)) \
  X(cublasLtDestroy, (cublasLtHandle_t)) \
  X(cublasLtMatmulDescCreate, (cublasLtMatmulDesc_t *, int, int)) \
  X(cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t)) \
  X(cublasLtMatmulDescSetAttribute, (cublasLtMatmulDesc_t, int, \
                                     const void *, size_t)) \
  X(cublasLtMatrixLayoutCreate, (cublasLtMatrixLayout_t *, int, \
                                 unsigned long long, unsigned long long, \
                                 long long)) \
  X(cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t)) \
  X(cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t *)) \
  X(cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t)) \
  X(cublasLtMatmulPreferenceSetAttribute, (cublasLtMatmulPreference_t, int, \
                                           const void *, size_t)) \
  X(cublasLtMatmulAlgoGetHeuristic, (cublasLtHandle_t, cublasLtMatmulDesc_t, \
      cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, \
      cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int, \
      cublasLtMatmulHeuristicResult_t *, int *)) \
  X(cublasLtMatmul, (cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, \
      const void *, cublasLtMatrixLayout_t, const void *, \
      cublasLtMatrixLayout_t, const void *, const void *, \
      cublasLtMatrixLayout_t, void *, cublasLtMatrixLayout_t, \
      const cublasLtMatmulAlgo_t *, void *, size_t, CUstream))

#define CG_BLAS_FIELD(f, args) cublasStatus_t (*f) args;
typedef struct cg_blaslt_table {
  CG_BLASLT_FUNCS(CG_BLAS_FIELD)
} cg_blaslt_table;
#undef CG_BLAS_FIELD

extern cg_blaslt_table cg_cublaslt;

/* Loads cuBLASLt once per process (CUGRAPH_LUA_LIBCUBLASLT, else beside
   the cuBLAS that was loaded): NULL, or why it is unusable. */
const char *cg_blaslt_load(void);

/* What a cugraph.Blas owns (its cg_handle, freed in release.c): the
   handle, and device memory of CG_BLAS_CONSTS bytes of constants (f32 0
   and 1, then f64 0 and 1, for calls in device pointer mode) followed by
   the workspace of bytes given to cublasSetWorkspace. */
typedef struct cg_blas_res {
  cublasHandle_t handle;
  cublasLtHandle_t lt;  /* made by the first blas:matmul, or NULL */
  CUdeviceptr mem;
  size_t bytes;
} cg_blas_res;
enum { CG_BLAS_CONSTS = 256 };

/* Loads cuBLAS once per process: NULL, or why it is unusable. */
const char *cg_blas_load(void);

#endif
