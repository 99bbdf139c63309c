/* Running a kernel: its host version, found by entry name (the twins of
   the spec kernels of spec/kernels/kernels.cu and the built-in condition
   setters of src/kernel/setters.cu), thread by thread; or, in the
   simulator, its PTX (sim/ptx). */
#include "double.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* -- kernels --------------------------------------------------------------- */

static void arg(const kctx *c, size_t i, void *v, size_t n) {
  memcpy(v, c->args + c->off[i], n);
}

/* The host address of an n-byte global access at p, or NULL after a fault. */
static void *global(kctx *c, uint64_t p, size_t n) {
  void *h = dbl_dev_range(p, n);
  if (!h) c->fault = CUDA_ERROR_ILLEGAL_ADDRESS;
  else if (p % n) c->fault = CUDA_ERROR_MISALIGNED_ADDRESS;
  return c->fault ? NULL : h;
}

static int ld(kctx *c, uint64_t p, void *v, size_t n) {
  void *h = global(c, p, n);
  if (h) memcpy(v, h, n);
  return h != NULL;
}

static void st(kctx *c, uint64_t p, const void *v, size_t n) {
  void *h = global(c, p, n);
  if (h) memcpy(h, v, n);
}

/* The shared-memory word at byte offset at, or NULL after a fault. */
static unsigned char *shared_at(kctx *c, size_t at, size_t n) {
  if (at > c->nshared || n > c->nshared - at) {
    c->fault = CUDA_ERROR_ILLEGAL_ADDRESS;
    return NULL;
  }
  return c->shared + at;
}

/* blockIdx.x * blockDim.x + threadIdx.x, stored in an int as CUDA C does. */
static int flat_x(const kctx *c) {
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
static void k_saxpy(kctx *c) {
  float a, xv, yv;
  uint64_t x, y;
  int n, i = flat_x(c);
  arg(c, 0, &a, 4), arg(c, 1, &x, 8), arg(c, 2, &y, 8), arg(c, 3, &n, 4);
  if (i >= n) return;
  uint64_t o = at_index(i, 4);
  if (ld(c, x + o, &xv, 4) && ld(c, y + o, &yv, 4)) {
    yv = fma_f32(xv, a, yv);
    st(c, y + o, &yv, 4);
  }
}

/* out[i] = base + i */
static void k_iota_u32(kctx *c) {
  uint64_t out;
  uint32_t base;
  int n, i = flat_x(c);
  arg(c, 0, &out, 8), arg(c, 1, &base, 4), arg(c, 2, &n, 4);
  if (i >= n) return;
  uint32_t v = base + (uint32_t)i;
  st(c, out + at_index(i, 4), &v, 4);
}

/* y[i] += *s */
static void k_add_scalar_f32(kctx *c) {
  uint64_t y, s;
  float yv, sv;
  int n, i = flat_x(c);
  arg(c, 0, &y, 8), arg(c, 1, &s, 8), arg(c, 2, &n, 4);
  if (i >= n) return;
  uint64_t o = at_index(i, 4);
  if (ld(c, y + o, &yv, 4) && ld(c, s, &sv, 4)) {
    yv += sv;
    st(c, y + o, &yv, 4);
  }
}

/* out[*pos] = *pos + 1 in thread 0 of block 0 (in x) */
static void k_mark_u32(kctx *c) {
  uint64_t out, pos;
  uint32_t p;
  int n;
  arg(c, 0, &out, 8), arg(c, 1, &pos, 8), arg(c, 2, &n, 4);
  if (c->bid[0] != 0 || c->tid[0] != 0 || !ld(c, pos, &p, 4)
      || p >= (uint32_t)n)
    return;
  uint32_t v = p + 1u;
  st(c, out + (uint64_t)p * 4, &v, 4);
}

/* x[i] += 1 */
static void k_inc_i32(kctx *c) {
  uint64_t x;
  uint32_t v;
  int n, i = flat_x(c);
  arg(c, 0, &x, 8), arg(c, 1, &n, 4);
  if (i >= n) return;
  uint64_t o = at_index(i, 4);
  if (ld(c, x + o, &v, 4)) {
    v += 1u; /* the GPU's add wraps */
    st(c, x + o, &v, 4);
  }
}

/* dst[i] = src[i] * k */
static void k_scale_f64(kctx *c) {
  uint64_t dst, src;
  double k, v;
  int n, i = flat_x(c);
  arg(c, 0, &dst, 8), arg(c, 1, &src, 8), arg(c, 2, &k, 8), arg(c, 3, &n, 4);
  if (i >= n) return;
  uint64_t o = at_index(i, 8);
  if (ld(c, src + o, &v, 8)) {
    v *= k;
    st(c, dst + o, &v, 8);
  }
}

/* out[i] = in[i] at the ends, else the mean of in[i - 1] and in[i + 1] */
static void k_jacobi_f64(kctx *c) {
  uint64_t out, in;
  double a, b;
  int n, i = flat_x(c);
  arg(c, 0, &out, 8), arg(c, 1, &in, 8), arg(c, 2, &n, 4);
  if (i >= n) return;
  if (i == 0 || i == n - 1) {
    if (ld(c, in + at_index(i, 8), &a, 8)) st(c, out + at_index(i, 8), &a, 8);
    return;
  }
  if (ld(c, in + at_index(i - 1, 8), &a, 8) &&
      ld(c, in + at_index(i + 1, 8), &b, 8)) {
    a = 0.5 * (a + b);
    st(c, out + at_index(i, 8), &a, 8);
  }
}

/* dst[i] = src[i] + v, 64-bit, wrapping */
static void k_add_i64(kctx *c) {
  uint64_t dst, src, v, s;
  int n, i = flat_x(c);
  arg(c, 0, &dst, 8), arg(c, 1, &src, 8), arg(c, 2, &v, 8), arg(c, 3, &n, 4);
  if (i >= n) return;
  uint64_t o = at_index(i, 8);
  if (ld(c, src + o, &s, 8)) {
    s += v;
    st(c, dst + o, &s, 8);
  }
}

/* out[i] = threads in the launch, i = flat 3D thread index */
static void k_dims_u32(kctx *c) {
  uint64_t out;
  int n;
  arg(c, 0, &out, 8), arg(c, 1, &n, 4);
  const unsigned *g = c->grid, *b = c->block;
  unsigned bx = c->bid[0] + g[0] * (c->bid[1] + g[1] * c->bid[2]);
  unsigned tx = c->tid[0] + b[0] * (c->tid[1] + b[1] * c->tid[2]);
  unsigned nt = b[0] * b[1] * b[2];
  unsigned i = bx * nt + tx;
  if (i >= (unsigned)n) return;
  unsigned v = nt * g[0] * g[1] * g[2];
  st(c, out + (uint64_t)i * 4, &v, 4);
}

/* shared_u32, before __syncthreads(): tile[threadIdx.x] = i * 2 */
static void k_shared_store(kctx *c) {
  unsigned v = (unsigned)flat_x(c) * 2u;
  unsigned char *t = shared_at(c, (size_t)c->tid[0] * 4, 4);
  if (t) memcpy(t, &v, 4);
}

/* shared_u32, after: out[i] = tile[threadIdx.x] */
static void k_shared_load(kctx *c) {
  uint64_t out;
  int n, i = flat_x(c);
  arg(c, 0, &out, 8), arg(c, 1, &n, 4);
  unsigned char *t = shared_at(c, (size_t)c->tid[0] * 4, 4);
  if (t && i < n) st(c, out + at_index(i, 4), t, 4);
}

/* out[0] = p.a + p.b for a struct of two doubles passed by value */
static void k_pair_sum(kctx *c) {
  uint64_t out;
  double p[2];
  arg(c, 0, &out, 8), arg(c, 1, p, 16);
  if (c->bid[0] != 0 || c->tid[0] != 0) return;
  double v = p[0] + p[1];
  st(c, out, &v, 8);
}

/* x[2^40] = 1.0f */
static void k_oob_write(kctx *c) {
  uint64_t x;
  float one = 1.0f;
  arg(c, 0, &x, 8);
  st(c, x + ((uint64_t)1 << 40) * 4, &one, 4);
}

/* The host twin of cudaGraphSetConditional: sets the handle in the graph
   being launched; a handle it does not have is a fault. */
static void set_conditional(kctx *c, uint64_t h, unsigned v) {
  if (dbl_set_handle(h, v)) c->fault = CUDA_ERROR_LAUNCH_FAILED;
}

/* count_to: x[0] += 1; cond = x[0] < limit (one thread) */
static void k_count_to(kctx *c) {
  uint64_t x, h;
  uint32_t limit, v;
  arg(c, 0, &x, 8), arg(c, 1, &h, 8), arg(c, 2, &limit, 4);
  if (c->bid[0] || c->tid[0] || !ld(c, x, &v, 4)) return;
  v += 1u;
  st(c, x, &v, 4);
  set_conditional(c, h, v < limit);
}

/* set_cond: cond = *v (one thread) */
static void k_set_cond(kctx *c) {
  uint64_t h, p;
  uint32_t v;
  arg(c, 0, &h, 8), arg(c, 1, &p, 8);
  if (c->bid[0] || c->tid[0] || !ld(c, p, &v, 4)) return;
  set_conditional(c, h, v);
}

/* The setters of src/kernel/setters.cu. */
static void k_cond_set(kctx *c) {
  uint64_t h;
  uint32_t v;
  arg(c, 0, &h, 8), arg(c, 1, &v, 4);
  set_conditional(c, h, v);
}

static void k_cond_when(kctx *c) {
  static const unsigned char size[] = {4, 8, 1, 1, 2, 2, 4, 4, 8, 8};
  uint64_t h, p, bits;
  uint32_t type, cmp;
  int lt, eq, gt;
  arg(c, 0, &h, 8), arg(c, 1, &p, 8), arg(c, 2, &type, 4), arg(c, 3, &cmp, 4);
  arg(c, 4, &bits, 8);
  unsigned char raw[8] = {0};
  if (type > 9 || !ld(c, p, raw, size[type])) return;
  if (type <= 1) {
    float f;
    double a, b;
    memcpy(&f, raw, 4);
    if (type == 0) a = f;
    else memcpy(&a, raw, 8);
    memcpy(&b, &bits, 8);
    lt = a < b, eq = a == b, gt = a > b;
  } else if (type % 2 == 0) {
    int64_t a = 0, b = (int64_t)bits;
    int8_t i8; int16_t i16; int32_t i32;
    if (type == 2) memcpy(&i8, raw, 1), a = i8;
    else if (type == 4) memcpy(&i16, raw, 2), a = i16;
    else if (type == 6) memcpy(&i32, raw, 4), a = i32;
    else memcpy(&a, raw, 8);
    lt = a < b, eq = a == b, gt = a > b;
  } else {
    uint64_t a = 0;
    memcpy(&a, raw, size[type]); /* little-endian host */
    lt = a < bits, eq = a == bits, gt = a > bits;
  }
  unsigned r = cmp == 0 ? lt : cmp == 1 ? lt | eq : cmp == 2 ? gt
             : cmp == 3 ? gt | eq : cmp == 4 ? eq : !eq;
  set_conditional(c, h, r);
}

static void k_cond_countdown(kctx *c) {
  uint64_t h, cell;
  uint32_t n, v;
  arg(c, 0, &h, 8), arg(c, 1, &cell, 8), arg(c, 2, &n, 4);
  if (!ld(c, cell, &v, 4)) return;
  if (v == 0) v = n;
  v -= 1;
  st(c, cell, &v, 4);
  set_conditional(c, h, v != 0);
}

static const kimpl kernels[] = {
  {"count_to", {k_count_to, NULL}, 3, {8, 8, 4}},
  {"set_cond", {k_set_cond, NULL}, 2, {8, 8}},
  {"cg_cond_set", {k_cond_set, NULL}, 2, {8, 4}},
  {"cg_cond_when", {k_cond_when, NULL}, 5, {8, 8, 4, 4, 8}},
  {"cg_cond_countdown", {k_cond_countdown, NULL}, 3, {8, 8, 4}},
  {"saxpy", {k_saxpy, NULL}, 4, {4, 8, 8, 4}},
  {"_Z4axpyfPKfPfi", {k_saxpy, NULL}, 4, {4, 8, 8, 4}},
  {"iota_u32", {k_iota_u32, NULL}, 3, {8, 4, 4}},
  {"add_scalar_f32", {k_add_scalar_f32, NULL}, 3, {8, 8, 4}},
  {"mark_u32", {k_mark_u32, NULL}, 3, {8, 8, 4}},
  {"inc_i32", {k_inc_i32, NULL}, 2, {8, 4}},
  {"scale_f64", {k_scale_f64, NULL}, 4, {8, 8, 8, 4}},
  {"jacobi_f64", {k_jacobi_f64, NULL}, 3, {8, 8, 4}},
  {"add_i64", {k_add_i64, NULL}, 4, {8, 8, 8, 4}},
  {"dims_u32", {k_dims_u32, NULL}, 2, {8, 4}},
  {"shared_u32", {k_shared_store, k_shared_load}, 2, {8, 4}},
  {"oob_write", {k_oob_write, NULL}, 1, {8}},
  {"pair_sum", {k_pair_sum, NULL}, 2, {8, 16}},
  {"noop", {NULL, NULL}, 0, {0}},
};

/* The host version of the entry called name. */
const kimpl *dbl_find_kernel(const char *name) {
#ifdef CUDA_SIM
  return NULL; /* every kernel runs from its PTX */
#endif
  for (size_t i = 0; i < sizeof kernels / sizeof *kernels; i++)
    if (!strcmp(kernels[i].name, name)) return &kernels[i];
  return NULL;
}

static unsigned char shared_mem[SHARED_OPTIN];

/* Runs every thread of the grid, block by block; a fault makes the context
   sticky and stops the kernel. */
#ifdef CUDA_SIM
static void run_sim(const op *o);
#endif
void dbl_run_kernel(const op *o) {
#ifdef CUDA_SIM
  if (o->f->sim) { /* always: launches need it */
    run_sim(o);
    return;
  }
#endif
  const kimpl *k = o->f->impl;
  if (!k->body[0]) return;
  kctx c = {o->args, o->f->off, {0}, {0}, {0}, {0}, shared_mem, o->shared,
            CUDA_SUCCESS};
  memcpy(c.grid, o->grid, sizeof c.grid);
  memcpy(c.block, o->block, sizeof c.block);
  unsigned *b = c.bid, *t = c.tid;
  for (b[2] = 0; b[2] < c.grid[2]; b[2]++)
    for (b[1] = 0; b[1] < c.grid[1]; b[1]++)
      for (b[0] = 0; b[0] < c.grid[0]; b[0]++) {
        memset(shared_mem, 0xCD, o->shared); /* shared memory is not zeroed */
        for (int phase = 0; phase < 2 && k->body[phase]; phase++)
          for (t[2] = 0; t[2] < c.block[2]; t[2]++)
            for (t[1] = 0; t[1] < c.block[1]; t[1]++)
              for (t[0] = 0; t[0] < c.block[0]; t[0]++) {
                k->body[phase](&c);
                if (c.fault) {
                  dbl_sticky = c.fault;
                  return;
                }
              }
      }
}

/* -- the simulator --------------------------------------------------------- */

#ifdef CUDA_SIM
static int sim_cond(void *ud, uint64_t h, unsigned v) {
  return dbl_set_handle(h, v);
}
/* CUDA_SIM_STATS=1: thread-instructions run and the seconds kernels took,
   on stderr at exit. */
static uint64_t sim_executed;
static double sim_seconds;

static void sim_stats(void) {
  fprintf(stderr, "cuda sim: %llu thread-instructions in %.3f s of kernel "
          "time: %.1f M/s\n", (unsigned long long)sim_executed, sim_seconds,
          sim_seconds > 0 ? (double)sim_executed / sim_seconds / 1e6 : 0.0);
}

/* Runs a kernel from its PTX; a fault makes the context sticky and is
   told on stderr, as a memory checker would. */
static void run_sim(const op *o) {
  static int stats = -1;
  if (stats < 0) {
    const char *e = getenv("CUDA_SIM_STATS");
    if ((stats = e && *e && strcmp(e, "0"))) atexit(sim_stats);
  }
  sim_launch l = {{o->grid[0], o->grid[1], o->grid[2]},
                  {o->block[0], o->block[1], o->block[2]}, o->shared,
                  o->args, o->f->argbytes, dbl_sim_live, sim_cond, NULL, 0, 0};
  char diag[400];
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int code = sim_run(o->f->sim, &l, diag, sizeof diag);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  sim_executed += l.executed;
  sim_seconds += (double)(t1.tv_sec - t0.tv_sec)
                 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  if (code) {
    fprintf(stderr, "cuda sim: %s\n", diag);
    dbl_sticky = (CUresult)code;
  }
}
#endif
