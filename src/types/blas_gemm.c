/* cugraph.Blas's matrix products: h:gemm (cuBLAS) and h:matmul (one
   cuBLASLt call with its epilogue), their shapes checked in one place. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include "types/blas_call.h"

const char *const cg_blas_gemm_keys[] = {
  "m", "n", "k", "transa", "transb", "lda", "ldb", "ldc", "alpha", "beta",
  "tf32", "batch", "stride_a", "stride_b", "stride_c", NULL
};
const char *const cg_blas_matmul_keys[] = {
  "m", "n", "k", "transa", "transb", "lda", "ldb", "ldc", "alpha", "beta",
  "tf32", "bias", "epilogue", NULL
};

/* The scale type of element type t for gemm: f64 for f64, else f32. */
static cg_type scale_type(cg_type t) { return t == CG_F64 ? CG_F64 : CG_F32; }

static int data_type(lua_State *L, cg_type t, const char *fn) {
  switch (t) {
  case CG_F32: return CUDA_R_32F;
  case CG_F64: return CUDA_R_64F;
  case CG_F16: return CUDA_R_16F;
  case CG_BF16: return CUDA_R_16BF;
  default:
    return luaL_error(L, "blas:%s: cuBLAS has no %s matrices (f32, f64, f16 "
                      "or bf16)", fn, cg_type_names[t]);
  }
}

/* A matrix product's arguments, checked: gemm's and matmul's. */
typedef struct product {
  cg_blas *h;
  cg_buffer *a, *b, *c;
  int dt, m, n, k, ta, tb, lda, ldb, ldc, batch, compute, sidx;
  int64_t sa, sb, sc;
  scales p;
} product;

/* The elements from one matrix of a batch to the next: key, else packed. */
static int64_t stride(lua_State *L, int oidx, const char *key, int64_t packed,
                      const char *fn) {
  lua_getfield(L, oidx, key);
  int given = !lua_isnil(L, -1);
  lua_pop(L, 1);
  return given ? cg_blas_optint(L, oidx, key, 0, 0, fn) : packed;
}

/* h:fn(a, b, c, shape [, stream]) into x; batched: the strides allowed. */
static void product_args(lua_State *L, const char *fn,
                         const char *const *keys, int batched, product *x) {
  static const char *const names[] = { "alpha", "beta" };
  cg_blas *h = x->h = cg_blas_checkblas(L);
  int oidx;
  cg_blas_tail(L, 5, &oidx, &x->sidx);
  cg_buffer *a = x->a = cg_blas_buf(L, h, 2, fn, "a"), *b = x->b = cg_blas_buf(L, h, 3, fn, "b"),
            *c = x->c = cg_blas_buf(L, h, 4, fn, "c");
  if (!oidx)
    luaL_error(L, "blas:%s: give the shape, {m =, n =, k =}: c is m x n, "
               "op(a) m x k, op(b) k x n", fn);
  cg_check_options(L, oidx, batched ? "blas:gemm" : "blas:matmul", keys);
  x->dt = data_type(L, a->type, fn);
  if (b->type != a->type || c->type != a->type)
    luaL_error(L, "blas:%s: a is %s, b %s, c %s; they must match", fn,
               cg_type_names[a->type], cg_type_names[b->type],
               cg_type_names[c->type]);
  int m = x->m = cg_blas_optint(L, oidx, "m", -1, 0, fn);
  int n = x->n = cg_blas_optint(L, oidx, "n", -1, 0, fn);
  int k = x->k = cg_blas_optint(L, oidx, "k", -1, 0, fn);
  x->ta = cg_blas_optbool(L, oidx, "transa");
  x->tb = cg_blas_optbool(L, oidx, "transb");
  int tf32 = cg_blas_optbool(L, oidx, "tf32");
  if (tf32 && a->type != CG_F32)
    luaL_error(L, "blas:%s: tf32 is for f32 matrices; these are %s", fn,
               cg_type_names[a->type]);
  int ra = x->ta ? k : m, ca = x->ta ? m : k, rb = x->tb ? n : k,
      cb = x->tb ? k : n;
  x->lda = cg_blas_optint(L, oidx, "lda", ra ? ra : 1, ra ? ra : 1, fn);
  x->ldb = cg_blas_optint(L, oidx, "ldb", rb ? rb : 1, rb ? rb : 1, fn);
  x->ldc = cg_blas_optint(L, oidx, "ldc", m ? m : 1, m ? m : 1, fn);
  x->batch = batched ? cg_blas_optint(L, oidx, "batch", 1, 1, fn) : 1;
  x->sa = batched ? stride(L, oidx, "stride_a", (int64_t)x->lda * ca, fn) : 0;
  x->sb = batched ? stride(L, oidx, "stride_b", (int64_t)x->ldb * cb, fn) : 0;
  x->sc = batched ? stride(L, oidx, "stride_c", (int64_t)x->ldc * n, fn) : 0;
  char shape[96];
  snprintf(shape, sizeof shape, "op(a) %d x %d (lda %d, batch %d)", m, k,
           x->lda, x->batch);
  cg_blas_fits(L, a, cg_blas_span(ra, ca, x->lda, x->batch, x->sa), fn, "a", shape);
  snprintf(shape, sizeof shape, "op(b) %d x %d (ldb %d, batch %d)", k, n,
           x->ldb, x->batch);
  cg_blas_fits(L, b, cg_blas_span(rb, cb, x->ldb, x->batch, x->sb), fn, "b", shape);
  snprintf(shape, sizeof shape, "c %d x %d (ldc %d, batch %d)", m, n, x->ldc,
           x->batch);
  cg_blas_fits(L, c, cg_blas_span(m, n, x->ldc, x->batch, x->sc), fn, "c", shape);
  cg_type t = scale_type(a->type);
  scale s[2];
  cg_blas_optscale(L, oidx, "alpha", 1, t, h, fn, &s[0]);
  cg_blas_optscale(L, oidx, "beta", 0, t, h, fn, &s[1]);
  cg_blas_pointers(L, h, s, 2, t, fn, names, &x->p);
  x->compute = a->type == CG_F64 ? CUBLAS_COMPUTE_64F :
               tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  lua_pushvalue(L, oidx); /* the options, for the caller's own keys */
}

/* h:gemm(a, b, c, {m=, n=, k= [, transa=, transb=] [, lda=, ldb=, ldc=]
   [, alpha=1, beta=0] [, tf32=] [, batch=, stride_a=, stride_b=,
   stride_c=]} [, stream]): c = alpha op(a) op(b) + beta c, op(a) m x k,
   op(b) k x n, c m x n, all column-major; batch > 1: that many products,
   each matrix stride elements after the one before (strided-batched). */
int cg_blas_gemm(lua_State *L) {
  product x;
  product_args(L, "gemm", cg_blas_gemm_keys, 1, &x);
  cg_blas *h = x.h;
  CUstream st = cg_blas_begin(L, h, x.sidx, x.p.mode, "blas:gemm");
  if (cg_recording(h->h.ctx)) return 0;
  int tok = cg_trace_begin(L, h->h.ctx, st ? st : h->h.ctx->stream, "blas",
                           "gemm");
  cublasHandle_t hd = RES(h)->handle;
  if (x.batch == 1)
    BLAS(L, cublasGemmEx, hd, x.ta, x.tb, x.m, x.n, x.k, x.p.alpha,
         DPTR(x.a), x.dt, x.lda, DPTR(x.b), x.dt, x.ldb, x.p.beta, DPTR(x.c),
         x.dt, x.ldc, x.compute, CUBLAS_GEMM_DEFAULT);
  else
    BLAS(L, cublasGemmStridedBatchedEx, hd, x.ta, x.tb, x.m, x.n, x.k,
         x.p.alpha, DPTR(x.a), x.dt, x.lda, (long long)x.sa, DPTR(x.b), x.dt,
         x.ldb, (long long)x.sb, x.p.beta, DPTR(x.c), x.dt, x.ldc,
         (long long)x.sc, x.batch, x.compute, CUBLAS_GEMM_DEFAULT);
  cg_trace_end(L, h->h.ctx, tok);
  cg_work_finish(L, h->h.ctx, st);
  return 0;
}

/* Runs the cuBLASLt calls of one product, destroying what they made
   whatever happens; the first failure's status, its call in *api. */
static cublasStatus_t lt_run(product *x, cublasLtHandle_t lt, int epi,
                             CUdeviceptr bias, CUstream s, const char **api) {
  cg_blas_res *r = RES(x->h);
  cublasLtMatmulDesc_t desc = NULL;
  cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
  cublasLtMatmulPreference_t pref = NULL;
  int ra = x->ta ? x->k : x->m, rb = x->tb ? x->n : x->k;
  int32_t ta = x->ta, tb = x->tb, mode = x->p.mode;
  uint32_t e = (uint32_t)epi;
  unsigned long long ws = r->bytes;
  void *bp = (void *)(uintptr_t)bias;
  cublasLtMatmulHeuristicResult_t best;
  int found = 0;
  cublasStatus_t st;
#define LT(call, ...) \
  if (!st) { *api = #call; st = cg_cublaslt.call(__VA_ARGS__); }
  st = 0;
  LT(cublasLtMatmulDescCreate, &desc, x->compute, x->dt == CUDA_R_64F ?
     CUDA_R_64F : CUDA_R_32F)
  LT(cublasLtMatmulDescSetAttribute, desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta,
     sizeof ta)
  LT(cublasLtMatmulDescSetAttribute, desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb,
     sizeof tb)
  LT(cublasLtMatmulDescSetAttribute, desc, CUBLASLT_MATMUL_DESC_POINTER_MODE,
     &mode, sizeof mode)
  LT(cublasLtMatmulDescSetAttribute, desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e,
     sizeof e)
  if (bias)
    LT(cublasLtMatmulDescSetAttribute, desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
       &bp, sizeof bp)
  LT(cublasLtMatrixLayoutCreate, &la, x->dt, (unsigned long long)ra,
     (unsigned long long)(x->ta ? x->m : x->k), x->lda)
  LT(cublasLtMatrixLayoutCreate, &lb, x->dt, (unsigned long long)rb,
     (unsigned long long)(x->tb ? x->k : x->n), x->ldb)
  LT(cublasLtMatrixLayoutCreate, &lc, x->dt, (unsigned long long)x->m,
     (unsigned long long)x->n, x->ldc)
  LT(cublasLtMatmulPreferenceCreate, &pref)
  LT(cublasLtMatmulPreferenceSetAttribute, pref,
     CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws)
  LT(cublasLtMatmulAlgoGetHeuristic, lt, desc, la, lb, lc, lc, pref, 1, &best,
     &found)
  if (!st && !found) {
    *api = "cublasLtMatmulAlgoGetHeuristic";
    st = 15; /* CUBLAS_STATUS_NOT_SUPPORTED: no algorithm for it */
  }
  LT(cublasLtMatmul, lt, desc, x->p.alpha, DPTR(x->a), la, DPTR(x->b), lb,
     x->p.beta, DPTR(x->c), lc, DPTR(x->c), lc, &best.algo,
     (void *)(uintptr_t)(r->mem + CG_BLAS_CONSTS), r->bytes, s)
#undef LT
  if (pref) cg_cublaslt.cublasLtMatmulPreferenceDestroy(pref);
  if (lc) cg_cublaslt.cublasLtMatrixLayoutDestroy(lc);
  if (lb) cg_cublaslt.cublasLtMatrixLayoutDestroy(lb);
  if (la) cg_cublaslt.cublasLtMatrixLayoutDestroy(la);
  if (desc) cg_cublaslt.cublasLtMatmulDescDestroy(desc);
  return st;
}

/* h:matmul(a, b, c, {m=, n=, k= [, transa=, transb=, lda=, ldb=, ldc=,
   alpha=, beta=, tf32=] [, bias=] [, epilogue=]} [, stream]): c =
   epilogue(alpha op(a) op(b) + beta c + bias) in one cuBLASLt call; bias
   a Buffer of m elements of c's type added to every column, epilogue
   "relu" or "gelu" (absent: none). f32, f16 or bf16. */
int cg_blas_matmul(lua_State *L) {
  static const char *const epilogues[] = { "none", "relu", "gelu", NULL };
  static const int codes[] = { CUBLASLT_EPILOGUE_DEFAULT,
                               CUBLASLT_EPILOGUE_RELU, CUBLASLT_EPILOGUE_GELU };
  product x;
  product_args(L, "matmul", cg_blas_matmul_keys, 0, &x);
  int oidx = lua_gettop(L);
  if (x.a->type == CG_F64)
    luaL_error(L, "blas:matmul: takes f32, f16 or bf16 matrices (f64: "
               "blas:gemm)");
  lua_getfield(L, oidx, "epilogue");
  int epi = codes[cg_checkoption(L, -1, "none", epilogues)];
  lua_getfield(L, oidx, "bias");
  CUdeviceptr bias = 0;
  if (!lua_isnil(L, -1)) {
    cg_buffer *bb = cg_blas_buf(L, x.h, lua_gettop(L), "matmul", "bias");
    if (bb->type != x.c->type || bb->n < (size_t)x.m)
      luaL_error(L, "blas:matmul: bias is %s[%I]; it must be %s of at least "
                 "m = %d elements", cg_type_names[bb->type],
                 (LUAI_UACINT)bb->n, cg_type_names[x.c->type], x.m);
    bias = bb->h.drv.mem;
    epi |= CUBLASLT_EPILOGUE_BIAS;
    if (epi == (CUBLASLT_EPILOGUE_DEFAULT | CUBLASLT_EPILOGUE_BIAS))
      epi = CUBLASLT_EPILOGUE_BIAS;
  }
  const char *why = cg_blaslt_load();
  if (why) luaL_error(L, "%s", why);
  cg_blas *h = x.h;
  CUstream st = cg_blas_begin(L, h, x.sidx, x.p.mode, "blas:matmul");
  if (cg_recording(h->h.ctx)) return 0;
  cg_blas_res *r = RES(h);
  if (!r->lt) {
    if (h->h.ctx->capture)
      luaL_error(L, "blas:matmul: the handle's first matmul is inside a "
                 "capture: call it once before (cuBLASLt's handle is made "
                 "then)");
    cg_blas_check(L, "cublasLtCreate", cg_cublaslt.cublasLtCreate(&r->lt));
  }
  int tok = cg_trace_begin(L, h->h.ctx, st ? st : h->h.ctx->stream, "blas",
                           "matmul");
  const char *api = "cublasLtMatmul";
  cublasStatus_t rs = lt_run(&x, r->lt, epi, bias,
                             st ? st : h->h.ctx->stream, &api);
  cg_blas_check(L, api, rs);
  cg_trace_end(L, h->h.ctx, tok);
  cg_work_finish(L, h->h.ctx, st);
  return 0;
}

