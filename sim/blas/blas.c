/* A stand-in for libcublas.so, for the specs on machines without GPUs.
   Built as build/libcublas-double.so and loaded by default with the
   software driver (its cugraph_blas_standin), it exports the cuBLAS calls
   the runtime makes and computes them on the host, where the software
   driver's device memory lives: column-major, as cuBLAS; f32 products
   summed in float (in TF32 compute, each input rounded to TF32 first), f64
   in double, f16 and bf16 in float and rounded once into the result.

   It checks its arguments as cuBLAS does (CUBLAS_STATUS_INVALID_VALUE for
   a bad size, leading dimension, stride or type) and reads alpha and beta
   as the pointer mode says: from the host at the call, or from device
   memory when the call runs. On a capturing stream (the software driver's
   cuStreamIsCapturing) a call becomes a host node (cuLaunchHostFunc) that
   computes it each time the graph runs, its record kept by the handle;
   otherwise it runs at once, the software driver's streams being
   synchronous.

   CUBLAS_DOUBLE_FAULT=name:n:status[,...] makes the n-th call of an entry
   point fail with that status before it does anything. */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "halfconv.h"
#include "standin.h"

typedef int cublasStatus_t;
enum { OK = 0, NOT_INITIALIZED = 1, ALLOC_FAILED = 3, INVALID_VALUE = 7,
       EXECUTION_FAILED = 13, NOT_SUPPORTED = 15 };
enum { R_32F = 0, R_64F = 1, R_16F = 2, R_16BF = 14 };
enum { COMPUTE_32F = 68, COMPUTE_32F_FAST_TF32 = 77, COMPUTE_64F = 70 };
enum { MODE_HOST = 0, MODE_DEVICE = 1 };

enum { GEMM, GEMV, AXPY, DOT, NRM2 };

/* One call, as recorded: everything it reads when it runs. */
typedef struct op {
  struct op *next;      /* the handle's kept records */
  int kind, ta, tb, m, n, k, type, compute, batch, lda, ldb, ldc;
  long long sa, sb, sc;
  int device;           /* alpha and beta are device pointers */
  int epi;              /* cuBLASLt's epilogue (relu 2, bias 4, gelu 32) */
  const void *bias;
  const void *alpha_p, *beta_p;
  double alpha, beta;   /* host mode: the values at the call */
  const void *a, *b;
  void *c;              /* gemm's c; gemv, axpy's y; dot, nrm2's result */
} op;

struct cublasContext {
  CUstream stream;
  int mode;
  void *workspace;
  size_t bytes;
  op *kept;             /* records of captured calls, freed with it */
};
typedef struct cublasContext *cublasHandle_t;

/* -- injected faults ------------------------------------------------------ */

static standin_calls counts = { PTHREAD_MUTEX_INITIALIZER, {{0, 0}} };

static cublasStatus_t injected(const char *name) {
  const char *spec = getenv("CUBLAS_DOUBLE_FAULT");
  if (!spec || !*spec) return OK;
  return standin_fault("CUBLAS_DOUBLE_FAULT", name,
                       standin_count(&counts, name));
}

#define ENTRY(name) do { \
    cublasStatus_t r_ = injected(#name); \
    if (r_) return r_; \
  } while (0)

/* -- element access --------------------------------------------------------- */

static double load(int type, const void *p, long long i) {
  switch (type) {
  case R_32F: return ((const float *)p)[i];
  case R_64F: return ((const double *)p)[i];
  default: return half_to_float(((const uint16_t *)p)[i], type == R_16BF);
  }
}

static void store(int type, void *p, long long i, double v) {
  switch (type) {
  case R_32F: ((float *)p)[i] = (float)v; break;
  case R_64F: ((double *)p)[i] = v; break;
  default: ((uint16_t *)p)[i] = float_to_half((float)v, type == R_16BF);
  }
}

/* An f32 input of TF32 compute: 10 bits of mantissa, to nearest even. */
static float tf32(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7f800000) != 0x7f800000)
    u = (u + 0xfff + ((u >> 13) & 1)) & ~0x1fffu;
  memcpy(&f, &u, 4);
  return f;
}

/* -- running a call ----------------------------------------------------------- */

static void scales(const op *o, double *alpha, double *beta) {
  int f64 = o->compute == COMPUTE_64F || (o->kind != GEMM && o->type == R_64F);
  if (!o->device) {
    *alpha = o->alpha;
    *beta = o->beta;
    return;
  }
  *alpha = f64 ? *(const double *)o->alpha_p : *(const float *)o->alpha_p;
  *beta = !o->beta_p ? 0 : f64 ? *(const double *)o->beta_p
                                : *(const float *)o->beta_p;
}

/* cuBLASLt's epilogue on element of row i: the bias, then relu or gelu
   (the tanh form, as cuBLASLt's), in float. */
static double epilogue(const op *o, double r, int i) {
  if (!o->epi) return r;
  float v = (float)r;
  if (o->epi & 4) v += (float)load(o->type, o->bias, i);
  if (o->epi & 2) v = v > 0 ? v : 0;
  if (o->epi & 32)
    v = 0.5f * v * (1 + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
  return v;
}

static void gemm(const op *o, double alpha, double beta) {
  int f64 = o->compute == COMPUTE_64F, t32 = o->compute == COMPUTE_32F_FAST_TF32;
  for (int b = 0; b < o->batch; b++) {
    const void *a = (const char *)o->a, *bm = (const char *)o->b;
    long long oa = b * o->sa, ob = b * o->sb, oc = b * o->sc;
    for (int j = 0; j < o->n; j++)
      for (int i = 0; i < o->m; i++) {
        double sd = 0;
        float sf = 0;
        for (int l = 0; l < o->k; l++) {
          long long ia = o->ta ? oa + (long long)i * o->lda + l
                               : oa + (long long)l * o->lda + i;
          long long ib = o->tb ? ob + (long long)l * o->ldb + j
                               : ob + (long long)j * o->ldb + l;
          double x = load(o->type, a, ia), y = load(o->type, bm, ib);
          if (f64) sd += x * y;
          else if (t32) sf += tf32((float)x) * tf32((float)y);
          else sf += (float)x * (float)y;
        }
        long long ic = oc + (long long)j * o->ldc + i;
        double r;
        if (f64) r = alpha * sd + (beta != 0 ? beta * load(o->type, o->c, ic) : 0);
        else r = (float)alpha * sf + (beta != 0 ? (float)beta *
                 (float)load(o->type, o->c, ic) : 0.0f);
        store(o->type, o->c, ic, epilogue(o, r, i));
      }
  }
}

static void run(const op *o) {
  double alpha = 0, beta = 0;
  if (o->kind == GEMM || o->kind == GEMV || o->kind == AXPY)
    scales(o, &alpha, &beta);
  int t = o->type;
  switch (o->kind) {
  case GEMM: gemm(o, alpha, beta); break;
  case GEMV: { /* y = alpha op(a) x + beta y; a m x n */
    int ny = o->ta ? o->n : o->m, nx = o->ta ? o->m : o->n;
    for (int i = 0; i < ny; i++) {
      double s = 0;
      for (int l = 0; l < nx; l++) {
        long long ia = o->ta ? (long long)i * o->lda + l
                             : (long long)l * o->lda + i;
        s += load(t, o->a, ia) * load(t, o->b, (long long)l * o->sb);
      }
      if (t == R_32F) s = (float)s;
      long long iy = (long long)i * o->sc;
      store(t, o->c, iy, alpha * s + (beta != 0 ? beta * load(t, o->c, iy) : 0));
    }
    break;
  }
  case AXPY:
    for (int i = 0; i < o->n; i++) {
      long long iy = i * o->sc;
      store(t, o->c, iy, alpha * load(t, o->a, i * o->sa) + load(t, o->c, iy));
    }
    break;
  case DOT: case NRM2: {
    double s = 0;
    for (int i = 0; i < o->n; i++) {
      double x = load(t, o->a, i * o->sa);
      s += o->kind == DOT ? x * load(t, o->b, i * o->sb) : x * x;
    }
    store(t, o->c, 0, o->kind == NRM2 ? sqrt(s) : s);
    break;
  }
  }
}

/* -- the software driver's capture ------------------------------------------- */

static standin_capturing_fn is_capturing;
static standin_host_fn launch_host;

static void find_driver(void) { standin_driver(&is_capturing, &launch_host); }

static void host_node(void *p) { run(p); }

/* Runs o now, or records it into the graph its stream captures. */
static cublasStatus_t issue_on(CUstream s, op **kept, op *o) {
  if (!launch_host) find_driver();
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  if (is_capturing && is_capturing(s, &st) == CUDA_SUCCESS &&
      st != CU_STREAM_CAPTURE_STATUS_NONE) {
    if (!launch_host) return NOT_SUPPORTED;
    op *k = malloc(sizeof *k);
    if (!k) return ALLOC_FAILED;
    *k = *o;
    k->next = *kept;
    *kept = k;
    return launch_host(s, host_node, k) == CUDA_SUCCESS
               ? OK : EXECUTION_FAILED;
  }
  standin_settle(s);
  run(o);
  return OK;
}

static cublasStatus_t issue(cublasHandle_t h, op *o) {
  return issue_on(h->stream, &h->kept, o);
}

/* alpha and beta as the handle's pointer mode says; f64: their type. */
static void take_scales(cublasHandle_t h, op *o, const void *alpha,
                        const void *beta, int f64) {
  o->device = h->mode == MODE_DEVICE;
  o->alpha_p = alpha;
  o->beta_p = beta;
  if (!o->device) {
    o->alpha = f64 ? *(const double *)alpha : *(const float *)alpha;
    o->beta = !beta ? 0 : f64 ? *(const double *)beta : *(const float *)beta;
  }
}

/* -- entry points ------------------------------------------------------------ */

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle);
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle);
cublasStatus_t cublasGetProperty(int type, int *value);
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, CUstream s);
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *ws,
                                     size_t bytes);
cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, int mode);
const char *cublasGetStatusName(cublasStatus_t s);
const char *cublasGetStatusString(cublasStatus_t s);

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle) {
  ENTRY(cublasCreate_v2);
  if (!handle) return INVALID_VALUE;
  *handle = calloc(1, sizeof **handle);
  return *handle ? OK : ALLOC_FAILED;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  ENTRY(cublasDestroy_v2);
  if (!handle) return NOT_INITIALIZED;
  for (op *o = handle->kept, *next; o; o = next) {
    next = o->next;
    free(o);
  }
  free(handle);
  return OK;
}

cublasStatus_t cublasGetProperty(int type, int *value) {
  static const int v[3] = { 13, 1, 0 };
  if (!value || type < 0 || type > 2) return INVALID_VALUE;
  *value = v[type];
  return OK;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, CUstream s) {
  ENTRY(cublasSetStream_v2);
  if (!handle) return NOT_INITIALIZED;
  handle->stream = s;
  handle->workspace = NULL; /* as cuBLAS: back to its own pool */
  handle->bytes = 0;
  return OK;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *ws,
                                     size_t bytes) {
  ENTRY(cublasSetWorkspace_v2);
  if (!handle) return NOT_INITIALIZED;
  if ((uintptr_t)ws % 256) return INVALID_VALUE; /* cuBLAS: 256-byte aligned */
  handle->workspace = ws;
  handle->bytes = bytes;
  return OK;
}

cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, int mode) {
  ENTRY(cublasSetPointerMode_v2);
  if (!handle) return NOT_INITIALIZED;
  if (mode != MODE_HOST && mode != MODE_DEVICE) return INVALID_VALUE;
  handle->mode = mode;
  return OK;
}

static const char *const status_names[] = {
  [0] = "CUBLAS_STATUS_SUCCESS", [1] = "CUBLAS_STATUS_NOT_INITIALIZED",
  [3] = "CUBLAS_STATUS_ALLOC_FAILED", [7] = "CUBLAS_STATUS_INVALID_VALUE",
  [8] = "CUBLAS_STATUS_ARCH_MISMATCH", [11] = "CUBLAS_STATUS_MAPPING_ERROR",
  [13] = "CUBLAS_STATUS_EXECUTION_FAILED",
  [14] = "CUBLAS_STATUS_INTERNAL_ERROR", [15] = "CUBLAS_STATUS_NOT_SUPPORTED",
};
static const char *const status_texts[] = {
  [0] = "success", [1] = "the library was not initialized",
  [3] = "the resource allocation failed", [7] = "an invalid numeric value was used as an argument",
  [8] = "an absent device architectural feature is required",
  [11] = "an access to GPU memory space failed",
  [13] = "the GPU program failed to execute",
  [14] = "an internal operation failed",
  [15] = "the functionality requested is not supported",
};

const char *cublasGetStatusName(cublasStatus_t s) {
  return s >= 0 && s <= 15 && status_names[s] ? status_names[s]
                                              : "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasGetStatusString(cublasStatus_t s) {
  return s >= 0 && s <= 15 && status_texts[s] ? status_texts[s]
                                              : "unknown error";
}

static int type_ok(int t) {
  return t == R_32F || t == R_64F || t == R_16F || t == R_16BF;
}

/* The checks cuBLAS makes of a gemm, and its compute type against the
   data type. */
static cublasStatus_t gemm_args(int ta, int tb, int m, int n, int k, int at,
                                int bt, int ct, int lda, int ldb, int ldc,
                                int compute) {
  int ra = ta ? k : m, rb = tb ? n : k;
  if (ta < 0 || ta > 1 || tb < 0 || tb > 1 || m < 0 || n < 0 || k < 0)
    return INVALID_VALUE;
  if (lda < (ra > 1 ? ra : 1) || ldb < (rb > 1 ? rb : 1) ||
      ldc < (m > 1 ? m : 1))
    return INVALID_VALUE;
  if (!type_ok(at) || at != bt || at != ct) return NOT_SUPPORTED;
  if ((at == R_64F) != (compute == COMPUTE_64F)) return NOT_SUPPORTED;
  if (compute == COMPUTE_32F_FAST_TF32 && at != R_32F) return NOT_SUPPORTED;
  if (compute != COMPUTE_32F && compute != COMPUTE_64F &&
      compute != COMPUTE_32F_FAST_TF32)
    return NOT_SUPPORTED;
  return OK;
}

cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t h, int ta, int tb, int m, int n, int k, const void *alpha,
    const void *a, int at, int lda, long long sa, const void *b, int bt,
    int ldb, long long sb, const void *beta, void *c, int ct, int ldc,
    long long sc, int batch, int compute, int algo);
cublasStatus_t cublasGemmEx(cublasHandle_t h, int ta, int tb, int m, int n,
                            int k, const void *alpha, const void *a, int at,
                            int lda, const void *b, int bt, int ldb,
                            const void *beta, void *c, int ct, int ldc,
                            int compute, int algo);

static cublasStatus_t gemm_call(cublasHandle_t h, int ta, int tb, int m,
                                int n, int k, const void *alpha,
                                const void *a, int at, int lda, long long sa,
                                const void *b, int bt, int ldb, long long sb,
                                const void *beta, void *c, int ct, int ldc,
                                long long sc, int batch, int compute) {
  if (!h) return NOT_INITIALIZED;
  cublasStatus_t r = gemm_args(ta, tb, m, n, k, at, bt, ct, lda, ldb, ldc,
                               compute);
  if (r) return r;
  if (batch < 0 || sa < 0 || sb < 0 || sc < 0 || !alpha || !beta)
    return INVALID_VALUE;
  op o = { .kind = GEMM, .ta = ta, .tb = tb, .m = m, .n = n, .k = k,
           .type = at, .compute = compute, .batch = batch, .lda = lda,
           .ldb = ldb, .ldc = ldc, .sa = sa, .sb = sb, .sc = sc, .a = a,
           .b = b, .c = c };
  take_scales(h, &o, alpha, beta, compute == COMPUTE_64F);
  if (!m || !n || !batch) return OK;
  return issue(h, &o);
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, int ta, int tb, int m, int n,
                            int k, const void *alpha, const void *a, int at,
                            int lda, const void *b, int bt, int ldb,
                            const void *beta, void *c, int ct, int ldc,
                            int compute, int algo) {
  ENTRY(cublasGemmEx);
  (void)algo;
  return gemm_call(h, ta, tb, m, n, k, alpha, a, at, lda, 0, b, bt, ldb, 0,
                   beta, c, ct, ldc, 0, 1, compute);
}

cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t h, int ta, int tb, int m, int n, int k, const void *alpha,
    const void *a, int at, int lda, long long sa, const void *b, int bt,
    int ldb, long long sb, const void *beta, void *c, int ct, int ldc,
    long long sc, int batch, int compute, int algo) {
  ENTRY(cublasGemmStridedBatchedEx);
  (void)algo;
  return gemm_call(h, ta, tb, m, n, k, alpha, a, at, lda, sa, b, bt, ldb, sb,
                   beta, c, ct, ldc, sc, batch, compute);
}

static cublasStatus_t gemv(cublasHandle_t h, int type, int tr, int m, int n,
                           const void *alpha, const void *a, int lda,
                           const void *x, int incx, const void *beta,
                           void *y, int incy) {
  if (!h) return NOT_INITIALIZED;
  if (tr < 0 || tr > 1 || m < 0 || n < 0 || lda < (m > 1 ? m : 1) ||
      !incx || !incy || !alpha || !beta)
    return INVALID_VALUE;
  if (incx < 0 || incy < 0) return NOT_SUPPORTED; /* not modelled */
  op o = { .kind = GEMV, .ta = tr, .m = m, .n = n, .type = type, .lda = lda,
           .sb = incx, .sc = incy, .a = a, .b = x, .c = y };
  take_scales(h, &o, alpha, beta, type == R_64F);
  if (!m || !n) return OK;
  return issue(h, &o);
}

static cublasStatus_t vec(cublasHandle_t h, int kind, int type, int n,
                          const void *alpha, const void *x, int incx,
                          const void *y, int incy, void *out) {
  if (!h) return NOT_INITIALIZED;
  if (n < 0 || !out || (kind == AXPY && !alpha)) return INVALID_VALUE;
  if (incx <= 0 || (kind != NRM2 && incy <= 0))
    return NOT_SUPPORTED; /* not modelled */
  op o = { .kind = kind, .n = n, .type = type, .sa = incx, .sb = incy,
           .sc = incy, .a = x, .b = y, .c = out };
  if (kind == AXPY) { /* a reduction's result: host or device, one store */
    take_scales(h, &o, alpha, NULL, type == R_64F);
    if (!n) return OK;
  }
  return issue(h, &o);
}

#define GEMV(name, T, type) \
  cublasStatus_t name(cublasHandle_t h, int tr, int m, int n, const T *alpha, \
                      const T *a, int lda, const T *x, int incx, \
                      const T *beta, T *y, int incy); \
  cublasStatus_t name(cublasHandle_t h, int tr, int m, int n, const T *alpha, \
                      const T *a, int lda, const T *x, int incx, \
                      const T *beta, T *y, int incy) { \
    ENTRY(name); \
    return gemv(h, type, tr, m, n, alpha, a, lda, x, incx, beta, y, incy); \
  }
GEMV(cublasSgemv_v2, float, R_32F)
GEMV(cublasDgemv_v2, double, R_64F)

#define AXPY_(name, T, type) \
  cublasStatus_t name(cublasHandle_t h, int n, const T *alpha, const T *x, \
                      int incx, T *y, int incy); \
  cublasStatus_t name(cublasHandle_t h, int n, const T *alpha, const T *x, \
                      int incx, T *y, int incy) { \
    ENTRY(name); \
    return vec(h, AXPY, type, n, alpha, x, incx, y, incy, y); \
  }
AXPY_(cublasSaxpy_v2, float, R_32F)
AXPY_(cublasDaxpy_v2, double, R_64F)

#define DOT_(name, T, type) \
  cublasStatus_t name(cublasHandle_t h, int n, const T *x, int incx, \
                      const T *y, int incy, T *r); \
  cublasStatus_t name(cublasHandle_t h, int n, const T *x, int incx, \
                      const T *y, int incy, T *r) { \
    ENTRY(name); \
    return vec(h, DOT, type, n, NULL, x, incx, y, incy, r); \
  }
DOT_(cublasSdot_v2, float, R_32F)
DOT_(cublasDdot_v2, double, R_64F)

#define NRM2_(name, T, type) \
  cublasStatus_t name(cublasHandle_t h, int n, const T *x, int incx, T *r); \
  cublasStatus_t name(cublasHandle_t h, int n, const T *x, int incx, T *r) { \
    ENTRY(name); \
    return vec(h, NRM2, type, n, NULL, x, incx, NULL, 1, r); \
  }
NRM2_(cublasSnrm2_v2, float, R_32F)
NRM2_(cublasDnrm2_v2, double, R_64F)

/* -- cuBLASLt ---------------------------------------------------------------- */

typedef struct cublasLtContext { op *kept; } lt_handle;
typedef struct { int compute, scale, ta, tb, mode, epi; const void *bias; } lt_desc;
typedef struct { int type; unsigned long long rows, cols; long long ld; } lt_layout;
typedef struct { unsigned long long data[8]; } lt_algo;
typedef struct {
  lt_algo algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
} lt_result;

cublasStatus_t cublasLtCreate(lt_handle **h);
cublasStatus_t cublasLtDestroy(lt_handle *h);
cublasStatus_t cublasLtMatmulDescCreate(lt_desc **d, int compute, int scale);
cublasStatus_t cublasLtMatmulDescDestroy(lt_desc *d);
cublasStatus_t cublasLtMatmulDescSetAttribute(lt_desc *d, int attr,
                                              const void *v, size_t n);
cublasStatus_t cublasLtMatrixLayoutCreate(lt_layout **l, int type,
                                          unsigned long long rows,
                                          unsigned long long cols, long long ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(lt_layout *l);
cublasStatus_t cublasLtMatmulPreferenceCreate(void **p);
cublasStatus_t cublasLtMatmulPreferenceDestroy(void *p);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(void *p, int attr,
                                                    const void *v, size_t n);
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(lt_handle *h, lt_desc *d,
    lt_layout *a, lt_layout *b, lt_layout *c, lt_layout *dl, void *pref,
    int want, lt_result *out, int *found);
cublasStatus_t cublasLtMatmul(lt_handle *h, lt_desc *d, const void *alpha,
    const void *a, lt_layout *la, const void *b, lt_layout *lb,
    const void *beta, const void *c, lt_layout *lc, void *dp, lt_layout *ld,
    const lt_algo *algo, void *ws, size_t bytes, CUstream s);

cublasStatus_t cublasLtCreate(lt_handle **h) {
  ENTRY(cublasLtCreate);
  if (!h) return INVALID_VALUE;
  return (*h = calloc(1, sizeof **h)) ? OK : ALLOC_FAILED;
}

cublasStatus_t cublasLtDestroy(lt_handle *h) {
  ENTRY(cublasLtDestroy);
  if (!h) return NOT_INITIALIZED;
  for (op *o = h->kept, *next; o; o = next) {
    next = o->next;
    free(o);
  }
  free(h);
  return OK;
}

cublasStatus_t cublasLtMatmulDescCreate(lt_desc **d, int compute, int scale) {
  ENTRY(cublasLtMatmulDescCreate);
  if (!d) return INVALID_VALUE;
  if (!(*d = calloc(1, sizeof **d))) return ALLOC_FAILED;
  (*d)->compute = compute;
  (*d)->scale = scale;
  (*d)->epi = 1;
  return OK;
}

cublasStatus_t cublasLtMatmulDescDestroy(lt_desc *d) {
  free(d);
  return OK;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(lt_desc *d, int attr,
                                              const void *v, size_t n) {
  ENTRY(cublasLtMatmulDescSetAttribute);
  if (!d || !v) return INVALID_VALUE;
  int32_t i = 0;
  if (n == 4) memcpy(&i, v, 4);
  switch (attr) {
  case 2: d->mode = i; break;
  case 3: d->ta = i; break;
  case 4: d->tb = i; break;
  case 7: d->epi = i; break;
  case 8: if (n != sizeof d->bias) return INVALID_VALUE;
    memcpy(&d->bias, v, n); break;
  default: return NOT_SUPPORTED; /* not modelled */
  }
  return OK;
}

cublasStatus_t cublasLtMatrixLayoutCreate(lt_layout **l, int type,
                                          unsigned long long rows,
                                          unsigned long long cols, long long ld) {
  ENTRY(cublasLtMatrixLayoutCreate);
  if (!l) return INVALID_VALUE;
  if (!type_ok(type)) return NOT_SUPPORTED;
  if (!(*l = calloc(1, sizeof **l))) return ALLOC_FAILED;
  **l = (lt_layout){ type, rows, cols, ld };
  return OK;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(lt_layout *l) {
  free(l);
  return OK;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(void **p) {
  if (!p) return INVALID_VALUE;
  return (*p = calloc(1, 8)) ? OK : ALLOC_FAILED;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(void *p) {
  free(p);
  return OK;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(void *p, int attr,
                                                    const void *v, size_t n) {
  (void)attr; (void)v; (void)n;
  return p ? OK : INVALID_VALUE;
}

/* One algorithm for any product the stand-in computes. */
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(lt_handle *h, lt_desc *d,
    lt_layout *a, lt_layout *b, lt_layout *c, lt_layout *dl, void *pref,
    int want, lt_result *out, int *found) {
  ENTRY(cublasLtMatmulAlgoGetHeuristic);
  if (!h || !d || !a || !b || !c || !dl || !pref || want < 1 || !out || !found)
    return INVALID_VALUE;
  memset(out, 0, sizeof *out);
  *found = 1;
  return OK;
}

cublasStatus_t cublasLtMatmul(lt_handle *h, lt_desc *d, const void *alpha,
    const void *a, lt_layout *la, const void *b, lt_layout *lb,
    const void *beta, const void *c, lt_layout *lc, void *dp, lt_layout *ld,
    const lt_algo *algo, void *ws, size_t bytes, CUstream s) {
  ENTRY(cublasLtMatmul);
  (void)algo; (void)ws; (void)bytes;
  if (!h || !d || !la || !lb || !lc || !ld || !alpha || !beta)
    return INVALID_VALUE;
  if (c != dp || lc->rows != ld->rows || lc->cols != ld->cols)
    return NOT_SUPPORTED; /* D = C only, as the runtime calls it */
  int m = (int)lc->rows, n = (int)lc->cols;
  int k = (int)(d->ta ? la->rows : la->cols);
  if ((unsigned long long)k != (d->tb ? lb->cols : lb->rows) ||
      (unsigned long long)m != (d->ta ? la->cols : la->rows) ||
      (unsigned long long)n != (d->tb ? lb->rows : lb->cols))
    return INVALID_VALUE;
  if ((d->epi & 4) && !d->bias) return INVALID_VALUE;
  op o = { .kind = GEMM, .ta = d->ta, .tb = d->tb, .m = m, .n = n, .k = k,
           .type = la->type, .compute = d->compute, .batch = 1,
           .lda = (int)la->ld, .ldb = (int)lb->ld, .ldc = (int)lc->ld,
           .a = a, .b = b, .c = dp, .epi = d->epi == 1 ? 0 : d->epi,
           .bias = d->bias };
  struct cublasContext mode = { .mode = d->mode };
  take_scales(&mode, &o, alpha, beta, d->compute == COMPUTE_64F);
  if (!m || !n) return OK;
  return issue_on(s, &h->kept, &o);
}
