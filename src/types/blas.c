/* cugraph.Blas: a cuBLAS handle of one device (h.drv.blas, base/blas.h),
   with a workspace it owns. A call runs on a stream (the one named, else
   the handle's, else the device's after all its work, complete on
   return), eager or recorded by a capture of that stream; the graph then
   pins the handle, the buffers and the DeviceScalars the call names.
   Matrices are column-major, as cuBLAS's: the row-major C = A B of m x n
   is C' = B' A', gemm(B, A, C, {m = n, n = m, k = k}). Every shape, leading
   dimension, stride, type and device is checked here, before cuBLAS. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "types/types.h"
#include "base/blas.h"

typedef struct cg_blas {
  cg_obj h;             /* h.drv.blas */
  CUstream stream;      /* the stream cuBLAS was last given ... */
  int bound;            /* ... once it was given one */
  int mode;             /* the pointer mode last set */
} cg_blas;

#define RES(b) ((b)->h.drv.blas)
#define DPTR(b) ((void *)(uintptr_t)(b)->h.drv.mem)

/* Raises an error object naming the cuBLAS call and its status. */
static void check(lua_State *L, const char *api, cublasStatus_t r) {
  if (r == CUBLAS_STATUS_SUCCESS) return;
  char buf[32];
  const char *name = cg_cublas.cublasGetStatusName ?
                     cg_cublas.cublasGetStatusName(r) : NULL;
  const char *msg = cg_cublas.cublasGetStatusString ?
                    cg_cublas.cublasGetStatusString(r) : NULL;
  if (!name) {
    snprintf(buf, sizeof buf, "cublasStatus %d", r);
    name = buf;
  }
  cg_pusherror(L, api, r, name, msg ? msg : "error");
  lua_error(L);
}

#define BLAS(L, fn, ...) check((L), #fn, cg_cublas.fn(__VA_ARGS__))

static void need_blas(lua_State *L) {
  const char *why = cg_blas_load();
  if (why) luaL_error(L, "%s", why);
}

/* -- creation --------------------------------------------------------------- */

/* cuda.blas([stream] [, {workspace = bytes}]) -> Blas on the current
   device, its calls on stream unless they name one. The workspace
   (default 32 MiB on Hopper and later, else 4 MiB, as cuBLAS advises) is
   the handle's, so captured calls never reach cuBLAS's own pool. */
static int blas_new(lua_State *L) {
  int oidx = lua_istable(L, 1) ? 1 : lua_istable(L, 2) ? 2 : 0;
  int sidx = oidx == 1 || lua_isnoneornil(L, 1) ? 0 : 1;
  lua_Integer ws = -1;
  if (oidx) {
    static const char *const keys[] = { "workspace", NULL };
    cg_check_options(L, oidx, "cuda.blas", keys);
    lua_getfield(L, oidx, "workspace");
    if (!lua_isnil(L, -1)) {
      ws = lua_tointeger(L, -1);
      if (!lua_isinteger(L, -1) || ws < 0 || ws > ((lua_Integer)1 << 36))
        luaL_error(L, "cuda.blas: workspace must be a byte count in 0 .. "
                   "2^36");
    }
    lua_pop(L, 1);
  }
  cg_ctx *ctx = cg_context(L);
  if (sidx) {
    cg_stream *s = cg_checkobj(L, sidx, CG_STREAM);
    if (s->h.ctx != ctx) cg_error_devices(L, ctx, s->h.ctx, "cuda.blas");
  }
  cg_check_outside(L, ctx, "cannot make a cuBLAS handle",
                   "make handles before capture");
  need_blas(L);
  if (ws < 0) {
    int major = 0;
    CU(L, ctx, cuDeviceGetAttribute, &major,
       CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, ctx->dev);
    ws = major >= 9 ? 32 << 20 : 4 << 20;
  }
  cg_blas *b = cg_newobj(L, ctx, sizeof *b, CG_BLAS);
  if (sidx) {
    lua_pushvalue(L, sidx);
    lua_setiuservalue(L, -2, 2);
  }
  cg_blas_res *r = calloc(1, sizeof *r);
  if (!r) luaL_error(L, "cuda.blas: out of host memory");
  static const float f[2] = { 0, 1 };
  static const double d[2] = { 0, 1 };
  unsigned char k[24];
  memcpy(k, f, 8);
  memcpy(k + 8, d, 16);
  r->bytes = (size_t)ws;
  const char *api = "cuMemAlloc";
  CUresult e = cg_drv.cuMemAlloc(&r->mem, CG_BLAS_CONSTS + r->bytes);
  if (e == CUDA_SUCCESS) {
    api = "cuMemcpyHtoDAsync";
    e = cg_drv.cuMemcpyHtoDAsync(r->mem, k, sizeof k, ctx->stream);
  }
  if (e == CUDA_SUCCESS) {
    api = "cuStreamSynchronize";
    e = cg_drv.cuStreamSynchronize(ctx->stream);
  }
  cublasStatus_t st = e == CUDA_SUCCESS ?
                      cg_cublas.cublasCreate_v2(&r->handle) : 0;
  if (e != CUDA_SUCCESS || st != CUBLAS_STATUS_SUCCESS) {
    if (r->mem) cg_drv.cuMemFree(r->mem);
    free(r);
    cg_check(L, ctx, api, e);
    check(L, "cublasCreate", st);
  }
  b->h.drv.blas = r;
  b->h.open = 1;
  return 1;
}

static int blas_free(lua_State *L) { return cg_close(L, CG_BLAS, 0); }
static int blas_gc(lua_State *L) { return cg_close(L, CG_BLAS, 1); }

/* -- arguments --------------------------------------------------------------- */

/* Where the options and the stream of a call are, the fixed arguments
   ending before first: (..., [opts,] [stream]). The stream is left at
   *sidx: the one named, else the handle's (nil for none). */
static void tail(lua_State *L, int first, int *oidx, int *sidx) {
  *oidx = lua_istable(L, first) ? first : 0;
  *sidx = *oidx || (lua_isnil(L, first) && !lua_isnone(L, first + 1)) ?
          first + 1 : first;
  if (lua_gettop(L) > *sidx)
    luaL_error(L, "too many arguments: the stream is the last");
  lua_settop(L, *sidx);
  if (lua_isnil(L, *sidx)) {
    lua_getiuservalue(L, 1, 2);
    lua_replace(L, *sidx);
  }
}

/* The buffer at idx, on the handle's device, of one of cuBLAS's types. */
static cg_buffer *buf(lua_State *L, cg_blas *b, int idx, const char *fn,
                      const char *name) {
  cg_buffer *x = cg_testobj(L, idx, CG_BUFFER);
  if (!x)
    luaL_error(L, "blas:%s: %s must be a cugraph.Buffer, got %s", fn, name,
               luaL_typename(L, idx));
  cg_checkobj(L, idx, CG_BUFFER); /* open, not mapped out of scope */
  if (x->h.ctx != b->h.ctx)
    cg_error_devices(L, b->h.ctx, x->h.ctx,
                     lua_pushfstring(L, "blas:%s: %s", fn, name));
  cg_check_allocated(L, &x->h);
  return x;
}

/* An integer option of at least lo that cuBLAS takes as an int (dflt when
   absent; dflt < 0: required). */
static int optint(lua_State *L, int oidx, const char *key, lua_Integer dflt,
                  lua_Integer lo, const char *fn) {
  lua_Integer v = dflt;
  if (oidx) {
    lua_getfield(L, oidx, key);
    if (!lua_isnil(L, -1)) {
      if (!lua_isinteger(L, -1))
        luaL_error(L, "blas:%s: %s must be an integer, got %s", fn, key,
                   luaL_typename(L, -1));
      v = lua_tointeger(L, -1);
    }
    lua_pop(L, 1);
  }
  if (v < 0 && dflt < 0)
    luaL_error(L, "blas:%s: %s is required", fn, key);
  if (v < lo || v > INT_MAX)
    luaL_error(L, "blas:%s: %s must be in %I .. %d, got %I", fn, key,
               (LUAI_UACINT)lo, INT_MAX, (LUAI_UACINT)v);
  return (int)v;
}

static int optbool(lua_State *L, int oidx, const char *key) {
  if (!oidx) return 0;
  lua_getfield(L, oidx, key);
  int v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

/* Elements a rows x cols matrix of leading dimension ld spans, batch of
   them stride apart (a vector: rows 1, cols n, ld inc). */
static uint64_t span(int rows, int cols, int ld, int batch, int64_t stride) {
  if (!rows || !cols || !batch) return 0;
  return (uint64_t)(batch - 1) * (uint64_t)stride +
         (uint64_t)ld * (uint64_t)(cols - 1) + (uint64_t)rows;
}

static void fits(lua_State *L, cg_buffer *x, uint64_t need, const char *fn,
                 const char *name, const char *shape) {
  if (need > x->n)
    luaL_error(L, "blas:%s: %s holds %I elements; %s needs %I", fn, name,
               (LUAI_UACINT)x->n, shape, (LUAI_UACINT)need);
}

/* A scale factor: a number (host pointer mode) or a DeviceScalar (device
   pointer mode, read when the call runs: per replay in a graph). */
typedef struct scale {
  CUdeviceptr dev;      /* the DeviceScalar's memory, or 0 */
  double v;
} scale;

/* The scale at idx (nil: dflt); a DeviceScalar must be of type t. */
static void toscale(lua_State *L, int idx, double dflt, cg_type t,
                    cg_blas *b, const char *fn, const char *name,
                    scale *s) {
  s->dev = 0;
  s->v = dflt;
  if (lua_isnil(L, idx)) return;
  if (lua_type(L, idx) == LUA_TNUMBER) {
    s->v = lua_tonumber(L, idx);
    return;
  }
  cg_scalar *sc = cg_testobj(L, idx, CG_SCALAR);
  if (!sc)
    luaL_error(L, "blas:%s: %s must be a number or a cugraph.Scalar, got %s",
               fn, name, luaL_typename(L, idx));
  cg_checkobj(L, idx, CG_SCALAR);
  if (sc->h.ctx != b->h.ctx)
    cg_error_devices(L, b->h.ctx, sc->h.ctx,
                     lua_pushfstring(L, "blas:%s: %s", fn, name));
  if (sc->type != t)
    luaL_error(L, "blas:%s: %s is a Scalar of %s; this call scales in %s",
               fn, name, cg_type_names[sc->type], cg_type_names[t]);
  s->dev = sc->h.drv.mem;
}

/* The option key as a scale, left on the stack (a DeviceScalar is pinned
   from there). */
static void optscale(lua_State *L, int oidx, const char *key, double dflt,
                     cg_type t, cg_blas *b, const char *fn, scale *s) {
  if (oidx) lua_getfield(L, oidx, key);
  else lua_pushnil(L);
  toscale(L, lua_gettop(L), dflt, t, b, fn, key, s);
}

/* Pointers to alpha and beta, in one pointer mode (cuBLAS has one per
   call): numbers on the host, or both in device memory, a number beside a
   DeviceScalar then 0 or 1, read from the handle's constants. */
typedef struct scales {
  int mode;
  const void *alpha, *beta;
  float f[2];
  double d[2];
} scales;

static void pointers(lua_State *L, cg_blas *b, scale *s, int n, cg_type t,
                     const char *fn, const char *const *names, scales *out) {
  int dev = 0;
  for (int i = 0; i < n; i++) dev |= s[i].dev != 0;
  out->mode = dev ? CUBLAS_POINTER_MODE_DEVICE : CUBLAS_POINTER_MODE_HOST;
  const void *p[2] = { NULL, NULL };
  for (int i = 0; i < n; i++) {
    if (!dev) {
      out->f[i] = (float)s[i].v;
      out->d[i] = s[i].v;
      p[i] = t == CG_F64 ? (const void *)&out->d[i] : (const void *)&out->f[i];
    } else if (s[i].dev) {
      p[i] = (const void *)(uintptr_t)s[i].dev;
    } else if (s[i].v == 0 || s[i].v == 1) {
      p[i] = (const void *)(uintptr_t)(RES(b)->mem + (t == CG_F64 ? 8 : 0) +
                                       (size_t)s[i].v * cg_type_size[t]);
    } else {
      luaL_error(L, "blas:%s: %s is a number beside a Scalar: cuBLAS reads "
                 "both from one place; make it a Scalar too (0 and 1 may "
                 "stay numbers)", fn, names[i]);
    }
  }
  out->alpha = p[0];
  out->beta = n > 1 ? p[1] : NULL;
}

/* The options of each call. Their names stay interned (anchored by
   blas_open): looking one up makes no garbage. */
static const char *const gemm_keys[] = {
  "m", "n", "k", "transa", "transb", "lda", "ldb", "ldc", "alpha", "beta",
  "tf32", "batch", "stride_a", "stride_b", "stride_c", NULL
};
static const char *const gemv_keys[] = {
  "m", "n", "trans", "lda", "alpha", "beta", "incx", "incy", NULL
};
static const char *const matmul_keys[] = {
  "m", "n", "k", "transa", "transb", "lda", "ldb", "ldc", "alpha", "beta",
  "tf32", "bias", "epilogue", NULL
};
static const char *const vec_keys[] = { "n", "incx", "incy", NULL };
static const char *const nrm2_keys[] = { "n", "incx", NULL };

/* -- a call ---------------------------------------------------------------- */

/* The stream of the call (after the capture checks, NULL for none: then
   after all device work); pins the call's objects, writes pending
   DeviceScalars, and gives cuBLAS the stream, its workspace and mode. */
static CUstream begin(lua_State *L, cg_blas *b, int sidx, int mode,
                      const char *what) {
  cg_ctx *ctx = b->h.ctx;
  int top = lua_gettop(L);
  for (int i = 1; i <= top; i++) cg_pin(L, ctx, i);
  CUstream st = cg_work_begin(L, ctx, lua_isnil(L, sidx) ? 0 : sidx, what);
  for (int i = 1; i <= top; i++) { /* a finalizer may have run meanwhile */
    cg_obj *o = cg_toany(L, ctx, i);
    if (!o) continue;
    cg_check_open(L, o);
    if (o->kind == CG_SCALAR && !ctx->capture)
      cg_scalar_flush(L, (cg_scalar *)o, st ? st : ctx->stream);
  }
  cg_current(L, ctx);
  CUstream s = st ? st : ctx->stream;
  cg_blas_res *r = RES(b);
  if (!b->bound || b->stream != s) { /* a new stream resets the workspace */
    BLAS(L, cublasSetStream_v2, r->handle, s);
    BLAS(L, cublasSetWorkspace_v2, r->handle,
         (void *)(uintptr_t)(r->mem + CG_BLAS_CONSTS), r->bytes);
    b->stream = s;
    b->bound = 1;
  }
  if (b->mode != mode) {
    BLAS(L, cublasSetPointerMode_v2, r->handle, mode);
    b->mode = mode;
  }
  return st;
}

static cg_blas *checkblas(lua_State *L) { return cg_checkself(L, CG_BLAS); }

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
  return given ? optint(L, oidx, key, 0, 0, fn) : packed;
}

/* h:fn(a, b, c, shape [, stream]) into x; batched: the strides allowed. */
static void product_args(lua_State *L, const char *fn,
                         const char *const *keys, int batched, product *x) {
  static const char *const names[] = { "alpha", "beta" };
  cg_blas *h = x->h = checkblas(L);
  int oidx;
  tail(L, 5, &oidx, &x->sidx);
  cg_buffer *a = x->a = buf(L, h, 2, fn, "a"), *b = x->b = buf(L, h, 3, fn, "b"),
            *c = x->c = buf(L, h, 4, fn, "c");
  if (!oidx)
    luaL_error(L, "blas:%s: give the shape, {m =, n =, k =}: c is m x n, "
               "op(a) m x k, op(b) k x n", fn);
  cg_check_options(L, oidx, batched ? "blas:gemm" : "blas:matmul", keys);
  x->dt = data_type(L, a->type, fn);
  if (b->type != a->type || c->type != a->type)
    luaL_error(L, "blas:%s: a is %s, b %s, c %s; they must match", fn,
               cg_type_names[a->type], cg_type_names[b->type],
               cg_type_names[c->type]);
  int m = x->m = optint(L, oidx, "m", -1, 0, fn);
  int n = x->n = optint(L, oidx, "n", -1, 0, fn);
  int k = x->k = optint(L, oidx, "k", -1, 0, fn);
  x->ta = optbool(L, oidx, "transa");
  x->tb = optbool(L, oidx, "transb");
  int tf32 = optbool(L, oidx, "tf32");
  if (tf32 && a->type != CG_F32)
    luaL_error(L, "blas:%s: tf32 is for f32 matrices; these are %s", fn,
               cg_type_names[a->type]);
  int ra = x->ta ? k : m, ca = x->ta ? m : k, rb = x->tb ? n : k,
      cb = x->tb ? k : n;
  x->lda = optint(L, oidx, "lda", ra ? ra : 1, ra ? ra : 1, fn);
  x->ldb = optint(L, oidx, "ldb", rb ? rb : 1, rb ? rb : 1, fn);
  x->ldc = optint(L, oidx, "ldc", m ? m : 1, m ? m : 1, fn);
  x->batch = batched ? optint(L, oidx, "batch", 1, 1, fn) : 1;
  x->sa = batched ? stride(L, oidx, "stride_a", (int64_t)x->lda * ca, fn) : 0;
  x->sb = batched ? stride(L, oidx, "stride_b", (int64_t)x->ldb * cb, fn) : 0;
  x->sc = batched ? stride(L, oidx, "stride_c", (int64_t)x->ldc * n, fn) : 0;
  char shape[96];
  snprintf(shape, sizeof shape, "op(a) %d x %d (lda %d, batch %d)", m, k,
           x->lda, x->batch);
  fits(L, a, span(ra, ca, x->lda, x->batch, x->sa), fn, "a", shape);
  snprintf(shape, sizeof shape, "op(b) %d x %d (ldb %d, batch %d)", k, n,
           x->ldb, x->batch);
  fits(L, b, span(rb, cb, x->ldb, x->batch, x->sb), fn, "b", shape);
  snprintf(shape, sizeof shape, "c %d x %d (ldc %d, batch %d)", m, n, x->ldc,
           x->batch);
  fits(L, c, span(m, n, x->ldc, x->batch, x->sc), fn, "c", shape);
  cg_type t = scale_type(a->type);
  scale s[2];
  optscale(L, oidx, "alpha", 1, t, h, fn, &s[0]);
  optscale(L, oidx, "beta", 0, t, h, fn, &s[1]);
  pointers(L, h, s, 2, t, fn, names, &x->p);
  x->compute = a->type == CG_F64 ? CUBLAS_COMPUTE_64F :
               tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  lua_pushvalue(L, oidx); /* the options, for the caller's own keys */
}

/* h:gemm(a, b, c, {m=, n=, k= [, transa=, transb=] [, lda=, ldb=, ldc=]
   [, alpha=1, beta=0] [, tf32=] [, batch=, stride_a=, stride_b=,
   stride_c=]} [, stream]): c = alpha op(a) op(b) + beta c, op(a) m x k,
   op(b) k x n, c m x n, all column-major; batch > 1: that many products,
   each matrix stride elements after the one before (strided-batched). */
static int blas_gemm(lua_State *L) {
  product x;
  product_args(L, "gemm", gemm_keys, 1, &x);
  cg_blas *h = x.h;
  CUstream st = begin(L, h, x.sidx, x.p.mode, "blas:gemm");
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
static int blas_matmul(lua_State *L) {
  static const char *const epilogues[] = { "none", "relu", "gelu", NULL };
  static const int codes[] = { CUBLASLT_EPILOGUE_DEFAULT,
                               CUBLASLT_EPILOGUE_RELU, CUBLASLT_EPILOGUE_GELU };
  product x;
  product_args(L, "matmul", matmul_keys, 0, &x);
  int oidx = lua_gettop(L);
  if (x.a->type == CG_F64)
    luaL_error(L, "blas:matmul: takes f32, f16 or bf16 matrices (f64: "
               "blas:gemm)");
  lua_getfield(L, oidx, "epilogue");
  int epi = codes[cg_checkoption(L, -1, "none", epilogues)];
  lua_getfield(L, oidx, "bias");
  CUdeviceptr bias = 0;
  if (!lua_isnil(L, -1)) {
    cg_buffer *bb = buf(L, x.h, lua_gettop(L), "matmul", "bias");
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
  CUstream st = begin(L, h, x.sidx, x.p.mode, "blas:matmul");
  cg_blas_res *r = RES(h);
  if (!r->lt) {
    if (h->h.ctx->capture)
      luaL_error(L, "blas:matmul: the handle's first matmul is inside a "
                 "capture: call it once before (cuBLASLt's handle is made "
                 "then)");
    check(L, "cublasLtCreate", cg_cublaslt.cublasLtCreate(&r->lt));
  }
  int tok = cg_trace_begin(L, h->h.ctx, st ? st : h->h.ctx->stream, "blas",
                           "matmul");
  const char *api = "cublasLtMatmul";
  cublasStatus_t rs = lt_run(&x, r->lt, epi, bias,
                             st ? st : h->h.ctx->stream, &api);
  check(L, api, rs);
  cg_trace_end(L, h->h.ctx, tok);
  cg_work_finish(L, h->h.ctx, st);
  return 0;
}

/* f32 or f64: the types of the level-1 and level-2 calls. */
static void real(lua_State *L, cg_buffer *x, const char *fn) {
  if (x->type != CG_F32 && x->type != CG_F64)
    luaL_error(L, "blas:%s: takes f32 or f64 vectors, got %s", fn,
               cg_type_names[x->type]);
}

static void sametype(lua_State *L, cg_buffer *x, cg_buffer *y,
                     const char *fn) {
  if (x->type != y->type)
    luaL_error(L, "blas:%s: x is %s, y %s; they must match", fn,
               cg_type_names[x->type], cg_type_names[y->type]);
}

/* The element count of a vector call: n, else as many as x holds at its
   stride. */
static int veclen(lua_State *L, int oidx, cg_buffer *x, int incx,
                  const char *fn) {
  lua_Integer whole = x->n ? (lua_Integer)((x->n - 1) / (size_t)incx + 1) : 0;
  return optint(L, oidx, "n", whole > INT_MAX ? INT_MAX : whole, 0, fn);
}

/* h:gemv(a, x, y, {m=, n= [, trans=] [, lda=] [, alpha=1, beta=0]
   [, incx=1, incy=1]} [, stream]): y = alpha op(a) x + beta y, a m x n
   column-major */
static int blas_gemv(lua_State *L) {
  static const char *const names[] = { "alpha", "beta" };
  cg_blas *h = checkblas(L);
  int oidx, sidx;
  tail(L, 5, &oidx, &sidx);
  cg_buffer *a = buf(L, h, 2, "gemv", "a"), *x = buf(L, h, 3, "gemv", "x"),
            *y = buf(L, h, 4, "gemv", "y");
  if (!oidx)
    luaL_error(L, "blas:gemv: give the shape, {m =, n =}: a is m x n");
  cg_check_options(L, oidx, "blas:gemv", gemv_keys);
  real(L, a, "gemv");
  if (x->type != a->type || y->type != a->type)
    luaL_error(L, "blas:gemv: a is %s, x %s, y %s; they must match",
               cg_type_names[a->type], cg_type_names[x->type],
               cg_type_names[y->type]);
  int m = optint(L, oidx, "m", -1, 0, "gemv");
  int n = optint(L, oidx, "n", -1, 0, "gemv");
  int tr = optbool(L, oidx, "trans");
  int lda = optint(L, oidx, "lda", m ? m : 1, m ? m : 1, "gemv");
  int incx = optint(L, oidx, "incx", 1, 1, "gemv");
  int incy = optint(L, oidx, "incy", 1, 1, "gemv");
  char shape[80];
  snprintf(shape, sizeof shape, "a %d x %d (lda %d)", m, n, lda);
  fits(L, a, span(m, n, lda, 1, 0), "gemv", "a", shape);
  int nx = tr ? m : n, ny = tr ? n : m;
  snprintf(shape, sizeof shape, "x of %d (incx %d)", nx, incx);
  fits(L, x, span(1, nx, incx, 1, 0), "gemv", "x", shape);
  snprintf(shape, sizeof shape, "y of %d (incy %d)", ny, incy);
  fits(L, y, span(1, ny, incy, 1, 0), "gemv", "y", shape);
  scale s[2];
  optscale(L, oidx, "alpha", 1, a->type, h, "gemv", &s[0]);
  optscale(L, oidx, "beta", 0, a->type, h, "gemv", &s[1]);
  scales p;
  pointers(L, h, s, 2, a->type, "gemv", names, &p);
  CUstream st = begin(L, h, sidx, p.mode, "blas:gemv");
  int tok = cg_trace_begin(L, h->h.ctx, st ? st : h->h.ctx->stream, "blas",
                           "gemv");
  cublasHandle_t hd = RES(h)->handle;
  if (a->type == CG_F32)
    BLAS(L, cublasSgemv_v2, hd, tr, m, n, p.alpha, DPTR(a), lda, DPTR(x),
         incx, p.beta, DPTR(y), incy);
  else
    BLAS(L, cublasDgemv_v2, hd, tr, m, n, p.alpha, DPTR(a), lda, DPTR(x),
         incx, p.beta, DPTR(y), incy);
  cg_trace_end(L, h->h.ctx, tok);
  cg_work_finish(L, h->h.ctx, st);
  return 0;
}

/* h:axpy(alpha, x, y [, {n=, incx=1, incy=1}] [, stream]): y = alpha x + y
   over n elements (absent: as many as x holds) */
static int blas_axpy(lua_State *L) {
  static const char *const names[] = { "alpha" };
  cg_blas *h = checkblas(L);
  int oidx, sidx;
  tail(L, 5, &oidx, &sidx);
  cg_buffer *x = buf(L, h, 3, "axpy", "x"), *y = buf(L, h, 4, "axpy", "y");
  if (oidx) cg_check_options(L, oidx, "blas:axpy", vec_keys);
  real(L, x, "axpy");
  sametype(L, x, y, "axpy");
  int incx = optint(L, oidx, "incx", 1, 1, "axpy");
  int incy = optint(L, oidx, "incy", 1, 1, "axpy");
  int n = veclen(L, oidx, x, incx, "axpy");
  char shape[64];
  snprintf(shape, sizeof shape, "%d elements (incx %d)", n, incx);
  fits(L, x, span(1, n, incx, 1, 0), "axpy", "x", shape);
  snprintf(shape, sizeof shape, "%d elements (incy %d)", n, incy);
  fits(L, y, span(1, n, incy, 1, 0), "axpy", "y", shape);
  scale s;
  toscale(L, 2, 1, x->type, h, "axpy", "alpha", &s);
  scales p;
  pointers(L, h, &s, 1, x->type, "axpy", names, &p);
  CUstream st = begin(L, h, sidx, p.mode, "blas:axpy");
  int tok = cg_trace_begin(L, h->h.ctx, st ? st : h->h.ctx->stream, "blas",
                           "axpy");
  cublasHandle_t hd = RES(h)->handle;
  if (x->type == CG_F32)
    BLAS(L, cublasSaxpy_v2, hd, n, p.alpha, DPTR(x), incx, DPTR(y), incy);
  else
    BLAS(L, cublasDaxpy_v2, hd, n, p.alpha, DPTR(x), incx, DPTR(y), incy);
  cg_trace_end(L, h->h.ctx, tok);
  cg_work_finish(L, h->h.ctx, st);
  return 0;
}

/* Where a reduction's result goes: the Buffer (its first element) or
   DeviceScalar at idx, of type t; 0 when idx holds neither. */
static CUdeviceptr result(lua_State *L, cg_blas *h, int idx, cg_type t,
                          const char *fn) {
  cg_scalar *sc = cg_testobj(L, idx, CG_SCALAR);
  cg_buffer *b = sc ? NULL : cg_testobj(L, idx, CG_BUFFER);
  if (!sc && !b) return 0;
  cg_obj *o = cg_checkobj(L, idx, sc ? CG_SCALAR : CG_BUFFER);
  if (o->ctx != h->h.ctx)
    cg_error_devices(L, h->h.ctx, o->ctx,
                     lua_pushfstring(L, "blas:%s: result", fn));
  cg_type rt = sc ? sc->type : b->type;
  if (rt != t)
    luaL_error(L, "blas:%s: the result is %s; the vectors are %s", fn,
               cg_type_names[rt], cg_type_names[t]);
  if (b) {
    cg_check_allocated(L, o);
    if (!b->n) luaL_error(L, "blas:%s: the result buffer is empty", fn);
  }
  return sc ? sc->h.drv.mem : b->h.drv.mem;
}

/* A result read on the host: only eagerly, the call complete on return. */
static void need_out(lua_State *L, cg_blas *h, const char *fn) {
  if (h->h.ctx->capture)
    luaL_error(L, "blas:%s inside a graph capture needs a result Buffer or "
               "Scalar: a number cannot be returned from a graph", fn);
}

/* A reduction of x (with y for dot) into result at ridx, or returned. */
static int reduction(lua_State *L, int dot) {
  const char *fn = dot ? "dot" : "nrm2";
  cg_blas *h = checkblas(L);
  int at = dot ? 4 : 3; /* where a result may be */
  int has = cg_testobj(L, at, CG_SCALAR) || cg_testobj(L, at, CG_BUFFER);
  int oidx, sidx;
  tail(L, has ? at + 1 : at, &oidx, &sidx);
  cg_buffer *x = buf(L, h, 2, fn, "x"), *y = dot ? buf(L, h, 3, fn, "y") : x;
  if (oidx)
    cg_check_options(L, oidx, dot ? "blas:dot" : "blas:nrm2",
                     dot ? vec_keys : nrm2_keys);
  real(L, x, fn);
  sametype(L, x, y, fn);
  CUdeviceptr out = has ? result(L, h, at, x->type, fn) : 0;
  if (!out) need_out(L, h, fn);
  int incx = optint(L, oidx, "incx", 1, 1, fn);
  int incy = dot ? optint(L, oidx, "incy", 1, 1, fn) : 1;
  int n = veclen(L, oidx, x, incx, fn);
  char shape[64];
  snprintf(shape, sizeof shape, "%d elements (incx %d)", n, incx);
  fits(L, x, span(1, n, incx, 1, 0), fn, "x", shape);
  snprintf(shape, sizeof shape, "%d elements (incy %d)", n, incy);
  if (dot) fits(L, y, span(1, n, incy, 1, 0), fn, "y", shape);
  double v = 0;
  float f = 0;
  void *p = out ? (void *)(uintptr_t)out : x->type == CG_F32 ? (void *)&f
                                                             : (void *)&v;
  CUstream st = begin(L, h, sidx, out ? CUBLAS_POINTER_MODE_DEVICE
                                      : CUBLAS_POINTER_MODE_HOST,
                      dot ? "blas:dot" : "blas:nrm2");
  int tok = cg_trace_begin(L, h->h.ctx, st ? st : h->h.ctx->stream, "blas",
                           fn);
  cublasHandle_t hd = RES(h)->handle;
  int f32 = x->type == CG_F32;
  if (dot && f32)
    BLAS(L, cublasSdot_v2, hd, n, DPTR(x), incx, DPTR(y), incy, p);
  else if (dot)
    BLAS(L, cublasDdot_v2, hd, n, DPTR(x), incx, DPTR(y), incy, p);
  else if (f32)
    BLAS(L, cublasSnrm2_v2, hd, n, DPTR(x), incx, p);
  else
    BLAS(L, cublasDnrm2_v2, hd, n, DPTR(x), incx, p);
  cg_trace_end(L, h->h.ctx, tok);
  cg_work_finish(L, h->h.ctx, st);
  if (out) return 0;
  lua_pushnumber(L, f32 ? (lua_Number)f : (lua_Number)v);
  return 1;
}

/* h:dot(x, y [, result] [, {n=, incx=1, incy=1}] [, stream]) -> the dot
   product, written to result (a Buffer's first element or a Scalar, in
   device memory: the call stays on the stream, and may be captured) or,
   without one, returned once it is known */
static int blas_dot(lua_State *L) { return reduction(L, 1); }

/* h:nrm2(x [, result] [, {n=, incx=1}] [, stream]) -> the Euclidean norm
   of x, as dot gives its result */
static int blas_nrm2(lua_State *L) { return reduction(L, 0); }

/* -- the rest of the object ------------------------------------------------ */

/* cuda.blas_version() -> cuBLAS's version code (130100 for 13.1.0) */
static int blas_version(lua_State *L) {
  need_blas(L);
  int v[3] = { 0, 0, 0 };
  for (int i = 0; i < 3; i++)
    BLAS(L, cublasGetProperty, i, &v[i]); /* major, minor, patch level */
  lua_pushinteger(L, v[0] * 10000 + v[1] * 100 + v[2]);
  return 1;
}

/* h:workspace() -> the workspace's size in bytes */
static int blas_workspace(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)RES(checkblas(L))->bytes);
  return 1;
}

static int blas_tostring(lua_State *L) {
  cg_blas *h = cg_toobj(L, 1, CG_BLAS);
  return cg_tostring(L, &h->h, " (device %d)", h->h.ctx->ordinal);
}

void blas_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"gemm", blas_gemm}, {"matmul", blas_matmul}, {"gemv", blas_gemv}, {"axpy", blas_axpy},
    {"dot", blas_dot}, {"nrm2", blas_nrm2}, {"workspace", blas_workspace},
    {"free", blas_free}, {"close", blas_free},
    {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", blas_gc}, {"__close", blas_free}, {"__tostring", blas_tostring},
    {NULL, NULL}
  };
  static const luaL_Reg funcs[] = {
    {"blas", blas_new}, {"blas_version", blas_version}, {NULL, NULL}
  };
  cg_newtype(L, CG_BLAS, methods, meta, NULL);
  static const char *const *const lists[] = { gemm_keys, gemv_keys,
                                              matmul_keys };
  lua_createtable(L, 0, 0);
  for (int i = 0; i < 3; i++)
    for (const char *const *k = lists[i]; *k; k++) {
      lua_pushstring(L, *k);
      lua_rawseti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
    }
  lua_setfield(L, LUA_REGISTRYINDEX, "cugraph.blas_keys");
  luaL_setfuncs(L, funcs, 0);
}
