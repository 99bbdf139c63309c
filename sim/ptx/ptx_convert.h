/* Comparisons and conversions of values of PTX types: setp's comparisons,
   cvt with its roundings and saturation, and the f16 and bf16 forms. Part
   of the loop's translation unit (ptx_exec.c, the only file to include
   it). */
#ifndef PTX_CONVERT_H
#define PTX_CONVERT_H

#include "ptx_exec.h"

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

static double round_int(double x, int rnd) {
  switch (rnd) {
  case R_NI: return nearbyint(x); /* the default mode: to nearest even */
  case R_ZI: return trunc(x);
  case R_MI: return floor(x);
  case R_PI: return ceil(x);
  default: return x;
  }
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

#endif
