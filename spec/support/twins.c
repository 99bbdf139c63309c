/* Host twins of the spec kernels (spec/kernels/kernels.cu, and the
   programmatic kernels spec/75 compiles) for the test double, found by
   entry name: each body runs one thread of a launch, reading its
   arguments and global and shared memory through the double
   (driver/double.h). The simulator runs these kernels from their PTX and
   is built without them. */
#include "driver/double.h"

#include <string.h>

/* blockIdx.x * blockDim.x + threadIdx.x, stored in an int as CUDA C does. */
static int flat_x(const dbl_kctx *c) {
  return (int)(c->bid[0] * c->block[0] + c->tid[0]);
}

/* Byte offset of element i of a T[] indexed by an int (mul.wide.s32). */
static uint64_t at_index(int i, size_t elem) {
  return (uint64_t)((int64_t)i * (int64_t)elem);
}

/* fmaf without libm, which the build does not link: the product is exact in
   double; when rounding the double sum to float would meet a tie that the
   first rounding made, step the sum one ulp towards the exact value (the
   method of musl's fmaf). This is the GPU's fma.rn.f32 but for subnormal
   results. */
static float fma_f32(float x, float y, float z) {
  double xy = (double)x * y, r = xy + z;
  uint64_t u;
  memcpy(&u, &r, sizeof u);
  if ((u & 0x1fffffff) != 0x10000000 || (u >> 52 & 0x7ff) == 0x7ff
      || (r - xy == z && r - z == xy))
    return (float)r;
  int neg = (int)(u >> 63);
  double err = neg == (z > xy) ? xy - r + z : z - r + xy;
  if (neg == (err < 0)) u++;
  else u--;
  memcpy(&r, &u, sizeof r);
  return (float)r;
}

/* saxpy and _Z4axpyfPKfPfi: y[i] = a * x[i] + y[i], fused as nvcc emits it */
static void k_saxpy(dbl_kctx *c) {
  float a, xv, yv;
  uint64_t x, y;
  int n, i = flat_x(c);
  dbl_arg(c, 0, &a, 4), dbl_arg(c, 1, &x, 8), dbl_arg(c, 2, &y, 8);
  dbl_arg(c, 3, &n, 4);
  if (i >= n) return;
  uint64_t o = at_index(i, 4);
  if (dbl_ld(c, x + o, &xv, 4) && dbl_ld(c, y + o, &yv, 4)) {
    yv = fma_f32(xv, a, yv);
    dbl_st(c, y + o, &yv, 4);
  }
}

/* out[y * w + x] = tex2D<float>(t, (x + shift) * scale, (y + shift) * scale) */
static void k_tex_sample_f32(dbl_kctx *c) {
  uint64_t t, out;
  int w, h;
  float scale, shift, v[4];
  dbl_arg(c, 0, &t, 8), dbl_arg(c, 1, &out, 8), dbl_arg(c, 2, &w, 4);
  dbl_arg(c, 3, &h, 4), dbl_arg(c, 4, &scale, 4), dbl_arg(c, 5, &shift, 4);
  int x = flat_x(c), y = (int)c->bid[1];
  if (x >= w || y >= h) return;
  if (dbl_tex2d(c, t, ((float)x + shift) * scale, ((float)y + shift) * scale, v))
    dbl_st(c, out + at_index(y * w + x, 4), &v[0], 4);
}

/* surf2Dwrite(base + x + 1000 * y, s, x * 4, y) */
static void k_surf_fill_f32(dbl_kctx *c) {
  uint64_t s;
  int w, h;
  float base;
  dbl_arg(c, 0, &s, 8), dbl_arg(c, 1, &w, 4), dbl_arg(c, 2, &h, 4);
  dbl_arg(c, 3, &base, 4);
  int x = flat_x(c), y = (int)c->bid[1];
  if (x >= w || y >= h) return;
  float v = base + (float)x + 1000.0f * (float)y;
  dbl_surf2d_store(c, s, (long)x * 4, y, &v, 4);
}

/* out[i] = base + i */
static void k_iota_u32(dbl_kctx *c) {
  uint64_t out;
  uint32_t base;
  int n, i = flat_x(c);
  dbl_arg(c, 0, &out, 8), dbl_arg(c, 1, &base, 4), dbl_arg(c, 2, &n, 4);
  if (i >= n) return;
  uint32_t v = base + (uint32_t)i;
  dbl_st(c, out + at_index(i, 4), &v, 4);
}

/* y[i] += *s */
static void k_add_scalar_f32(dbl_kctx *c) {
  uint64_t y, s;
  float yv, sv;
  int n, i = flat_x(c);
  dbl_arg(c, 0, &y, 8), dbl_arg(c, 1, &s, 8), dbl_arg(c, 2, &n, 4);
  if (i >= n) return;
  uint64_t o = at_index(i, 4);
  if (dbl_ld(c, y + o, &yv, 4) && dbl_ld(c, s, &sv, 4)) {
    yv += sv;
    dbl_st(c, y + o, &yv, 4);
  }
}

/* out[*pos] = *pos + 1 in thread 0 of block 0 (in x) */
static void k_mark_u32(dbl_kctx *c) {
  uint64_t out, pos;
  uint32_t p;
  int n;
  dbl_arg(c, 0, &out, 8), dbl_arg(c, 1, &pos, 8), dbl_arg(c, 2, &n, 4);
  if (c->bid[0] != 0 || c->tid[0] != 0 || !dbl_ld(c, pos, &p, 4)
      || p >= (uint32_t)n)
    return;
  uint32_t v = p + 1u;
  dbl_st(c, out + (uint64_t)p * 4, &v, 4);
}

/* x[i] += 1 */
static void k_inc_i32(dbl_kctx *c) {
  uint64_t x;
  uint32_t v;
  int n, i = flat_x(c);
  dbl_arg(c, 0, &x, 8), dbl_arg(c, 1, &n, 4);
  if (i >= n) return;
  uint64_t o = at_index(i, 4);
  if (dbl_ld(c, x + o, &v, 4)) {
    v += 1u; /* the GPU's add wraps */
    dbl_st(c, x + o, &v, 4);
  }
}

/* dst[i] = src[i] * k */
static void k_scale_f64(dbl_kctx *c) {
  uint64_t dst, src;
  double k, v;
  int n, i = flat_x(c);
  dbl_arg(c, 0, &dst, 8), dbl_arg(c, 1, &src, 8), dbl_arg(c, 2, &k, 8);
  dbl_arg(c, 3, &n, 4);
  if (i >= n) return;
  uint64_t o = at_index(i, 8);
  if (dbl_ld(c, src + o, &v, 8)) {
    v *= k;
    dbl_st(c, dst + o, &v, 8);
  }
}

/* out[i] = in[i] at the ends, else the mean of in[i - 1] and in[i + 1] */
static void k_jacobi_f64(dbl_kctx *c) {
  uint64_t out, in;
  double a, b;
  int n, i = flat_x(c);
  dbl_arg(c, 0, &out, 8), dbl_arg(c, 1, &in, 8), dbl_arg(c, 2, &n, 4);
  if (i >= n) return;
  if (i == 0 || i == n - 1) {
    if (dbl_ld(c, in + at_index(i, 8), &a, 8))
      dbl_st(c, out + at_index(i, 8), &a, 8);
    return;
  }
  if (dbl_ld(c, in + at_index(i - 1, 8), &a, 8) &&
      dbl_ld(c, in + at_index(i + 1, 8), &b, 8)) {
    a = 0.5 * (a + b);
    dbl_st(c, out + at_index(i, 8), &a, 8);
  }
}

/* dst[i] = src[i] + v, 64-bit, wrapping */
static void k_add_i64(dbl_kctx *c) {
  uint64_t dst, src, v, s;
  int n, i = flat_x(c);
  dbl_arg(c, 0, &dst, 8), dbl_arg(c, 1, &src, 8), dbl_arg(c, 2, &v, 8);
  dbl_arg(c, 3, &n, 4);
  if (i >= n) return;
  uint64_t o = at_index(i, 8);
  if (dbl_ld(c, src + o, &s, 8)) {
    s += v;
    dbl_st(c, dst + o, &s, 8);
  }
}

/* out[i] = threads in the launch, i = flat 3D thread index */
static void k_dims_u32(dbl_kctx *c) {
  uint64_t out;
  int n;
  dbl_arg(c, 0, &out, 8), dbl_arg(c, 1, &n, 4);
  const unsigned *g = c->grid, *b = c->block;
  unsigned bx = c->bid[0] + g[0] * (c->bid[1] + g[1] * c->bid[2]);
  unsigned tx = c->tid[0] + b[0] * (c->tid[1] + b[1] * c->tid[2]);
  unsigned nt = b[0] * b[1] * b[2];
  unsigned i = bx * nt + tx;
  if (i >= (unsigned)n) return;
  unsigned v = nt * g[0] * g[1] * g[2];
  dbl_st(c, out + (uint64_t)i * 4, &v, 4);
}

/* shared_u32, before __syncthreads(): tile[threadIdx.x] = i * 2 */
static void k_shared_store(dbl_kctx *c) {
  unsigned v = (unsigned)flat_x(c) * 2u;
  unsigned char *t = dbl_shared_at(c, (size_t)c->tid[0] * 4, 4);
  if (t) memcpy(t, &v, 4);
}

/* shared_u32, after: out[i] = tile[threadIdx.x] */
static void k_shared_load(dbl_kctx *c) {
  uint64_t out;
  int n, i = flat_x(c);
  dbl_arg(c, 0, &out, 8), dbl_arg(c, 1, &n, 4);
  unsigned char *t = dbl_shared_at(c, (size_t)c->tid[0] * 4, 4);
  if (t && i < n) dbl_st(c, out + at_index(i, 4), t, 4);
}

/* out[0] = p.a + p.b for a struct of two doubles passed by value */
static void k_pair_sum(dbl_kctx *c) {
  uint64_t out;
  double p[2];
  dbl_arg(c, 0, &out, 8), dbl_arg(c, 1, p, 16);
  if (c->bid[0] != 0 || c->tid[0] != 0) return;
  double v = p[0] + p[1];
  dbl_st(c, out, &v, 8);
}

/* x[2^40] = 1.0f */
static void k_oob_write(dbl_kctx *c) {
  uint64_t x;
  float one = 1.0f;
  dbl_arg(c, 0, &x, 8);
  dbl_st(c, x + ((uint64_t)1 << 40) * 4, &one, 4);
}

/* count_to: x[0] += 1; cond = x[0] < limit (one thread) */
static void k_count_to(dbl_kctx *c) {
  uint64_t x, h;
  uint32_t limit, v;
  dbl_arg(c, 0, &x, 8), dbl_arg(c, 1, &h, 8), dbl_arg(c, 2, &limit, 4);
  if (c->bid[0] || c->tid[0] || !dbl_ld(c, x, &v, 4)) return;
  v += 1u;
  dbl_st(c, x, &v, 4);
  dbl_set_conditional(c, h, v < limit);
}

/* pdl_scale: y[i] = a * x[i]; spec/75 compiles it in several forms, their
   griddepcontrol instructions placed well and badly (work here runs in
   order: they change nothing) */
static void k_pdl_scale(dbl_kctx *c) {
  uint64_t x, y;
  float a, v;
  int n, i = flat_x(c);
  dbl_arg(c, 0, &x, 8), dbl_arg(c, 1, &y, 8), dbl_arg(c, 2, &a, 4);
  dbl_arg(c, 3, &n, 4);
  if (i >= n) return;
  uint64_t o = at_index(i, 4);
  if (dbl_ld(c, x + o, &v, 4)) {
    v *= a;
    dbl_st(c, y + o, &v, 4);
  }
}

/* set_cond: cond = *v (one thread) */
static void k_set_cond(dbl_kctx *c) {
  uint64_t h, p;
  uint32_t v;
  dbl_arg(c, 0, &h, 8), dbl_arg(c, 1, &p, 8);
  if (c->bid[0] || c->tid[0] || !dbl_ld(c, p, &v, 4)) return;
  dbl_set_conditional(c, h, v);
}

const dbl_kimpl dbl_twins[] = {
  {"count_to", {k_count_to, NULL}, 3, {8, 8, 4}},
  {"set_cond", {k_set_cond, NULL}, 2, {8, 8}},
  {"saxpy", {k_saxpy, NULL}, 4, {4, 8, 8, 4}},
  {"_Z4axpyfPKfPfi", {k_saxpy, NULL}, 4, {4, 8, 8, 4}},
  {"iota_u32", {k_iota_u32, NULL}, 3, {8, 4, 4}},
  {"add_scalar_f32", {k_add_scalar_f32, NULL}, 3, {8, 8, 4}},
  {"mark_u32", {k_mark_u32, NULL}, 3, {8, 8, 4}},
  {"inc_i32", {k_inc_i32, NULL}, 2, {8, 4}},
  {"tex_sample_f32", {k_tex_sample_f32, NULL}, 6, {8, 8, 4, 4, 4, 4}},
  {"surf_fill_f32", {k_surf_fill_f32, NULL}, 4, {8, 4, 4, 4}},
  {"scale_f64", {k_scale_f64, NULL}, 4, {8, 8, 8, 4}},
  {"jacobi_f64", {k_jacobi_f64, NULL}, 3, {8, 8, 4}},
  {"add_i64", {k_add_i64, NULL}, 4, {8, 8, 8, 4}},
  {"dims_u32", {k_dims_u32, NULL}, 2, {8, 4}},
  {"shared_u32", {k_shared_store, k_shared_load}, 2, {8, 4}},
  {"oob_write", {k_oob_write, NULL}, 1, {8}},
  {"pair_sum", {k_pair_sum, NULL}, 2, {8, 16}},
  {"noop", {NULL, NULL}, 0, {0}},
  {"pdl_scale", {k_pdl_scale, NULL}, 4, {8, 8, 4, 4}},
};

const size_t dbl_ntwins = sizeof dbl_twins / sizeof *dbl_twins;
