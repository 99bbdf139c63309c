/* The simulator's interpreter: warps of 32 lanes in lock step. A warp runs
   one group of lanes at a time, those at the lowest PC among its runnable
   lanes; a divergent branch splits the group and the lanes meet again where
   their PCs do (NVRTC lays out a branch's both sides before the join). Each
   instruction loops over the group's lanes, guarded ones masked off. The
   warps of a block run in turn up to a bar.sync, which releases when every
   lane of the block that has not exited waits there; blocks run in
   parallel on host threads. Global accesses are checked against the live
   allocations; the first fault stops the launch. */
#define _GNU_SOURCE
#include "ptx_int.h"

#include <fenv.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ALL 0xffffffffu

__extension__ typedef __int128 s128;
__extension__ typedef unsigned __int128 u128;

typedef struct frame {
  int pc, other;        /* the group's PC; the lowest PC of other lanes */
  uint32_t live, mask;  /* lanes in this frame; lanes of the group */
  int pcs[32];          /* PCs of lanes outside the group */
} frame;

typedef struct warp {
  uint64_t *r;          /* slot s of lane l: r[s * 32 + l] */
  uint32_t *p;          /* predicate masks */
  unsigned char *local, *pf; /* per lane: local memory, parameter frames */
  frame top;
  uint32_t wait, exited;
  int done, index;
} warp;

typedef struct run_ctx run_ctx;

typedef struct worker {
  run_ctx *rc;
  warp *warps;
  uint64_t *regs;
  uint32_t *preds;
  unsigned char *shared, *local, *pf;
  unsigned nwarps;
  unsigned bid[3];
  uint64_t lo, hi;      /* the allocation last found live */
  uint64_t executed;
  int fault;
} worker;

struct run_ctx {
  const func *k;
  const sim_module *m;
  sim_launch *l;
  size_t nshared;
  unsigned nthreads;
  uint64_t nblocks, next;
  int fault;            /* set once, by the first fault */
  pthread_mutex_t mu;
  char *diag;
  size_t ndiag;
};

/* -- values --------------------------------------------------------------- */

static inline float f32(uint64_t v) {
  uint32_t u = (uint32_t)v;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint64_t bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline double f64(uint64_t v) {
  double f;
  memcpy(&f, &v, 8);
  return f;
}
static inline uint64_t bd(double f) {
  uint64_t u;
  memcpy(&u, &f, 8);
  return u;
}
static inline int64_t sx(uint64_t v, int bits) {
  return bits >= 64 ? (int64_t)v : (int64_t)(v << (64 - bits)) >> (64 - bits);
}
static inline uint64_t zx(uint64_t v, int bits) {
  return bits >= 64 ? v : v & ((1ull << bits) - 1);
}
static inline float ftz(float x) {
  return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x;
}

static float half_to_f32(uint16_t h) {
  uint32_t s = (uint32_t)(h >> 15) << 31, e = h >> 10 & 0x1f, m = h & 0x3ff;
  float f;
  if (e == 0) {
    f = ldexpf((float)m, -24);
    return s ? -f : f;
  }
  if (e == 31) {
    uint32_t u = s | 0x7f800000u | m << 13;
    memcpy(&f, &u, 4);
    return f;
  }
  uint32_t u = s | (e + 112) << 23 | m << 13;
  memcpy(&f, &u, 4);
  return f;
}

/* f32 (or an f64, through rounding to f32 once: exact for f32 inputs) to
   f16, rounding to nearest even. */
static uint16_t f32_to_half(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t s = u >> 16 & 0x8000;
  float a = fabsf(f);
  if (a != a) return (uint16_t)(s | 0x7e00);
  if (a >= 65520.0f) return (uint16_t)(s | 0x7c00);
  if (a < 6.103515625e-05f) { /* subnormal: units of 2^-24 */
    float q = nearbyintf(a * 16777216.0f);
    return (uint16_t)(s | (uint32_t)q);
  }
  int e;
  float m = frexpf(a, &e);           /* a = m 2^e, m in [0.5, 1) */
  float q = nearbyintf(m * 2048.0f); /* 11 bits */
  if (q >= 2048.0f) q = 1024.0f, e++;
  return (uint16_t)(s | (uint32_t)(e + 14) << 10 | ((uint32_t)q & 0x3ff));
}

static float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)(u >> 16 | 0x40);
  u += 0x7fff + (u >> 16 & 1);
  return (uint16_t)(u >> 16);
}

static int fe_mode(int rnd) {
  switch (rnd) {
  case R_Z: return FE_TOWARDZERO;
  case R_M: return FE_DOWNWARD;
  case R_P: return FE_UPWARD;
  default: return FE_TONEAREST;
  }
}

static double round_int(double x, int rnd) {
  switch (rnd) {
  case R_NI: return nearbyint(x); /* the default mode: to nearest even */
  case R_ZI: return trunc(x);
  case R_MI: return floor(x);
  case R_PI: return ceil(x);
  default: return x;
  }
}

/* -- faults --------------------------------------------------------------- */

static const char *space_name(int s) {
  static const char *const n[] = {"generic", "global", "shared", "local",
                                  "param", "param", "const"};
  return n[s];
}

static void thread_of(const worker *w, int warp_index, int lane, unsigned t[3]) {
  const unsigned *b = w->rc->l->block;
  unsigned i = (unsigned)warp_index * 32 + (unsigned)lane;
  t[0] = i % b[0];
  t[1] = i / b[0] % b[1];
  t[2] = i / (b[0] * b[1]);
}

/* Records the launch's first fault with its diagnostic. */
static void fault(worker *w, const warp *wp, int lane, const ins *in,
                  int code, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void fault(worker *w, const warp *wp, int lane, const ins *in,
                  int code, const char *fmt, ...) {
  run_ctx *rc = w->rc;
  w->fault = code;
  pthread_mutex_lock(&rc->mu);
  if (!rc->fault) {
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    unsigned t[3];
    thread_of(w, wp->index, lane, t);
    snprintf(rc->diag, rc->ndiag, "kernel %s: %s (PTX line %d), thread "
             "(%u,%u,%u) of block (%u,%u,%u)", rc->k->name, what, in->line,
             t[0], t[1], t[2], w->bid[0], w->bid[1], w->bid[2]);
    __atomic_store_n(&rc->fault, code, __ATOMIC_SEQ_CST);
  }
  pthread_mutex_unlock(&rc->mu);
}

/* -- memory --------------------------------------------------------------- */

/* The host address of an n-byte global access at p, or NULL after a
   fault. */
static unsigned char *global_slow(worker *w, warp *wp, int lane,
                                  const ins *in, uint64_t p, unsigned n) {
  if (p % n) {
    fault(w, wp, lane, in, SIM_MISALIGNED, "misaligned %s access of %u "
          "bytes at 0x%llx", space_name(in->space), n, (unsigned long long)p);
    return NULL;
  }
  const sim_module *m = w->rc->m;
  for (size_t i = 0; i < m->nvars; i++) {
    uint64_t b = (uint64_t)(uintptr_t)m->vars[i].data;
    if (p >= b && p - b <= m->vars[i].size && n <= m->vars[i].size - (p - b))
      return (unsigned char *)(uintptr_t)p;
  }
  sim_launch *l = w->rc->l;
  uint64_t lo, hi;
  if (l->live && l->live(l->ud, p, n, &lo, &hi)) {
    w->lo = lo, w->hi = hi;
    return (unsigned char *)(uintptr_t)p;
  }
  fault(w, wp, lane, in, SIM_ILLEGAL_ADDRESS, "out-of-bounds %s access of "
        "%u bytes at 0x%llx, in no live allocation", space_name(in->space), n,
        (unsigned long long)p);
  return NULL;
}

static inline unsigned char *global_at(worker *w, warp *wp, int lane,
                                       const ins *in, uint64_t p, unsigned n) {
  if (p >= w->lo && p + n <= w->hi && !(p & (n - 1)))
    return (unsigned char *)(uintptr_t)p;
  return global_slow(w, wp, lane, in, p, n);
}

/* The host address of an n-byte access at p in space sp for a lane, or
   NULL after a fault. */
static unsigned char *addr_of(worker *w, warp *wp, int lane, const ins *in,
                              int sp, uint64_t p, unsigned n) {
  const run_ctx *rc = w->rc;
  if (sp == SP_GENERIC) {
    if (p >= GEN_SHARED) sp = SP_SHARED, p -= GEN_SHARED;
    else if (p >= GEN_LOCAL) sp = SP_LOCAL, p -= GEN_LOCAL;
    else sp = SP_GLOBAL;
  }
  switch (sp) {
  case SP_GLOBAL: case SP_CONST:
    return global_at(w, wp, lane, in, p, n);
  case SP_SHARED:
    if (p > rc->nshared || n > rc->nshared - p) break;
    if (p % n) goto misaligned;
    return w->shared + p;
  case SP_LOCAL:
    if (p > rc->m->local_size || n > rc->m->local_size - p) break;
    if (p % n) goto misaligned;
    return wp->local + (size_t)lane * rc->m->local_size + p;
  case SP_FPARAM:
    if (p > rc->m->pframe || n > rc->m->pframe - p) break;
    return wp->pf + (size_t)lane * rc->m->pframe + p;
  case SP_PARAM:
    if (p > rc->l->nparams || n > rc->l->nparams - p) break;
    return (unsigned char *)(uintptr_t)rc->l->params + p;
  }
  fault(w, wp, lane, in, SIM_ILLEGAL_ADDRESS, "out-of-bounds %s access of "
        "%u bytes at offset 0x%llx", space_name(sp), n, (unsigned long long)p);
  return NULL;
misaligned:
  fault(w, wp, lane, in, SIM_MISALIGNED, "misaligned %s access of %u bytes "
        "at offset 0x%llx", space_name(sp), n, (unsigned long long)p);
  return NULL;
}

static inline uint64_t load(const unsigned char *h, unsigned n, int sgn) {
  switch (n) {
  case 1: { uint8_t v = *h; return sgn ? (uint64_t)(int64_t)(int8_t)v : v; }
  case 2: { uint16_t v; memcpy(&v, h, 2);
            return sgn ? (uint64_t)(int64_t)(int16_t)v : v; }
  case 4: { uint32_t v; memcpy(&v, h, 4);
            return sgn ? (uint64_t)(int64_t)(int32_t)v : v; }
  default: { uint64_t v; memcpy(&v, h, 8); return v; }
  }
}

static inline void store(unsigned char *h, unsigned n, uint64_t v) {
  switch (n) {
  case 1: *h = (uint8_t)v; break;
  case 2: { uint16_t x = (uint16_t)v; memcpy(h, &x, 2); break; }
  case 4: { uint32_t x = (uint32_t)v; memcpy(h, &x, 4); break; }
  default: memcpy(h, &v, 8);
  }
}

/* -- atomics -------------------------------------------------------------- */

static uint64_t atomic_op(const ins *in, unsigned char *h, uint64_t a,
                          uint64_t b) {
  int bits = in->tb, k = in->tk;
  if (bits == 16) { /* atom.cas.b16 */
    uint16_t *p = (uint16_t *)(void *)h, exp = (uint16_t)a;
    __atomic_compare_exchange_n(p, &exp, (uint16_t)b, 0, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    return exp;
  }
  if (bits == 32) {
    uint32_t *p = (uint32_t *)(void *)h, x = (uint32_t)a;
    switch (in->cmp) {
    case A_ADD:
      if (k != K_F) return __atomic_fetch_add(p, x, __ATOMIC_SEQ_CST);
      break;
    case A_AND: return __atomic_fetch_and(p, x, __ATOMIC_SEQ_CST);
    case A_OR: return __atomic_fetch_or(p, x, __ATOMIC_SEQ_CST);
    case A_XOR: return __atomic_fetch_xor(p, x, __ATOMIC_SEQ_CST);
    case A_EXCH: return __atomic_exchange_n(p, x, __ATOMIC_SEQ_CST);
    case A_CAS: {
      uint32_t exp = x;
      __atomic_compare_exchange_n(p, &exp, (uint32_t)b, 0, __ATOMIC_SEQ_CST,
                                  __ATOMIC_SEQ_CST);
      return exp;
    }
    default: break;
    }
    uint32_t old = __atomic_load_n(p, __ATOMIC_SEQ_CST), nw;
    do {
      switch (in->cmp) {
      case A_ADD: nw = (uint32_t)bf(f32(old) + f32(x)); break;
      case A_MIN:
        nw = k == K_F ? (uint32_t)bf(fminf(f32(old), f32(x)))
           : k == K_S ? ((int32_t)old < (int32_t)x ? old : x)
                      : (old < x ? old : x);
        break;
      case A_MAX:
        nw = k == K_F ? (uint32_t)bf(fmaxf(f32(old), f32(x)))
           : k == K_S ? ((int32_t)old > (int32_t)x ? old : x)
                      : (old > x ? old : x);
        break;
      case A_INC: nw = old >= x ? 0 : old + 1; break;
      case A_DEC: nw = old == 0 || old > x ? x : old - 1; break;
      default: nw = old;
      }
    } while (!__atomic_compare_exchange_n(p, &old, nw, 0, __ATOMIC_SEQ_CST,
                                          __ATOMIC_SEQ_CST));
    return old;
  }
  uint64_t *p = (uint64_t *)(void *)h;
  switch (in->cmp) {
  case A_ADD:
    if (k != K_F) return __atomic_fetch_add(p, a, __ATOMIC_SEQ_CST);
    break;
  case A_AND: return __atomic_fetch_and(p, a, __ATOMIC_SEQ_CST);
  case A_OR: return __atomic_fetch_or(p, a, __ATOMIC_SEQ_CST);
  case A_XOR: return __atomic_fetch_xor(p, a, __ATOMIC_SEQ_CST);
  case A_EXCH: return __atomic_exchange_n(p, a, __ATOMIC_SEQ_CST);
  case A_CAS: {
    uint64_t exp = a;
    __atomic_compare_exchange_n(p, &exp, b, 0, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    return exp;
  }
  default: break;
  }
  uint64_t old = __atomic_load_n(p, __ATOMIC_SEQ_CST), nw;
  do {
    switch (in->cmp) {
    case A_ADD: nw = bd(f64(old) + f64(a)); break;
    case A_MIN:
      nw = k == K_F ? bd(fmin(f64(old), f64(a)))
         : k == K_S ? ((int64_t)old < (int64_t)a ? old : a)
                    : (old < a ? old : a);
      break;
    case A_MAX:
      nw = k == K_F ? bd(fmax(f64(old), f64(a)))
         : k == K_S ? ((int64_t)old > (int64_t)a ? old : a)
                    : (old > a ? old : a);
      break;
    case A_INC: nw = old >= a ? 0 : old + 1; break;
    case A_DEC: nw = old == 0 || old > a ? a : old - 1; break;
    default: nw = old;
    }
  } while (!__atomic_compare_exchange_n(p, &old, nw, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST));
  return old;
}

/* -- comparisons and conversions ------------------------------------------ */

static inline int cmp_int(int c, uint64_t a, uint64_t b, int k, int bits) {
  if (k == K_S) {
    int64_t x = sx(a, bits), y = sx(b, bits);
    switch (c) {
    case C_EQ: return x == y; case C_NE: return x != y;
    case C_LT: return x < y; case C_LE: return x <= y;
    case C_GT: return x > y; case C_GE: return x >= y;
    }
  }
  uint64_t x = zx(a, bits), y = zx(b, bits);
  switch (c) {
  case C_EQ: return x == y; case C_NE: return x != y;
  case C_LT: case C_LO: return x < y; case C_LE: case C_LS: return x <= y;
  case C_GT: case C_HI: return x > y; case C_GE: case C_HS: return x >= y;
  }
  return 0;
}

static inline int cmp_float(int c, double x, double y) {
  int un = x != x || y != y;
  switch (c) {
  case C_EQ: return !un && x == y; case C_NE: return !un && x != y;
  case C_LT: return !un && x < y; case C_LE: return !un && x <= y;
  case C_GT: return !un && x > y; case C_GE: return !un && x >= y;
  case C_EQU: return un || x == y; case C_NEU: return un || x != y;
  case C_LTU: return un || x < y; case C_LEU: return un || x <= y;
  case C_GTU: return un || x > y; case C_GEU: return un || x >= y;
  case C_NUM: return !un; case C_NAN: return un;
  }
  return 0;
}

/* A float rounded to an integer of (k, bits), saturating; NaN is 0. */
static uint64_t float_to_int(double x, int k, int bits) {
  if (x != x) return 0;
  if (k == K_S) {
    double lo = -ldexp(1.0, bits - 1), hi = ldexp(1.0, bits - 1);
    if (x <= lo) return zx((uint64_t)(INT64_MIN >> (64 - bits)), bits);
    if (x >= hi) return zx((uint64_t)INT64_MAX >> (64 - bits), bits);
    return zx((uint64_t)(int64_t)x, bits);
  }
  if (x <= 0) return 0;
  if (x >= ldexp(1.0, bits)) return zx(~0ull, bits);
  return (uint64_t)x;
}

static uint64_t cvt(const ins *in, uint64_t v) {
  int dk = in->tk, db = in->tb, sk = in->t2k, sb = in->t2b;
  int dfl = dk == K_F || dk == K_BF, sfl = sk == K_F || sk == K_BF;
  if (!dfl && !sfl) { /* integer to integer */
    int64_t x = sk == K_S ? sx(v, sb) : (int64_t)zx(v, sb);
    if (in->flags & F_SAT) {
      if (dk == K_S) {
        int64_t lo = INT64_MIN >> (64 - db), hi = INT64_MAX >> (64 - db);
        if (sk != K_S && (uint64_t)x > (uint64_t)hi) x = hi;
        else if (sk == K_S && x < lo) x = lo;
        else if (sk == K_S && x > hi) x = hi;
      } else {
        uint64_t hi = zx(~0ull, db);
        if (sk == K_S && x < 0) x = 0;
        else if ((uint64_t)x > hi) x = (int64_t)hi;
      }
    }
    return zx((uint64_t)x, db);
  }
  double x; /* the source value, exactly */
  if (!sfl) {
    x = 0;
  } else if (sk == K_BF) {
    x = bf16_to_f32((uint16_t)v);
  } else if (sb == 16) {
    x = half_to_f32((uint16_t)v);
  } else if (sb == 32) {
    float f = f32(v);
    if (in->flags & F_FTZ) f = ftz(f);
    x = f;
  } else {
    x = f64(v);
  }
  if (!dfl) /* float to integer */
    return float_to_int(round_int(x, in->rnd), dk, db);
  if (!sfl) { /* integer to float */
    int mode = fe_mode(in->rnd), old = fegetround();
    if (mode != old) fesetround(mode);
    uint64_t r;
    if (sk == K_S) {
      int64_t i = sx(v, sb);
      r = db == 64 ? bd((double)i) : db == 32 ? bf((float)i)
        : dk == K_BF ? f32_to_bf16((float)i) : f32_to_half((float)i);
    } else {
      uint64_t i = zx(v, sb);
      r = db == 64 ? bd((double)i) : db == 32 ? bf((float)i)
        : dk == K_BF ? f32_to_bf16((float)i) : f32_to_half((float)i);
    }
    if (mode != old) fesetround(old);
    return r;
  }
  /* float to float */
  if (in->rnd >= R_NI) x = round_int(x, in->rnd);
  if (in->flags & F_SAT) x = x != x ? 0 : x < 0 ? 0 : x > 1 ? 1 : x;
  if (db == 64) return bd(x);
  if (db == 32) {
    int mode = fe_mode(in->rnd >= R_NI ? R_N : in->rnd), old = fegetround();
    if (mode != old) fesetround(mode);
    volatile double vx = x;
    float f = (float)vx;
    if (mode != old) fesetround(old);
    if (in->flags & F_FTZ) f = ftz(f);
    return bf(f);
  }
  return dk == K_BF ? f32_to_bf16((float)x) : f32_to_half((float)x);
}

/* -- the interpreter ------------------------------------------------------ */

#define R(s) (wp->r + (size_t)(s) * 32)

#define LOOP(...)                                                           \
  do {                                                                      \
    if (em == ALL) {                                                        \
      for (int l = 0; l < 32; l++) { __VA_ARGS__; }                              \
    } else {                                                                \
      for (uint32_t m_ = em; m_; m_ &= m_ - 1) {                            \
        int l = __builtin_ctz(m_);                                          \
        __VA_ARGS__;                                                        \
      }                                                                     \
    }                                                                       \
  } while (0)

/* f32 operations with x, y, z the operands (flushed under .ftz). */
#define F32OP(...)                                                          \
  do {                                                                      \
    if (in->flags & F_FTZ)                                                  \
      LOOP(float x = ftz(f32(A[l])); float y = ftz(f32(B[l]));              \
           float z = ftz(f32(C[l])); (void)y; (void)z;                      \
           D[l] = bf(ftz(__VA_ARGS__)));                                           \
    else                                                                    \
      LOOP(float x = f32(A[l]); float y = f32(B[l]); float z = f32(C[l]);   \
           (void)y; (void)z; D[l] = bf(__VA_ARGS__));                              \
  } while (0)
#define F64OP(...)                                                          \
  LOOP(double x = f64(A[l]); double y = f64(B[l]); double z = f64(C[l]);    \
       (void)y; (void)z; D[l] = bd(__VA_ARGS__))

/* Set bits of a lane mask (no popcnt instruction assumed). */
static inline unsigned lanes(uint32_t x) {
  if (x == ALL) return 32;
  x -= x >> 1 & 0x55555555u;
  x = (x & 0x33333333u) + (x >> 2 & 0x33333333u);
  return (((x + (x >> 4)) & 0x0f0f0f0fu) * 0x01010101u) >> 24;
}

static inline float sat32(float x) { return x != x ? 0 : x < 0 ? 0 : x > 1 ? 1 : x; }

/* Moves lanes of the group aside and picks the next group: the runnable
   lanes (not waiting at a barrier) at the lowest PC. */
static void schedule(frame *f, uint32_t wait) {
  for (uint32_t m = f->mask; m; m &= m - 1) f->pcs[__builtin_ctz(m)] = f->pc;
  uint32_t run = f->live & ~wait;
  int min = INT_MAX;
  for (uint32_t m = run; m; m &= m - 1) {
    int pc = f->pcs[__builtin_ctz(m)];
    if (pc < min) min = pc;
  }
  uint32_t mask = 0;
  int other = INT_MAX;
  for (uint32_t m = run; m; m &= m - 1) {
    int l = __builtin_ctz(m), pc = f->pcs[l];
    if (pc == min) mask |= 1u << l;
    else if (pc < other) other = pc;
  }
  f->mask = mask;
  f->pc = min;
  f->other = other;
}

enum { RUN_DONE, RUN_BLOCKED, RUN_FAULT };

static int run(worker *w, warp *wp, frame *f, int depth);

static void cond_call(worker *w, warp *wp, int lane, const ins *in) {
  run_ctx *rc = w->rc;
  const unsigned char *pf = wp->pf + (size_t)lane * rc->m->pframe;
  uint64_t h;
  uint32_t v;
  memcpy(&h, pf + in->a, 8);
  memcpy(&v, pf + in->b, 4);
  pthread_mutex_lock(&rc->mu);
  int bad = !rc->l->cond || rc->l->cond(rc->l->ud, h, v);
  pthread_mutex_unlock(&rc->mu);
  if (bad)
    fault(w, wp, lane, in, SIM_LAUNCH_FAILED, "cudaGraphSetConditional of "
          "handle 0x%llx, not one of the running graph's", (unsigned long long)h);
}

/* Runs the group of frame f until every lane of f has left it (RUN_DONE),
   or, at depth 0, every lane left waits at a barrier (RUN_BLOCKED). */
static int run(worker *w, warp *wp, frame *f, int depth) {
  const sim_module *m = w->rc->m;
  const ins *code = m->code;
  uint64_t executed = 0;
  int result = RUN_DONE;
  for (;;) {
    if (f->pc >= f->other || !f->mask) {
      f->live &= ~wp->exited;
      f->mask &= ~wp->exited;
      schedule(f, depth ? 0 : wp->wait);
      if (!f->mask) {
        result = f->live ? RUN_BLOCKED : RUN_DONE;
        break;
      }
    }
    const ins *in = &code[f->pc];
    uint32_t em = f->mask;
    if (in->guard >= 0) em &= in->gneg ? ~wp->p[in->guard] : wp->p[in->guard];
    executed += lanes(f->mask);
    uint64_t *D = in->d[0] >= 0 ? R(in->d[0]) : NULL;
    const uint64_t *A = in->a >= 0 ? R(in->a) : NULL;
    const uint64_t *B = in->b >= 0 ? R(in->b) : NULL;
    const uint64_t *C = in->c >= 0 ? R(in->c) : A;
    if (!B) B = A;
    int k = in->tk, bits = in->tb;
    int isf = k == K_F, isf32 = isf && bits == 32;
    int dir = isf && (in->rnd == R_Z || in->rnd == R_M || in->rnd == R_P);
    if (dir) fesetround(fe_mode(in->rnd));
    switch (in->op) {
    case OP_NOP:
      break;
    case OP_MOV:
      if (k == K_PRED) {
        uint32_t v = in->a == -2 ? 0 : in->a == -3 ? ALL
                   : in->bop ? ~wp->p[in->a] : wp->p[in->a];
        wp->p[in->d[0]] = (wp->p[in->d[0]] & ~em) | (v & em);
      } else {
        LOOP(D[l] = A[l]);
      }
      break;
    case OP_PACK: {
      const uint64_t *S[4] = {A, R(in->b), in->c >= 0 ? R(in->c) : A,
                              in->e >= 0 ? R(in->e) : A};
      int eb = bits / in->vec;
      LOOP(uint64_t v = 0;
           for (int i = in->vec; i-- > 0; ) v = v << eb | zx(S[i][l], eb);
           D[l] = v);
      break;
    }
    case OP_UNPACK: {
      int eb = bits / in->vec;
      for (int i = 0; i < in->vec; i++) {
        uint64_t *E = R(in->d[i]);
        LOOP(E[l] = zx(A[l] >> (eb * i), eb));
      }
      break;
    }
    case OP_ADD:
      if (isf32) F32OP(x + y);
      else if (isf) F64OP(x + y);
      else if ((in->flags & F_SAT) && k == K_S)
        LOOP(int64_t v = sx(A[l], 32) + sx(B[l], 32);
             D[l] = zx((uint64_t)(v > INT32_MAX ? INT32_MAX
                                  : v < INT32_MIN ? INT32_MIN : v), 32));
      else LOOP(D[l] = zx(A[l] + B[l], bits));
      break;
    case OP_SUB:
      if (isf32) F32OP(x - y);
      else if (isf) F64OP(x - y);
      else if ((in->flags & F_SAT) && k == K_S)
        LOOP(int64_t v = sx(A[l], 32) - sx(B[l], 32);
             D[l] = zx((uint64_t)(v > INT32_MAX ? INT32_MAX
                                  : v < INT32_MIN ? INT32_MIN : v), 32));
      else LOOP(D[l] = zx(A[l] - B[l], bits));
      break;
    case OP_MUL: case OP_MAD: {
      int mad = in->op == OP_MAD;
      if (isf32) {
        if (mad) F32OP(fmaf(x, y, z));
        else F32OP(x * y);
      } else if (isf) {
        if (mad) F64OP(fma(x, y, z));
        else F64OP(x * y);
      } else if (in->flags & F_WIDE) {
        if (k == K_S)
          LOOP(D[l] = zx((uint64_t)(sx(A[l], bits) * sx(B[l], bits))
                         + (mad ? C[l] : 0), 2 * bits));
        else
          LOOP(D[l] = zx(zx(A[l], bits) * zx(B[l], bits)
                         + (mad ? C[l] : 0), 2 * bits));
      } else if (in->flags & F_HI) {
        if (bits == 64 && k == K_S)
          LOOP(s128 p = (s128)(int64_t)A[l] * (int64_t)B[l];
               D[l] = (uint64_t)(p >> 64) + (mad ? C[l] : 0));
        else if (bits == 64)
          LOOP(u128 p = (u128)A[l] * B[l];
               D[l] = (uint64_t)(p >> 64) + (mad ? C[l] : 0));
        else if (k == K_S)
          LOOP(D[l] = zx((uint64_t)((sx(A[l], bits) * sx(B[l], bits)) >> bits)
                         + (mad ? C[l] : 0), bits));
        else
          LOOP(D[l] = zx(((zx(A[l], bits) * zx(B[l], bits)) >> bits)
                         + (mad ? C[l] : 0), bits));
      } else {
        LOOP(D[l] = zx(A[l] * B[l] + (mad ? C[l] : 0), bits));
      }
      break;
    }
    case OP_MUL24: case OP_MAD24:
      if (k == K_S)
        LOOP(D[l] = zx((uint64_t)(sx(A[l], 24) * sx(B[l], 24))
                       + (in->op == OP_MAD24 ? C[l] : 0), 32));
      else
        LOOP(D[l] = zx(zx(A[l], 24) * zx(B[l], 24)
                       + (in->op == OP_MAD24 ? C[l] : 0), 32));
      break;
    case OP_SAD:
      if (k == K_S)
        LOOP(int64_t x = sx(A[l], bits), y = sx(B[l], bits);
             D[l] = zx((uint64_t)(x > y ? x - y : y - x) + C[l], bits));
      else
        LOOP(uint64_t x = zx(A[l], bits), y = zx(B[l], bits);
             D[l] = zx((x > y ? x - y : y - x) + C[l], bits));
      break;
    case OP_FMA:
      if (isf32) F32OP(fmaf(x, y, z));
      else F64OP(fma(x, y, z));
      break;
    case OP_DIV:
      if (isf32) F32OP(x / y);
      else if (isf) F64OP(x / y);
      else if (k == K_S)
        LOOP(int64_t x = sx(A[l], bits), y = sx(B[l], bits);
             D[l] = zx(y == 0 ? ~0ull : (bits == 64 && y == -1)
                                          ? (uint64_t)0 - (uint64_t)x
                                          : (uint64_t)(x / y), bits));
      else
        LOOP(uint64_t x = zx(A[l], bits), y = zx(B[l], bits);
             D[l] = zx(y ? x / y : ~0ull, bits));
      break;
    case OP_REM:
      if (k == K_S)
        LOOP(int64_t x = sx(A[l], bits), y = sx(B[l], bits);
             D[l] = zx(y == 0 || y == -1 ? (y ? 0 : (uint64_t)x)
                                         : (uint64_t)(x % y), bits));
      else
        LOOP(uint64_t x = zx(A[l], bits), y = zx(B[l], bits);
             D[l] = zx(y ? x % y : x, bits));
      break;
    case OP_ABS:
      if (isf32) F32OP(fabsf(x));
      else if (isf) F64OP(fabs(x));
      else LOOP(int64_t x = sx(A[l], bits);
                D[l] = zx((uint64_t)(x < 0 ? -(uint64_t)x : (uint64_t)x), bits));
      break;
    case OP_NEG:
      if (isf32) F32OP(-x);
      else if (isf) F64OP(-x);
      else LOOP(D[l] = zx(0 - A[l], bits));
      break;
    case OP_MIN: case OP_MAX: {
      int mx = in->op == OP_MAX;
      if (isf32) {
        if (mx) F32OP(fmaxf(x, y));
        else F32OP(fminf(x, y));
      } else if (isf) {
        if (mx) F64OP(fmax(x, y));
        else F64OP(fmin(x, y));
      } else if (k == K_S) {
        LOOP(int64_t x = sx(A[l], bits), y = sx(B[l], bits);
             D[l] = zx((uint64_t)(mx ? (x > y ? x : y) : (x < y ? x : y)), bits));
      } else {
        LOOP(uint64_t x = zx(A[l], bits), y = zx(B[l], bits);
             D[l] = mx ? (x > y ? x : y) : (x < y ? x : y));
      }
      break;
    }
    case OP_AND: case OP_OR: case OP_XOR:
      if (k == K_PRED) {
        uint32_t x = wp->p[in->a], y = wp->p[in->b], v;
        if (in->bop & 1) x = ~x;
        if (in->bop & 2) y = ~y;
        v = in->op == OP_AND ? x & y : in->op == OP_OR ? x | y : x ^ y;
        wp->p[in->d[0]] = (wp->p[in->d[0]] & ~em) | (v & em);
      } else if (in->op == OP_AND) {
        LOOP(D[l] = A[l] & B[l]);
      } else if (in->op == OP_OR) {
        LOOP(D[l] = A[l] | B[l]);
      } else {
        LOOP(D[l] = A[l] ^ B[l]);
      }
      break;
    case OP_NOT:
      if (k == K_PRED) {
        uint32_t v = ~wp->p[in->a];
        wp->p[in->d[0]] = (wp->p[in->d[0]] & ~em) | (v & em);
      } else {
        LOOP(D[l] = zx(~A[l], bits));
      }
      break;
    case OP_CNOT:
      LOOP(D[l] = zx(A[l], bits) == 0);
      break;
    case OP_SHL:
      LOOP(uint32_t s = (uint32_t)B[l];
           D[l] = s >= (unsigned)bits ? 0 : zx(A[l] << s, bits));
      break;
    case OP_SHR:
      if (k == K_S)
        LOOP(uint32_t s = (uint32_t)B[l];
             D[l] = zx((uint64_t)(sx(A[l], bits)
                                  >> (s >= (unsigned)bits ? bits - 1 : (int)s)), bits));
      else
        LOOP(uint32_t s = (uint32_t)B[l];
             D[l] = s >= (unsigned)bits ? 0 : zx(A[l], bits) >> s);
      break;
    case OP_SHF: {
      int left = in->cmp == 0, wrap = in->bop;
      LOOP(uint32_t n = (uint32_t)C[l];
           n = wrap ? n & 31 : (n > 32 ? 32 : n);
           uint64_t v = (uint64_t)(uint32_t)B[l] << 32 | (uint32_t)A[l];
           D[l] = left ? (uint32_t)((v << n) >> 32) : (uint32_t)(v >> n));
      break;
    }
    case OP_BFE:
      LOOP(uint32_t pos = (uint32_t)B[l] & 0xff, len = (uint32_t)C[l] & 0xff;
           uint64_t x = zx(A[l], bits), v;
           if (len == 0) { v = 0; }
           else {
             if (pos > (unsigned)bits) pos = (unsigned)bits;
             v = pos >= (unsigned)bits ? 0 : x >> pos;
             if (len < 64) v &= (1ull << len) - 1;
             if (k == K_S) {
               unsigned top = pos + len - 1 >= (unsigned)bits ? (unsigned)bits - 1
                                                              : pos + len - 1;
               int sgn = (int)(x >> top & 1);
               if (sgn && len < 64) v |= ~0ull << len;
             }
           }
           D[l] = zx(v, bits));
      break;
    case OP_BFI: {
      const uint64_t *E = R(in->e);
      LOOP(uint32_t pos = (uint32_t)C[l] & 0xff, len = (uint32_t)E[l] & 0xff;
           uint64_t v = zx(B[l], bits);
           if (len && pos < (unsigned)bits) {
             uint64_t msk = (len >= 64 ? ~0ull : (1ull << len) - 1) << pos;
             v = (v & ~msk) | ((A[l] << pos) & msk);
           }
           D[l] = zx(v, bits));
      break;
    }
    case OP_BREV:
      LOOP(uint64_t x = A[l], v = 0;
           for (int i = 0; i < bits; i++) v |= (x >> i & 1) << (bits - 1 - i);
           D[l] = v);
      break;
    case OP_POPC:
      LOOP(D[l] = (unsigned)__builtin_popcountll(zx(A[l], bits)));
      break;
    case OP_CLZ:
      LOOP(uint64_t x = zx(A[l], bits);
           D[l] = x ? (unsigned)(__builtin_clzll(x) - (64 - bits)) : (unsigned)bits);
      break;
    case OP_BFIND:
      LOOP(uint64_t x = zx(A[l], bits);
           if (k == K_S && sx(x, bits) < 0) x = zx(~x, bits);
           unsigned pos = x ? (unsigned)(63 - __builtin_clzll(x)) : 0;
           D[l] = !x ? 0xffffffffu
                : (in->flags & F_SHIFTAMT) ? (unsigned)bits - 1 - pos : pos);
      break;
    case OP_PRMT:
      LOOP(uint64_t v = (uint64_t)(uint32_t)B[l] << 32 | (uint32_t)A[l];
           uint32_t s = (uint32_t)C[l], r = 0;
           for (int i = 0; i < 4; i++) {
             unsigned sel = s >> (4 * i) & 0xf;
             uint32_t byte = (uint32_t)(v >> (8 * (sel & 7))) & 0xff;
             if (sel & 8) byte = byte & 0x80 ? 0xff : 0;
             r |= byte << (8 * i);
           }
           D[l] = r);
      break;
    case OP_LOP3: {
      const uint64_t *E = R(in->e);
      LOOP(uint32_t a = (uint32_t)A[l], b = (uint32_t)B[l], c = (uint32_t)C[l];
           uint32_t lut = (uint32_t)E[l], r = 0;
           for (int i = 0; i < 8; i++)
             if (lut >> i & 1)
               r |= (i & 4 ? a : ~a) & (i & 2 ? b : ~b) & (i & 1 ? c : ~c);
           D[l] = r);
      break;
    }
    case OP_SETP: {
      uint32_t v = 0;
      if (isf32 && (in->flags & F_FTZ))
        LOOP(v |= (uint32_t)cmp_float(in->cmp, ftz(f32(A[l])), ftz(f32(B[l]))) << l);
      else if (isf32)
        LOOP(v |= (uint32_t)cmp_float(in->cmp, f32(A[l]), f32(B[l])) << l);
      else if (isf && bits == 64)
        LOOP(v |= (uint32_t)cmp_float(in->cmp, f64(A[l]), f64(B[l])) << l);
      else if (isf)
        LOOP(v |= (uint32_t)cmp_float(in->cmp, half_to_f32((uint16_t)A[l]),
                                      half_to_f32((uint16_t)B[l])) << l);
      else
        LOOP(v |= (uint32_t)cmp_int(in->cmp, A[l], B[l], k, bits) << l);
      uint32_t q = ~v;
      if (in->bop) {
        uint32_t c = in->e ? ~wp->p[in->c] : wp->p[in->c];
        switch (in->bop) {
        case B_AND: v &= c, q &= c; break;
        case B_OR: v |= c, q |= c; break;
        default: v ^= c, q ^= c;
        }
      }
      wp->p[in->d[0]] = (wp->p[in->d[0]] & ~em) | (v & em);
      if (in->d[1] >= 0)
        wp->p[in->d[1]] = (wp->p[in->d[1]] & ~em) | (q & em);
      break;
    }
    case OP_SELP: {
      uint32_t c = in->e ? ~wp->p[in->c] : wp->p[in->c];
      LOOP(D[l] = (c >> l & 1) ? A[l] : B[l]);
      break;
    }
    case OP_SLCT:
      if (in->t2k == K_F)
        LOOP(float c = f32(C[l]); if (in->flags & F_FTZ) c = ftz(c);
             D[l] = c >= 0.0f ? A[l] : B[l]);
      else
        LOOP(D[l] = sx(C[l], 32) >= 0 ? A[l] : B[l]);
      break;
    case OP_TESTP: {
      uint32_t v = 0;
      LOOP(double x = bits == 32 ? f32(A[l]) : f64(A[l]);
           int c = bits == 32 ? fpclassify(f32(A[l])) : fpclassify(x);
           int r = in->cmp == 0 ? isfinite(x) : in->cmp == 1 ? isinf(x) != 0
                 : in->cmp == 2 ? x == x : in->cmp == 3 ? x != x
                 : in->cmp == 4 ? c == FP_NORMAL : c == FP_SUBNORMAL;
           v |= (uint32_t)(r != 0) << l);
      wp->p[in->d[0]] = (wp->p[in->d[0]] & ~em) | (v & em);
      break;
    }
    case OP_CVT:
      if (k == K_S && in->t2k == K_S && bits == 64 && in->t2b == 32)
        LOOP(D[l] = (uint64_t)(int64_t)(int32_t)A[l]);
      else if ((k == K_U || k == K_B) && bits == 64 && in->t2b == 32
               && (in->t2k == K_U || in->t2k == K_B))
        LOOP(D[l] = (uint32_t)A[l]);
      else
        LOOP(D[l] = cvt(in, A[l]));
      break;
    case OP_CVTA: {
      uint64_t tag = in->space == SP_SHARED ? GEN_SHARED
                   : in->space == SP_LOCAL ? GEN_LOCAL : 0;
      if (in->flags & F_TO) LOOP(D[l] = tag ? A[l] & GEN_OFFSET : A[l]);
      else LOOP(D[l] = A[l] + tag);
      break;
    }
    case OP_ISSPACEP: {
      uint32_t v = 0;
      LOOP(uint64_t a = A[l];
           int r = in->space == SP_SHARED ? a >= GEN_SHARED
                 : in->space == SP_LOCAL ? a >= GEN_LOCAL && a < GEN_SHARED
                 : a < GEN_LOCAL;
           v |= (uint32_t)r << l);
      wp->p[in->d[0]] = (wp->p[in->d[0]] & ~em) | (v & em);
      break;
    }
    case OP_LD: {
      unsigned n = bits / 8;
      int sgn = k == K_S, sp = in->space;
      const uint64_t *Bs = in->base >= 0 ? R(in->base) : NULL;
      if (sp == SP_PARAM && !Bs) { /* a kernel parameter: one value */
        const unsigned char *h = addr_of(w, wp, 0, in, sp, (uint64_t)in->off,
                                         n * in->vec);
        if (!h) goto fault;
        for (int i = 0; i < in->vec; i++) {
          uint64_t v = load(h + i * n, n, sgn), *E = R(in->d[i]);
          LOOP(E[l] = v);
        }
        break;
      }
      if (sp == SP_GLOBAL && in->vec == 1) {
        uint64_t off = (uint64_t)in->off;
        LOOP(const unsigned char *h = global_at(w, wp, l, in, Bs[l] + off, n);
             if (!h) goto fault;
             D[l] = load(h, n, sgn));
        break;
      }
      if (sp == SP_SHARED && in->vec == 1) {
        uint64_t off = (uint64_t)in->off, top = w->rc->nshared;
        LOOP(uint64_t a = Bs[l] + off;
             if (a >= top || top - a < n || (a & (n - 1))) {
               addr_of(w, wp, l, in, sp, a, n); /* the fault */
               goto fault;
             }
             D[l] = load(w->shared + a, n, sgn));
        break;
      }
      LOOP(uint64_t a = (Bs ? Bs[l] : 0) + (uint64_t)in->off;
           const unsigned char *h = addr_of(w, wp, l, in, sp, a, n * in->vec);
           if (!h) goto fault;
           for (int i = 0; i < in->vec; i++)
             R(in->d[i])[l] = load(h + i * n, n, sgn));
      break;
    }
    case OP_ST: {
      unsigned n = bits / 8;
      int sp = in->space;
      const uint64_t *Bs = in->base >= 0 ? R(in->base) : NULL;
      if (sp == SP_GLOBAL && in->vec == 1) {
        uint64_t off = (uint64_t)in->off;
        const uint64_t *V = R(in->d[0]);
        LOOP(unsigned char *h = global_at(w, wp, l, in, Bs[l] + off, n);
             if (!h) goto fault;
             store(h, n, V[l]));
        break;
      }
      if (sp == SP_SHARED && in->vec == 1) {
        uint64_t off = (uint64_t)in->off, top = w->rc->nshared;
        const uint64_t *V = R(in->d[0]);
        LOOP(uint64_t a = Bs[l] + off;
             if (a >= top || top - a < n || (a & (n - 1))) {
               addr_of(w, wp, l, in, sp, a, n); /* the fault */
               goto fault;
             }
             store(w->shared + a, n, V[l]));
        break;
      }
      if (sp == SP_PARAM) {
        fault(w, wp, 0, in, SIM_ILLEGAL_ADDRESS, "store to a kernel parameter");
        goto fault;
      }
      LOOP(uint64_t a = (Bs ? Bs[l] : 0) + (uint64_t)in->off;
           unsigned char *h = addr_of(w, wp, l, in, sp, a, n * in->vec);
           if (!h) goto fault;
           for (int i = 0; i < in->vec; i++)
             store(h + i * n, n, R(in->d[i])[l]));
      break;
    }
    case OP_ATOM: {
      unsigned n = bits / 8;
      const uint64_t *Bs = R(in->base);
      LOOP(uint64_t a = Bs[l] + (uint64_t)in->off;
           unsigned char *h = addr_of(w, wp, l, in, in->space, a, n);
           if (!h) goto fault;
           D[l] = atomic_op(in, h, A[l], B[l]));
      break;
    }
    case OP_REDUX: {
      uint64_t acc = 0;
      int first = 1;
      LOOP(uint64_t x = zx(A[l], 32);
           if (first) acc = x, first = 0;
           else switch (in->cmp) {
             case A_ADD: acc = zx(acc + x, 32); break;
             case A_AND: acc &= x; break;
             case A_OR: acc |= x; break;
             case A_XOR: acc ^= x; break;
             case A_MIN: acc = k == K_S ? (sx(x, 32) < sx(acc, 32) ? x : acc)
                                        : (x < acc ? x : acc); break;
             case A_MAX: acc = k == K_S ? (sx(x, 32) > sx(acc, 32) ? x : acc)
                                        : (x > acc ? x : acc); break;
             default: break;
           });
      LOOP(D[l] = acc);
      break;
    }
    case OP_EX2:
      if (isf32) F32OP(exp2f(x));
      else F64OP(exp2(x));
      break;
    case OP_LG2:
      if (isf32) F32OP(log2f(x));
      else F64OP(log2(x));
      break;
    case OP_RCP:
      if (isf32) F32OP(1.0f / x);
      else F64OP(1.0 / x);
      break;
    case OP_RSQRT:
      if (isf32) F32OP(1.0f / sqrtf(x));
      else F64OP(1.0 / sqrt(x));
      break;
    case OP_SQRT:
      if (isf32) F32OP(sqrtf(x));
      else F64OP(sqrt(x));
      break;
    case OP_SIN: F32OP(sinf(x)); break;
    case OP_COS: F32OP(cosf(x)); break;
    case OP_TANH: F32OP(tanhf(x)); break;
    case OP_COPYSIGN:
      if (isf32) F32OP(copysignf(y, x));
      else F64OP(copysign(y, x));
      break;
    case OP_SHFL: {
      uint64_t v[32];
      uint32_t ok = 0, member = 0;
      LOOP(member = (uint32_t)R(in->e)[l]; (void)member;
           uint32_t lane = (uint32_t)l, bv = (uint32_t)B[l] & 31;
           uint32_t cv = (uint32_t)C[l], seg = cv >> 8 & 31, cl = cv & 31;
           uint32_t maxl = (lane & seg) | (cl & ~seg), minl = lane & seg;
           int64_t j;
           int p;
           switch (in->cmp) {
           case SH_UP: j = (int64_t)lane - bv; p = j >= (int64_t)maxl; break;
           case SH_DOWN: j = lane + bv; p = j <= (int64_t)maxl; break;
           case SH_BFLY: j = lane ^ bv; p = j <= (int64_t)maxl; break;
           default: j = minl | (bv & ~seg); p = j <= (int64_t)maxl;
           }
           if (!p) j = lane;
           v[l] = (uint32_t)A[j];
           ok |= (uint32_t)p << l);
      LOOP(D[l] = v[l]);
      if (in->d[1] >= 0) wp->p[in->d[1]] = (wp->p[in->d[1]] & ~em) | (ok & em);
      break;
    }
    case OP_VOTE: {
      uint32_t pv = in->bop ? ~wp->p[in->a] : wp->p[in->a];
      uint32_t member = em ? (uint32_t)B[__builtin_ctz(em)] : 0;
      uint32_t grp = em & member, t = pv & grp;
      if (in->cmp == V_BALLOT) {
        LOOP(D[l] = t);
      } else {
        int r = in->cmp == V_ALL ? t == grp : in->cmp == V_ANY ? t != 0
              : (t == 0 || t == grp);
        wp->p[in->d[0]] = (wp->p[in->d[0]] & ~em) | (r ? em : 0);
      }
      break;
    }
    case OP_MATCH: {
      uint64_t v[32];
      uint32_t eqall = 1;
      int first = -1;
      LOOP(v[l] = zx(A[l], bits);
           if (first < 0) first = l;
           else if (v[l] != v[first]) eqall = 0);
      LOOP(uint32_t r = 0;
           if (in->cmp == 0) {
             for (uint32_t q = em; q; q &= q - 1)
               if (v[__builtin_ctz(q)] == v[l]) r |= 1u << __builtin_ctz(q);
           } else {
             r = eqall ? em : 0;
           }
           D[l] = r);
      if (in->d[1] >= 0)
        wp->p[in->d[1]] = (wp->p[in->d[1]] & ~em) | (eqall ? em : 0);
      break;
    }
    case OP_ACTIVEMASK: {
      uint32_t am = f->mask;
      LOOP(D[l] = am);
      break;
    }
    case OP_SETCOND:
      LOOP(cond_call(w, wp, l, in); if (w->fault) goto fault);
      break;
    case OP_TRAP:
      if (em) {
        fault(w, wp, __builtin_ctz(em), in, SIM_LAUNCH_FAILED, "trap");
        goto fault;
      }
      break;
    case OP_BAR:
      if (depth) break; /* refused at load */
      wp->wait |= em;
      f->pc++;
      if (em == f->mask) {
        f->mask = 0; /* schedule afresh */
        for (uint32_t q = em; q; q &= q - 1) f->pcs[__builtin_ctz(q)] = f->pc;
      } else {
        /* the guarded-off lanes go on; the waiting ones step aside */
        for (uint32_t q = em; q; q &= q - 1) f->pcs[__builtin_ctz(q)] = f->pc;
        f->mask &= ~em;
      }
      continue;
    case OP_BRA:
      if (em == f->mask) {
        f->pc = in->target;
      } else if (!em) {
        f->pc++;
      } else {
        for (uint32_t q = em; q; q &= q - 1) f->pcs[__builtin_ctz(q)] = in->target;
        for (uint32_t q = f->mask & ~em; q; q &= q - 1)
          f->pcs[__builtin_ctz(q)] = f->pc + 1;
        f->mask = 0;
      }
      if (dir) fesetround(FE_TONEAREST);
      continue;
    case OP_EXIT:
      wp->exited |= em;
      f->live &= ~em;
      f->mask &= ~em;
      f->pc++;
      continue;
    case OP_RET:
      if (!depth) {
        wp->exited |= em;
      }
      f->live &= ~em;
      f->mask &= ~em;
      f->pc++;
      continue;
    case OP_CALL: {
      if (!em) break;
      const func *g = m->funcs[in->fn];
      size_t pfs = m->pframe;
      for (int i = 0; i < in->vec; i++)
        LOOP(unsigned char *pf = wp->pf + (size_t)l * pfs;
             memmove(pf + g->in[i].off, pf + in->d[i], (size_t)g->in[i].size));
      frame sub;
      sub.pc = g->start;
      sub.other = INT_MAX;
      sub.live = sub.mask = em;
      w->executed += executed;
      executed = 0;
      int r = run(w, wp, &sub, depth + 1);
      if (r == RUN_FAULT) return RUN_FAULT;
      em &= ~wp->exited;
      if (in->nd)
        LOOP(unsigned char *pf = wp->pf + (size_t)l * pfs;
             memmove(pf + in->a, pf + g->out[0].off, (size_t)g->out[0].size));
      f->live &= ~wp->exited;
      f->mask &= ~wp->exited;
      break;
    }
    default:
      fault(w, wp, 0, in, SIM_ILLEGAL_INSTRUCTION, "instruction not run");
      goto fault;
    }
    if (dir) fesetround(FE_TONEAREST);
    if ((in->flags & F_SAT) && isf32 && in->op != OP_CVT) /* .sat: [0, 1] */
      LOOP(D[l] = bf(sat32(f32(D[l]))));
    f->pc++;
    continue;
  fault:
    if (dir) fesetround(FE_TONEAREST);
    w->executed += executed;
    return RUN_FAULT;
  }
  w->executed += executed;
  return result;
}

/* -- blocks and launches -------------------------------------------------- */

static void start_warp(worker *w, warp *wp, unsigned index) {
  run_ctx *rc = w->rc;
  const sim_launch *l = rc->l;
  const sim_module *m = rc->m;
  unsigned nt = l->block[0] * l->block[1] * l->block[2];
  for (int i = 0; i < m->nconst; i++) {
    uint64_t *s = wp->r + (size_t)(m->const_base + i) * 32, v = m->consts[i];
    for (int j = 0; j < 32; j++) s[j] = v;
  }
  uint32_t live = 0;
  for (int j = 0; j < 32; j++) {
    unsigned t = index * 32 + (unsigned)j;
    if (t < nt) live |= 1u << j;
    uint64_t *r = wp->r;
    r[S_TID_X * 32 + j] = t % l->block[0];
    r[S_TID_Y * 32 + j] = t / l->block[0] % l->block[1];
    r[S_TID_Z * 32 + j] = t / (l->block[0] * l->block[1]);
    r[S_NTID_X * 32 + j] = l->block[0];
    r[S_NTID_Y * 32 + j] = l->block[1];
    r[S_NTID_Z * 32 + j] = l->block[2];
    r[S_CTAID_X * 32 + j] = w->bid[0];
    r[S_CTAID_Y * 32 + j] = w->bid[1];
    r[S_CTAID_Z * 32 + j] = w->bid[2];
    r[S_NCTAID_X * 32 + j] = l->grid[0];
    r[S_NCTAID_Y * 32 + j] = l->grid[1];
    r[S_NCTAID_Z * 32 + j] = l->grid[2];
    r[S_LANEID * 32 + j] = (unsigned)j;
    r[S_WARPID * 32 + j] = index;
    r[S_NWARPID * 32 + j] = 64;
    r[S_SMID * 32 + j] = 0;
    r[S_NSMID * 32 + j] = 132;
    r[S_GRIDID * 32 + j] = 1;
    r[S_LANEMASK_EQ * 32 + j] = 1u << j;
    r[S_LANEMASK_LE * 32 + j] = (uint32_t)((2ull << j) - 1);
    r[S_LANEMASK_LT * 32 + j] = (1u << j) - 1;
    r[S_LANEMASK_GE * 32 + j] = ~((1u << j) - 1);
    r[S_LANEMASK_GT * 32 + j] = (uint32_t)~((2ull << j) - 1);
    r[S_CLOCK * 32 + j] = (uint32_t)w->executed;
    r[S_CLOCK64 * 32 + j] = w->executed;
    r[S_GLOBALTIMER * 32 + j] = 0;
    r[S_DYN_SMEM * 32 + j] = l->dynamic_shared;
    r[S_TOTAL_SMEM * 32 + j] = rc->nshared;
    r[S_ZERO * 32 + j] = 0;
  }
  wp->index = (int)index;
  wp->wait = 0;
  wp->exited = ~live;
  wp->done = !live;
  wp->top.pc = rc->k->start;
  wp->top.other = INT_MAX;
  wp->top.live = wp->top.mask = live;
}

static int run_block(worker *w) {
  for (unsigned i = 0; i < w->nwarps; i++) start_warp(w, &w->warps[i], i);
  for (;;) {
    int waiting = 0;
    for (unsigned i = 0; i < w->nwarps; i++) {
      warp *wp = &w->warps[i];
      if (wp->done) continue;
      int r = run(w, wp, &wp->top, 0);
      if (r == RUN_FAULT) return 1;
      if (r == RUN_DONE) wp->done = 1;
      else waiting = 1;
      if (__atomic_load_n(&w->rc->fault, __ATOMIC_RELAXED)) return 1;
    }
    if (!waiting) return 0;
    for (unsigned i = 0; i < w->nwarps; i++) { /* every lane left waits */
      w->warps[i].wait = 0;
      w->warps[i].top.mask = 0;
    }
  }
}

static void *work(void *arg) {
  worker *w = arg;
  run_ctx *rc = w->rc;
  const unsigned *g = rc->l->grid;
  for (;;) {
    if (__atomic_load_n(&rc->fault, __ATOMIC_RELAXED)) break;
    uint64_t b = __atomic_fetch_add(&rc->next, 1, __ATOMIC_RELAXED);
    if (b >= rc->nblocks) break;
    w->bid[0] = (unsigned)(b % g[0]);
    w->bid[1] = (unsigned)(b / g[0] % g[1]);
    w->bid[2] = (unsigned)(b / ((uint64_t)g[0] * g[1]));
    memset(w->shared, 0, rc->nshared);
    if (run_block(w)) break;
  }
  return NULL;
}

static void free_worker(worker *w) {
  free(w->warps);
  free(w->regs);
  free(w->preds);
  free(w->shared);
  free(w->local);
  free(w->pf);
}

static int init_worker(worker *w, run_ctx *rc) {
  memset(w, 0, sizeof *w);
  w->rc = rc;
  const sim_module *m = rc->m;
  unsigned nt = rc->l->block[0] * rc->l->block[1] * rc->l->block[2];
  w->nwarps = (nt + 31) / 32;
  size_t slots = (size_t)m->nslots * 32;
  w->warps = calloc(w->nwarps, sizeof *w->warps);
  w->regs = calloc(slots * w->nwarps, sizeof *w->regs);
  w->preds = calloc((size_t)(m->npreds + 1) * w->nwarps, sizeof *w->preds);
  w->shared = malloc(rc->nshared ? rc->nshared : 1);
  w->local = calloc((size_t)w->nwarps * 32, m->local_size);
  w->pf = calloc((size_t)w->nwarps * 32, m->pframe);
  if (!w->warps || !w->regs || !w->preds || !w->shared || !w->local || !w->pf) {
    free_worker(w);
    return 0;
  }
  for (unsigned i = 0; i < w->nwarps; i++) {
    warp *wp = &w->warps[i];
    wp->r = w->regs + slots * i;
    wp->p = w->preds + (size_t)(m->npreds + 1) * i;
    wp->local = w->local + (size_t)i * 32 * m->local_size;
    wp->pf = w->pf + (size_t)i * 32 * m->pframe;
  }
  return 1;
}

static unsigned host_threads(const sim_launch *l, uint64_t nblocks) {
  unsigned n = l->threads;
  const char *e = getenv("CUDA_SIM_THREADS");
  if (!n && e && *e) n = (unsigned)strtoul(e, NULL, 10);
  if (!n) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    n = c > 0 ? (unsigned)c : 1;
  }
  if (n > 256) n = 256;
  if (n > nblocks) n = (unsigned)nblocks;
  return n ? n : 1;
}

int sim_run(const sim_kernel *k, sim_launch *l, char *diag, size_t ndiag) {
  run_ctx rc;
  memset(&rc, 0, sizeof rc);
  rc.k = k;
  rc.m = k->m;
  rc.l = l;
  rc.nshared = k->m->shared_static + l->dynamic_shared;
  rc.nblocks = (uint64_t)l->grid[0] * l->grid[1] * l->grid[2];
  rc.diag = diag;
  rc.ndiag = ndiag;
  if (ndiag) diag[0] = '\0';
  l->executed = 0;
  pthread_mutex_init(&rc.mu, NULL);
  unsigned n = host_threads(l, rc.nblocks);
  worker *ws = calloc(n, sizeof *ws);
  pthread_t *th = calloc(n, sizeof *th);
  unsigned made = 0;
  int code = SIM_OK;
  if (!ws || !th) code = SIM_OUT_OF_MEMORY;
  for (unsigned i = 0; !code && i < n; i++) {
    if (!init_worker(&ws[i], &rc)) code = SIM_OUT_OF_MEMORY;
    else made++;
  }
  unsigned char *joined = calloc(n, 1);
  if (!code && !joined) code = SIM_OUT_OF_MEMORY;
  if (!code) { /* this thread is worker 0; a thread not made leaves its
                  blocks to the others */
    for (unsigned i = 1; i < made; i++)
      joined[i] = !pthread_create(&th[i], NULL, work, &ws[i]);
    work(&ws[0]);
    for (unsigned i = 1; i < made; i++)
      if (joined[i]) pthread_join(th[i], NULL);
  }
  free(joined);
  for (unsigned i = 0; i < made; i++) {
    l->executed += ws[i].executed;
    free_worker(&ws[i]);
  }
  free(ws);
  free(th);
  if (!code) code = rc.fault;
  pthread_mutex_destroy(&rc.mu);
  return code;
}
