/* cugraph.Blas: a cuBLAS handle of one device (h.drv.blas, base/blas.h),
   with a workspace it owns. A call runs on a stream (the one named, else
   the handle's, else the device's after all its work, complete on
   return), eager or recorded by a capture of that stream; the graph then
   pins the handle, the buffers and the DeviceScalars the call names.
   Matrices are column-major, as cuBLAS's: the row-major C = A B of m x n
   is C' = B' A', gemm(B, A, C, {m = n, n = m, k = k}). Every shape, leading
   dimension, stride, type and device is checked before cuBLAS. The matrix
   products are blas_gemm.c's. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "types/blas_call.h"

/* Raises an error object naming the cuBLAS call and its status. */
void cg_blas_check(lua_State *L, const char *api, cublasStatus_t r) {
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
      if (!cg_tointeger(L, -1, &ws) || ws < 0 || ws > ((lua_Integer)1 << 36))
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
    if (r->mem) cg_destroy(CG_H_MEM, (cg_handle){ .mem = r->mem });
    free(r);
    cg_check(L, ctx, api, e);
    cg_blas_check(L, "cublasCreate", st);
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
void cg_blas_tail(lua_State *L, int first, int *oidx, int *sidx) {
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
cg_buffer *cg_blas_buf(lua_State *L, cg_blas *b, int idx, const char *fn,
                      const char *name) {
  cg_buffer *x = cg_testobj(L, idx, CG_BUFFER);
  if (!x)
    luaL_error(L, "blas:%s: %s must be a cugraph.Buffer, got %s", fn, name,
               luaL_typename(L, idx));
  cg_checkobj(L, idx, CG_BUFFER); /* open, not mapped out of scope */
  if (x->h.ctx != b->h.ctx)
    cg_error_devices(L, b->h.ctx, x->h.ctx,
                     lua_pushfstring(L, "blas:%s: %s", fn, name));
  const char *why = cg_mem_why(L, b->h.ctx, &x->h);
  if (why) luaL_error(L, "blas:%s: %s: %s", fn, name, why);
  return x;
}

/* An integer option of at least lo that cuBLAS takes as an int (dflt when
   absent; dflt < 0: required). */
int cg_blas_optint(lua_State *L, int oidx, const char *key, lua_Integer dflt,
                  lua_Integer lo, const char *fn) {
  lua_Integer v = dflt;
  if (oidx) {
    lua_getfield(L, oidx, key);
    if (!lua_isnil(L, -1)) {
      if (!cg_tointeger(L, -1, &v))
        luaL_error(L, "blas:%s: %s must be an integer, got %s", fn, key,
                   lua_type(L, -1) == LUA_TNUMBER ? luaL_tolstring(L, -1, NULL)
                                                  : luaL_typename(L, -1));
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

int cg_blas_optbool(lua_State *L, int oidx, const char *key) {
  if (!oidx) return 0;
  lua_getfield(L, oidx, key);
  int v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

/* Elements a rows x cols matrix of leading dimension ld spans, batch of
   them stride apart (a vector: rows 1, cols n, ld inc). */
uint64_t cg_blas_span(int rows, int cols, int ld, int batch, int64_t stride) {
  if (!rows || !cols || !batch) return 0;
  return (uint64_t)(batch - 1) * (uint64_t)stride +
         (uint64_t)ld * (uint64_t)(cols - 1) + (uint64_t)rows;
}

void cg_blas_fits(lua_State *L, cg_buffer *x, uint64_t need, const char *fn,
                 const char *name, const char *shape) {
  if (need > x->n)
    luaL_error(L, "blas:%s: %s holds %I elements; %s needs %I", fn, name,
               (LUAI_UACINT)x->n, shape, (LUAI_UACINT)need);
}

/* A scale factor: a number (host pointer mode) or a DeviceScalar (device
   pointer mode, read when the call runs: per replay in a graph). */
/* The scale at idx (nil: dflt); a DeviceScalar must be of type t. */
static void toscale(lua_State *L, int idx, double dflt, cg_type t,
                    cg_blas *b, const char *fn, const char *name,
                    scale *s) {
  s->dev = 0;
  s->v = dflt;
  if (lua_isnil(L, idx)) return;
  if (lua_type(L, idx) == LUA_TNUMBER) { /* as cuBLAS reads it, in range */
    uint64_t bits;
    const char *why = cg_bits(L, idx, t == CG_F64 ? CG_F64 : CG_F32, &bits);
    if (why) luaL_error(L, "blas:%s: %s: %s", fn, name, why);
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
void cg_blas_optscale(lua_State *L, int oidx, const char *key, double dflt,
                     cg_type t, cg_blas *b, const char *fn, scale *s) {
  if (oidx) lua_getfield(L, oidx, key);
  else lua_pushnil(L);
  toscale(L, lua_gettop(L), dflt, t, b, fn, key, s);
}

void cg_blas_pointers(lua_State *L, cg_blas *b, scale *s, int n, cg_type t,
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

/* The options of the level-1 and level-2 calls (those of the products:
   blas_gemm.c). Their names stay interned (anchored by blas_open): looking
   one up makes no garbage. */
static const char *const gemv_keys[] = {
  "m", "n", "trans", "lda", "alpha", "beta", "incx", "incy", NULL
};
static const char *const vec_keys[] = { "n", "incx", "incy", NULL };
static const char *const nrm2_keys[] = { "n", "incx", NULL };

/* -- a call ---------------------------------------------------------------- */

/* The stream of the call (after the capture checks, NULL for none: then
   after all device work); pins the call's objects, writes pending
   DeviceScalars, and gives cuBLAS the stream, its workspace and mode. */
CUstream cg_blas_begin(lua_State *L, cg_blas *b, int sidx, int mode,
                      const char *what) {
  cg_ctx *ctx = b->h.ctx;
  int top = lua_gettop(L);
  if (cg_recording(ctx)) { /* the call is made again when the graph is */
    if (lua_isnoneornil(L, sidx))                                /* built */
      luaL_error(L, "%s without a stream in a graphed function: pass the "
                 "stream the function runs on", what);
    cg_record_call(L, ctx, cg_optstream(L, sidx, ctx), sidx);
    return NULL;
  }
  for (int i = 1; i <= top; i++) cg_pin(L, ctx, i);
  CUstream st = cg_work_begin(L, ctx, lua_isnil(L, sidx) ? 0 : sidx, what);
  cg_recs_mark(L, ctx, st); /* cuBLAS may fork and join */
  if (ctx->capture) cg_recs_libcall(L, ctx, st, what);
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

cg_blas *cg_blas_checkblas(lua_State *L) { return cg_checkself(L, CG_BLAS); }

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
  return cg_blas_optint(L, oidx, "n", whole > INT_MAX ? INT_MAX : whole, 0, fn);
}

/* h:gemv(a, x, y, {m=, n= [, trans=] [, lda=] [, alpha=1, beta=0]
   [, incx=1, incy=1]} [, stream]): y = alpha op(a) x + beta y, a m x n
   column-major */
static int blas_gemv(lua_State *L) {
  static const char *const names[] = { "alpha", "beta" };
  cg_blas *h = cg_blas_checkblas(L);
  int oidx, sidx;
  cg_blas_tail(L, 5, &oidx, &sidx);
  cg_buffer *a = cg_blas_buf(L, h, 2, "gemv", "a"), *x = cg_blas_buf(L, h, 3, "gemv", "x"),
            *y = cg_blas_buf(L, h, 4, "gemv", "y");
  if (!oidx)
    luaL_error(L, "blas:gemv: give the shape, {m =, n =}: a is m x n");
  cg_check_options(L, oidx, "blas:gemv", gemv_keys);
  real(L, a, "gemv");
  if (x->type != a->type || y->type != a->type)
    luaL_error(L, "blas:gemv: a is %s, x %s, y %s; they must match",
               cg_type_names[a->type], cg_type_names[x->type],
               cg_type_names[y->type]);
  int m = cg_blas_optint(L, oidx, "m", -1, 0, "gemv");
  int n = cg_blas_optint(L, oidx, "n", -1, 0, "gemv");
  int tr = cg_blas_optbool(L, oidx, "trans");
  int lda = cg_blas_optint(L, oidx, "lda", m ? m : 1, m ? m : 1, "gemv");
  int incx = cg_blas_optint(L, oidx, "incx", 1, 1, "gemv");
  int incy = cg_blas_optint(L, oidx, "incy", 1, 1, "gemv");
  char shape[80];
  snprintf(shape, sizeof shape, "a %d x %d (lda %d)", m, n, lda);
  cg_blas_fits(L, a, cg_blas_span(m, n, lda, 1, 0), "gemv", "a", shape);
  int nx = tr ? m : n, ny = tr ? n : m;
  snprintf(shape, sizeof shape, "x of %d (incx %d)", nx, incx);
  cg_blas_fits(L, x, cg_blas_span(1, nx, incx, 1, 0), "gemv", "x", shape);
  snprintf(shape, sizeof shape, "y of %d (incy %d)", ny, incy);
  cg_blas_fits(L, y, cg_blas_span(1, ny, incy, 1, 0), "gemv", "y", shape);
  scale s[2];
  cg_blas_optscale(L, oidx, "alpha", 1, a->type, h, "gemv", &s[0]);
  cg_blas_optscale(L, oidx, "beta", 0, a->type, h, "gemv", &s[1]);
  scales p;
  cg_blas_pointers(L, h, s, 2, a->type, "gemv", names, &p);
  CUstream st = cg_blas_begin(L, h, sidx, p.mode, "blas:gemv");
  if (cg_recording(h->h.ctx)) return 0;
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
  cg_blas *h = cg_blas_checkblas(L);
  int oidx, sidx;
  cg_blas_tail(L, 5, &oidx, &sidx);
  cg_buffer *x = cg_blas_buf(L, h, 3, "axpy", "x"), *y = cg_blas_buf(L, h, 4, "axpy", "y");
  if (oidx) cg_check_options(L, oidx, "blas:axpy", vec_keys);
  real(L, x, "axpy");
  sametype(L, x, y, "axpy");
  int incx = cg_blas_optint(L, oidx, "incx", 1, 1, "axpy");
  int incy = cg_blas_optint(L, oidx, "incy", 1, 1, "axpy");
  int n = veclen(L, oidx, x, incx, "axpy");
  char shape[64];
  snprintf(shape, sizeof shape, "%d elements (incx %d)", n, incx);
  cg_blas_fits(L, x, cg_blas_span(1, n, incx, 1, 0), "axpy", "x", shape);
  snprintf(shape, sizeof shape, "%d elements (incy %d)", n, incy);
  cg_blas_fits(L, y, cg_blas_span(1, n, incy, 1, 0), "axpy", "y", shape);
  scale s;
  toscale(L, 2, 1, x->type, h, "axpy", "alpha", &s);
  scales p;
  cg_blas_pointers(L, h, &s, 1, x->type, "axpy", names, &p);
  CUstream st = cg_blas_begin(L, h, sidx, p.mode, "blas:axpy");
  if (cg_recording(h->h.ctx)) return 0;
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
    const char *why = cg_mem_why(L, h->h.ctx, o);
    if (why) luaL_error(L, "blas:%s: result: %s", fn, why);
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
  cg_blas *h = cg_blas_checkblas(L);
  int at = dot ? 4 : 3; /* where a result may be */
  int has = cg_testobj(L, at, CG_SCALAR) || cg_testobj(L, at, CG_BUFFER);
  int oidx, sidx;
  cg_blas_tail(L, has ? at + 1 : at, &oidx, &sidx);
  cg_buffer *x = cg_blas_buf(L, h, 2, fn, "x"), *y = dot ? cg_blas_buf(L, h, 3, fn, "y") : x;
  if (oidx)
    cg_check_options(L, oidx, dot ? "blas:dot" : "blas:nrm2",
                     dot ? vec_keys : nrm2_keys);
  real(L, x, fn);
  sametype(L, x, y, fn);
  CUdeviceptr out = has ? result(L, h, at, x->type, fn) : 0;
  if (!out) need_out(L, h, fn);
  int incx = cg_blas_optint(L, oidx, "incx", 1, 1, fn);
  int incy = dot ? cg_blas_optint(L, oidx, "incy", 1, 1, fn) : 1;
  int n = veclen(L, oidx, x, incx, fn);
  char shape[64];
  snprintf(shape, sizeof shape, "%d elements (incx %d)", n, incx);
  cg_blas_fits(L, x, cg_blas_span(1, n, incx, 1, 0), fn, "x", shape);
  snprintf(shape, sizeof shape, "%d elements (incy %d)", n, incy);
  if (dot) cg_blas_fits(L, y, cg_blas_span(1, n, incy, 1, 0), fn, "y", shape);
  double v = 0;
  float f = 0;
  void *p = out ? (void *)(uintptr_t)out : x->type == CG_F32 ? (void *)&f
                                                             : (void *)&v;
  CUstream st = cg_blas_begin(L, h, sidx, out ? CUBLAS_POINTER_MODE_DEVICE
                                      : CUBLAS_POINTER_MODE_HOST,
                      dot ? "blas:dot" : "blas:nrm2");
  if (cg_recording(h->h.ctx)) return 0;
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
  lua_pushinteger(L, (lua_Integer)RES(cg_blas_checkblas(L))->bytes);
  return 1;
}

static int blas_tostring(lua_State *L) {
  cg_blas *h = cg_toobj(L, 1, CG_BLAS);
  return cg_tostring(L, &h->h, " (device %d)", h->h.ctx->ordinal);
}

void blas_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"gemm", cg_blas_gemm}, {"matmul", cg_blas_matmul}, {"gemv", blas_gemv}, {"axpy", blas_axpy},
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
  static const char *const *const lists[] = {
    cg_blas_gemm_keys, gemv_keys, cg_blas_matmul_keys
  };
  lua_createtable(L, 0, 0);
  for (int i = 0; i < 3; i++)
    for (const char *const *k = lists[i]; *k; k++) {
      lua_pushstring(L, *k);
      lua_rawseti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
    }
  lua_setfield(L, LUA_REGISTRYINDEX, "cugraph.blas_keys");
  luaL_setfuncs(L, funcs, 0);
}
