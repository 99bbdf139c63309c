/* cugraph.FFT: a cuFFT plan of one device (h.drv.fft, base/fft.h), with
   the work area it owns. Complex data are interleaved (re, im) pairs in f32
   or f64 buffers; shapes are row-major, the last length the fastest. A
   transform runs on a stream (the one named, else the plan's, else the
   device's after all its work, complete on return), eager or recorded by
   a capture of that stream; the graph then pins the plan and the buffers.
   Sizes, types, devices and in-place use are checked here, before cuFFT. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "types/types.h"
#include "base/fft.h"

enum { C2C, R2C, C2R };

typedef struct cg_fft {
  cg_obj h;             /* h.drv.fft */
  int kind, rank;
  cg_type type;         /* f32 or f64 */
  long long n[3];
  long long batch;
  size_t real, cplx;    /* reals of one real signal, of one complex one */
  CUstream stream;      /* the stream cuFFT was last given ... */
  int bound;            /* ... once it was given one */
} cg_fft;

#define RES(p) ((p)->h.drv.fft)
#define DPTR(b) ((void *)(uintptr_t)(b)->h.drv.mem)

static const char *result_name(cufftResult r) {
  static const char *const names[] = {
    "CUFFT_SUCCESS", "CUFFT_INVALID_PLAN", "CUFFT_ALLOC_FAILED",
    "CUFFT_INVALID_TYPE", "CUFFT_INVALID_VALUE", "CUFFT_INTERNAL_ERROR",
    "CUFFT_EXEC_FAILED", "CUFFT_SETUP_FAILED", "CUFFT_INVALID_SIZE",
    "CUFFT_UNALIGNED_DATA", NULL, "CUFFT_INVALID_DEVICE", NULL,
    "CUFFT_NO_WORKSPACE", "CUFFT_NOT_IMPLEMENTED", NULL,
    "CUFFT_NOT_SUPPORTED", "CUFFT_MISSING_DEPENDENCY"
  };
  return r >= 0 && r < (int)(sizeof names / sizeof *names) ? names[r] : NULL;
}

/* Raises an error object naming the cuFFT call and its result. */
static void check(lua_State *L, const char *api, cufftResult r) {
  if (r == CUFFT_SUCCESS) return;
  char buf[32];
  const char *name = result_name(r);
  if (!name) {
    snprintf(buf, sizeof buf, "cufftResult %d", r);
    name = buf;
  }
  cg_pusherror(L, api, r, name, "cuFFT failed");
  lua_error(L);
}

#define FFT(L, fn, ...) check((L), #fn, cg_cufft.fn(__VA_ARGS__))

/* cuFFT held (cg_fft_acquire) by the caller, who drops it. */
static void need_fft(lua_State *L) {
  const char *why = cg_fft_acquire();
  if (why) luaL_error(L, "%s", why);
}

/* -- creation ------------------------------------------------------------- */

/* The lengths at idx (an integer, or a list of 1 to 3), into p. */
static void lengths(lua_State *L, int idx, cg_fft *p) {
  lua_Integer n;
  if (cg_tointeger(L, idx, &n)) {
    p->rank = 1;
    p->n[0] = n;
  } else {
    luaL_argexpected(L, lua_istable(L, idx), idx, "a length or a list of 1 to 3");
    lua_Integer r = luaL_len(L, idx);
    if (r < 1 || r > 3)
      luaL_error(L, "cuda.fft: %I lengths; a plan has 1, 2 or 3",
                 (LUAI_UACINT)r);
    p->rank = (int)r;
    for (int i = 0; i < p->rank; i++) {
      lua_geti(L, idx, i + 1);
      if (!cg_tointeger(L, -1, &n))
        luaL_error(L, "cuda.fft: length %d is not an integer", i + 1);
      p->n[i] = n;
      lua_pop(L, 1);
    }
  }
  for (int i = 0; i < p->rank; i++)
    if (p->n[i] < 1 || p->n[i] > (1LL << 31))
      luaL_error(L, "cuda.fft: length %d is %I; lengths are 1 .. 2^31", i + 1,
                 (LUAI_UACINT)p->n[i]);
}

/* The lengths of p as "n1 x n2 x n3", in a buffer of SHAPE chars. */
enum { SHAPE = 48 };
static void shape_of(const cg_fft *p, char *shape) {
  int at = 0;
  for (int i = 0; i < p->rank; i++)
    at += snprintf(shape + at, SHAPE - (size_t)at, "%s%lld", i ? " x " : "",
                   p->n[i]);
}

/* The points of one signal of p, after checking that all of the batch
   are at most 2^40; each factor is checked before it multiplies, so the
   product cannot overflow. */
static long long points(lua_State *L, const cg_fft *p) {
  const long long most = 1LL << 40;
  long long total = 1;
  int ok = 1;
  for (int i = 0; i < p->rank && ok; i++)
    if ((ok = total <= most / p->n[i])) total *= p->n[i];
  if (!ok || total > most / p->batch) {
    char shape[SHAPE];
    shape_of(p, shape);
    luaL_error(L, "cuda.fft: lengths %s, batch %I: more than 2^40 points "
               "in all", shape, (LUAI_UACINT)p->batch);
  }
  return total;
}

/* cuda.fft(lengths, kind [, {type =, batch =, stream =}]) -> FFT: a plan
   for batch transforms of the lengths (row-major), kind "c2c", "r2c" or
   "c2r", in f32 (default) or f64 */
static int fft_new(lua_State *L) {
  static const char *const kinds[] = { "c2c", "r2c", "c2r", NULL };
  static const char *const keys[] = { "type", "batch", "stream", NULL };
  cg_fft tmp;
  memset(&tmp, 0, sizeof tmp);
  lengths(L, 1, &tmp);
  tmp.kind = cg_checkoption(L, 2, NULL, kinds);
  tmp.type = CG_F32;
  tmp.batch = 1;
  int sidx = 0;
  if (!lua_isnoneornil(L, 3)) {
    luaL_checktype(L, 3, LUA_TTABLE);
    cg_check_options(L, 3, "cuda.fft", keys);
    lua_getfield(L, 3, "type");
    if (!lua_isnil(L, -1)) {
      tmp.type = cg_checktype(L, -1);
      if (tmp.type != CG_F32 && tmp.type != CG_F64)
        luaL_error(L, "cuda.fft: type must be f32 or f64, got %s",
                   cg_type_names[tmp.type]);
    }
    lua_getfield(L, 3, "batch");
    if (!lua_isnil(L, -1)) {
      lua_Integer b = 0;
      if (!cg_tointeger(L, -1, &b) || b < 1 || b > (1LL << 31))
        luaL_error(L, "cuda.fft: batch must be an integer in 1 .. 2^31");
      tmp.batch = b;
    }
    lua_getfield(L, 3, "stream");
    if (!lua_isnil(L, -1)) sidx = lua_gettop(L);
  }
  long long total = points(L, &tmp);
  long long last = tmp.n[tmp.rank - 1];
  tmp.real = (size_t)total;
  tmp.cplx = (size_t)(tmp.kind == C2C ? total : total / last * (last / 2 + 1));
  cg_ctx *ctx = cg_context(L);
  if (sidx) {
    cg_stream *s = cg_checkobj(L, sidx, CG_STREAM);
    if (s->h.ctx != ctx) cg_error_devices(L, ctx, s->h.ctx, "cuda.fft");
  }
  cg_check_outside(L, ctx, "cannot make an FFT plan",
                   "make plans before capture");
  cg_fft *p = cg_newobj(L, ctx, sizeof *p, CG_FFT);
  memcpy((char *)p + sizeof p->h, (char *)&tmp + sizeof tmp.h,
         sizeof *p - sizeof p->h);
  if (sidx) {
    lua_pushvalue(L, sidx);
    lua_setiuservalue(L, -2, 2);
  }
  cg_fft_res *r = calloc(1, sizeof *r);
  if (!r) luaL_error(L, "cuda.fft: out of host memory");
  const char *why = cg_fft_acquire(); /* the plan's hold, dropped with it */
  if (why) {
    free(r);
    luaL_error(L, "%s", why);
  }
  static const int types[2][3] = {
    { CUFFT_C2C, CUFFT_R2C, CUFFT_C2R }, { CUFFT_Z2Z, CUFFT_D2Z, CUFFT_Z2D }
  };
  int t = types[p->type == CG_F64][p->kind];
  const char *api = "cufftCreate";
  cufftResult fr = cg_cufft.cufftCreate(&r->plan);
  int made = fr == CUFFT_SUCCESS;
  if (made) {
    api = "cufftSetAutoAllocation";
    fr = cg_cufft.cufftSetAutoAllocation(r->plan, 0);
  }
  if (fr == CUFFT_SUCCESS) {
    api = "cufftMakePlanMany64";
    /* packed signals: the default layout (NULL embeds) */
    fr = cg_cufft.cufftMakePlanMany64(r->plan, p->rank, p->n, NULL, 1, 0,
                                      NULL, 1, 0, t, p->batch, &r->bytes);
  }
  CUresult e = CUDA_SUCCESS;
  if (fr == CUFFT_SUCCESS && r->bytes) {
    e = cg_drv.cuMemAlloc(&r->work, r->bytes);
    if (e == CUDA_SUCCESS) {
      api = "cufftSetWorkArea";
      fr = cg_cufft.cufftSetWorkArea(r->plan, (void *)(uintptr_t)r->work);
    }
  }
  if (fr != CUFFT_SUCCESS || e != CUDA_SUCCESS) {
    if (made) { /* the plan, its work area and r, as a plan is freed */
      cg_destroy(CG_H_FFT, (cg_handle){ .fft = r });
    } else {
      free(r);
      cg_fft_drop();
    }
    cg_check(L, ctx, "cuMemAlloc", e);
    check(L, api, fr);
  }
  p->h.drv.fft = r;
  p->h.open = 1;
  return 1;
}

static int fft_free(lua_State *L) { return cg_close(L, CG_FFT, 0); }
static int fft_gc(lua_State *L) { return cg_close(L, CG_FFT, 1); }

/* -- transforms ------------------------------------------------------------ */

/* The buffer at idx: of the plan's device and type, holding need reals. */
static cg_buffer *signal(lua_State *L, cg_fft *p, int idx, const char *fn,
                         const char *name, size_t need, int complex) {
  cg_buffer *b = cg_testobj(L, idx, CG_BUFFER);
  if (!b)
    luaL_error(L, "fft:%s: %s must be a cugraph.Buffer, got %s", fn, name,
               luaL_typename(L, idx));
  cg_checkobj(L, idx, CG_BUFFER);
  if (b->h.ctx != p->h.ctx)
    cg_error_devices(L, p->h.ctx, b->h.ctx,
                     lua_pushfstring(L, "fft:%s: %s", fn, name));
  const char *why = cg_mem_why(L, p->h.ctx, &b->h);
  if (why) luaL_error(L, "fft:%s: %s: %s", fn, name, why);
  if (b->type != p->type)
    luaL_error(L, "fft:%s: %s is %s; the plan is %s", fn, name,
               cg_type_names[b->type], cg_type_names[p->type]);
  if (complex && b->h.drv.mem % (2 * cg_type_size[b->type]))
    luaL_error(L, "fft:%s: %s is not aligned to a complex %s (an address "
               "of a multiple of %d bytes)", fn, name, cg_type_names[b->type],
               2 * cg_type_size[b->type]);
  if (b->n != need)
    luaL_error(L, "fft:%s: %s holds %I %s; the plan's %s %s needs %I (%s)",
               fn, name, (LUAI_UACINT)b->n, cg_type_names[b->type],
               complex ? "complex" : "real", name, (LUAI_UACINT)need,
               complex ? "re, im pairs" : "one a point");
  return b;
}

/* Runs the transform dir (CUFFT_FORWARD or CUFFT_INVERSE). */
static int transform(lua_State *L, int dir) {
  const char *fn = dir == CUFFT_FORWARD ? "forward" : "inverse";
  cg_fft *p = cg_checkself(L, CG_FFT);
  if ((p->kind == R2C && dir != CUFFT_FORWARD) ||
      (p->kind == C2R && dir != CUFFT_INVERSE))
    luaL_error(L, "fft:%s: %s plan goes %s only", fn,
               p->kind == R2C ? "an r2c" : "a c2r",
               p->kind == R2C ? "forward" : "inverse");
  int sidx = 4;
  if (lua_gettop(L) > sidx)
    luaL_error(L, "fft:%s: too many arguments: the stream is the last", fn);
  if (lua_gettop(L) < 3) /* named before lua_settop makes it nil */
    luaL_error(L, "fft:%s: %s must be a cugraph.Buffer, got no value", fn,
               lua_gettop(L) < 2 ? "input" : "output");
  lua_settop(L, sidx);
  if (lua_isnil(L, sidx)) {
    lua_getiuservalue(L, 1, 2);
    lua_replace(L, sidx);
  }
  size_t nin = p->kind == R2C ? p->real : 2 * p->cplx;
  size_t nout = p->kind == C2R ? p->real : 2 * p->cplx;
  cg_buffer *in = signal(L, p, 2, fn, "input", nin * (size_t)p->batch,
                         p->kind != R2C);
  cg_buffer *out = signal(L, p, 3, fn, "output", nout * (size_t)p->batch,
                          p->kind != C2R);
  size_t es = cg_type_size[p->type];
  CUdeviceptr i0 = in->h.drv.mem, o0 = out->h.drv.mem;
  if (i0 < o0 + out->n * es && o0 < i0 + in->n * es &&
      (p->kind != C2C || i0 != o0))
    luaL_error(L, "fft:%s: input and output overlap; %s", fn,
               p->kind == C2C ? "in place, give the same buffer twice"
                              : "a real transform needs two buffers");
  cg_ctx *ctx = p->h.ctx;
  if (cg_recording(ctx)) { /* the call is made again when the graph is */
    if (lua_isnoneornil(L, sidx))                                /* built */
      luaL_error(L, "fft:%s without a stream in a graphed function: pass "
                 "the stream the function runs on", fn);
    cg_record_call(L, ctx, cg_optstream(L, sidx, ctx), sidx);
    return 0;
  }
  for (int i = 1; i <= sidx; i++) cg_pin(L, ctx, i);
  CUstream st = cg_work_begin(L, ctx, lua_isnil(L, sidx) ? 0 : sidx,
                              dir == CUFFT_FORWARD ? "fft:forward"
                                                   : "fft:inverse");
  for (int i = 1; i <= 3; i++) cg_check_open(L, lua_touserdata(L, i));
  cg_current(L, ctx);
  CUstream s = st ? st : ctx->stream;
  cg_recs_mark(L, ctx, s); /* cuFFT may fork and join */
  if (ctx->capture)
    cg_recs_libcall(L, ctx, s, dir == CUFFT_FORWARD ? "fft:forward"
                                                    : "fft:inverse");
  cg_fft_res *r = RES(p);
  if (!p->bound || p->stream != s) {
    FFT(L, cufftSetStream, r->plan, s);
    p->stream = s;
    p->bound = 1;
  }
  int tok = cg_trace_begin(L, ctx, s, "fft", fn);
  void *a = DPTR(in), *b = DPTR(out);
  int f64 = p->type == CG_F64;
  switch (p->kind) {
  case C2C:
    if (f64) FFT(L, cufftExecZ2Z, r->plan, a, b, dir);
    else FFT(L, cufftExecC2C, r->plan, a, b, dir);
    break;
  case R2C:
    if (f64) FFT(L, cufftExecD2Z, r->plan, a, b);
    else FFT(L, cufftExecR2C, r->plan, a, b);
    break;
  default:
    if (f64) FFT(L, cufftExecZ2D, r->plan, a, b);
    else FFT(L, cufftExecC2R, r->plan, a, b);
  }
  cg_trace_end(L, ctx, tok);
  cg_work_finish(L, ctx, st);
  return 0;
}

/* p:forward(input, output [, stream]): the forward transform (e^-i),
   c2c or r2c; output may be input for c2c */
static int fft_forward(lua_State *L) { return transform(L, CUFFT_FORWARD); }

/* p:inverse(input, output [, stream]): the inverse (e^+i, unnormalized:
   forward then inverse scales by the number of points), c2c or c2r; a c2r
   transform may overwrite its input, as cuFFT's */
static int fft_inverse(lua_State *L) { return transform(L, CUFFT_INVERSE); }

/* -- the rest of the object ------------------------------------------------ */

/* p:elements() -> the elements of the plan's type that the forward
   transform's input and output hold (all of the batch; complex values
   count two) */
static int fft_elements(lua_State *L) {
  cg_fft *p = cg_checkself(L, CG_FFT);
  size_t in = p->kind == R2C ? p->real : 2 * p->cplx;
  size_t out = p->kind == C2R ? p->real : 2 * p->cplx;
  lua_pushinteger(L, (lua_Integer)(in * (size_t)p->batch));
  lua_pushinteger(L, (lua_Integer)(out * (size_t)p->batch));
  return 2;
}

/* p:workspace() -> bytes of the plan's work area */
static int fft_workspace(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)RES((cg_fft *)cg_checkself(L, CG_FFT))->bytes);
  return 1;
}

/* cuda.fft_version() -> cuFFT's version (12000 and up for cuFFT 12) */
static int fft_version(lua_State *L) {
  need_fft(L);
  int v = 0;
  cufftResult fr = cg_cufft.cufftGetVersion(&v);
  cg_fft_drop();
  check(L, "cufftGetVersion", fr);
  lua_pushinteger(L, v);
  return 1;
}

static int fft_tostring(lua_State *L) {
  static const char *const kinds[] = { "c2c", "r2c", "c2r" };
  cg_fft *p = cg_toobj(L, 1, CG_FFT);
  char shape[SHAPE];
  shape_of(p, shape);
  return cg_tostring(L, &p->h, " (%s %s %s, batch %I, device %d)",
                     kinds[p->kind], cg_type_names[p->type], shape,
                     (LUAI_UACINT)p->batch, p->h.ctx->ordinal);
}

void fft_open(lua_State *L) {
  static const luaL_Reg methods[] = {
    {"forward", fft_forward}, {"inverse", fft_inverse},
    {"elements", fft_elements}, {"workspace", fft_workspace},
    {"free", fft_free}, {"close", fft_free}, {NULL, NULL}
  };
  static const luaL_Reg meta[] = {
    {"__gc", fft_gc}, {"__close", fft_free}, {"__tostring", fft_tostring},
    {NULL, NULL}
  };
  static const luaL_Reg funcs[] = {
    {"fft", fft_new}, {"fft_version", fft_version}, {NULL, NULL}
  };
  cg_newtype(L, CG_FFT, methods, meta, NULL);
  luaL_setfuncs(L, funcs, 0);
}
