/* Comparisons and conversions of values of PTX types: setp's comparisons,
   f16 and bf16 values and the one rounding to them that cvt and the half
   precision instructions share, cvt with its roundings and saturation.
   Part of the loop's translation unit (ptx_exec.c, the only file to
   include it). */
#ifndef PTX_CONVERT_H
#define PTX_CONVERT_H

#include "ptx_arith.h"

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

/* -- f16 and bf16 ---------------------------------------------------------- */

/* The narrow formats: f16 (11 significant bits, exponents -14..15) and
   bf16 (8 bits, -126..127), indexed by "is bf16". */
static const struct { int p, emin, emax; } NARROW[2] = {{11, -14, 15},
                                                       {8, -126, 127}};

/* An f16 or bf16 value, exactly. */
static double narrow_value(uint16_t h, int bf) {
  int mb = NARROW[bf].p - 1, bias = NARROW[bf].emax;
  int e = h >> mb & (2 * bias + 1), m = h & ((1 << mb) - 1);
  double a = e == 2 * bias + 1 ? (m ? NAN : INFINITY)
           : e ? ldexp(m + (1 << mb), e - bias - mb)
               : ldexp(m, NARROW[bf].emin - mb);
  return h >> 15 ? -a : a;
}

static int narrow_nan(uint16_t h, int bf) {
  return (h & 0x7fff) > (bf ? 0x7f80 : 0x7c00);
}

/* s rounded once to f16 or bf16 in rounding mode rnd (R_N, R_Z, R_M,
   R_P), t the sign of what s leaves off the exact value (an error term
   below all of s's bits: an exact sum's, or an integer's beyond 2^53).
   NaN becomes the canonical 0x7fff, as the GPU's conversions give. */
static uint16_t narrow(double s, int t, int bf, int rnd) {
  if (s != s) return 0x7fff;
  int mb = NARROW[bf].p - 1, emin = NARROW[bf].emin;
  uint16_t sign = signbit(s) ? 0x8000 : 0;
  uint16_t inf = (uint16_t)((2 * NARROW[bf].emax + 1) << mb);
  double a = fabs(s);
  if (isinf(a)) return sign | inf;
  if (a == 0) return sign;
  int up = sign ? t < 0 : t > 0; /* the exact magnitude is above a */
  int down = sign ? t > 0 : t < 0;
  int e = ilogb(a);
  if (down && a == ldexp(1.0, e)) e--; /* just below a power of two */
  int q = (e < emin ? emin : e) - mb;  /* the last place's exponent */
  double k = ldexp(a, -q), r = k - floor(k);
  uint64_t K = (uint64_t)floor(k);
  int away = (rnd == R_P && !sign) || (rnd == R_M && sign);
  int zero = rnd == R_Z || (rnd == R_P && sign) || (rnd == R_M && !sign);
  if (r == 0 && down) {
    if (zero) K--;
  } else if (r == 0) {
    if (up && away) K++;
  } else if (away) {
    K++;
  } else if (!zero && (r > 0.5 || (r == 0.5 && (up || (!down && (K & 1)))))) {
    K++;
  }
  if (K == 0) return sign;
  double v = ldexp((double)K, q);
  if (v > ldexp((double)((2 << mb) - 1), NARROW[bf].emax - mb))
    return sign | (zero ? inf - 1 : inf);
  if (v < ldexp(1.0, emin)) return sign | (uint16_t)K;
  int ev = ilogb(v);
  uint64_t m = (uint64_t)ldexp(v, mb - ev) - (1u << mb);
  return sign | (uint16_t)((ev + NARROW[bf].emax) << mb) | (uint16_t)m;
}

/* The error of s = x + y rounded to nearest (TwoSum): s + error is exact. */
static double sum_error(double x, double y, double s) {
  if (!isfinite(s)) return 0;
  double yy = s - x;
  return (x - (s - yy)) + (y - yy);
}

/* x + y of two f16 (bf = 0) or bf16 values rounded once to nearest. */
static uint16_t narrow_add(double x, double y, int bf) {
  double s = x + y, e = sum_error(x, y, s);
  return narrow(s, (e > 0) - (e < 0), bf, R_N);
}

/* -- cvt ------------------------------------------------------------------- */

static double round_int(double x, int rnd) {
  switch (rnd) {
  case R_NI: return nearbyint(x); /* the default mode: to nearest even */
  case R_ZI: return trunc(x);
  case R_MI: return floor(x);
  case R_PI: return ceil(x);
  default: return x;
  }
}

/* A float rounded to an integer of (k, bits), saturating. NaN is 0, or
   1 << (bits - 1) from an f64 or to a 64-bit integer (wide). */
static uint64_t float_to_int(double x, int k, int bits, int wide) {
  if (x != x) return wide ? 1ull << (bits - 1) : 0;
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

/* cvt's source as a double: exact for floats (f32 flushed under .ftz)
   and integers below 2^53; *t the sign of what the double leaves off a
   wider integer. */
static double cvt_source(const ins *in, uint64_t v, int *t) {
  int sk = in->t2k, sb = in->t2b;
  *t = 0;
  if (sk == K_BF) return narrow_value((uint16_t)v, 1);
  if (sk == K_F && sb == 16) return narrow_value((uint16_t)v, 0);
  if (sk == K_F && sb == 32) /* .ftz flushes it, except to f16 */
    return (in->flags & F_FTZ) && !(in->tk == K_F && in->tb == 16)
           ? ftz(f32(v)) : f32(v);
  if (sk == K_F) return f64(v);
  if (sk == K_S) {
    int64_t i = sx(v, sb);
    double d = (double)i;
    if (d >= 0x1p63) *t = -1;
    else *t = (i > (int64_t)d) - (i < (int64_t)d);
    return d;
  }
  uint64_t i = zx(v, sb);
  double d = (double)i;
  if (d >= 0x1p64) *t = -1;
  else *t = (i > (uint64_t)d) - (i < (uint64_t)d);
  return d;
}

/* cvt to f16 (bf = 0) or bf16 of the source v: .sat, then the rounding,
   then .relu (negative results to +0) and .satfinite (infinities to the
   largest finite value). */
static uint16_t cvt_narrow(const ins *in, uint64_t v, int bf) {
  int t;
  double x = cvt_source(in, v, &t);
  if (in->rnd >= R_NI) x = round_int(x, in->rnd), t = 0;
  if (in->flags & F_SAT) x = x != x || x <= 0 ? 0 : x > 1 ? 1 : x;
  if (x != x && in->t2k == K_F && in->t2b == 64) /* the GPU keeps the sign */
    return (uint16_t)((v >> 48 & 0x8000) | (bf ? 0x7fc0 : 0x7e00));
  uint16_t h = narrow(x, t, bf, in->rnd >= R_NI ? R_N : in->rnd);
  if ((in->flags & F_RELU) && (h & 0x8000) && !narrow_nan(h, bf)) h = 0;
  if ((in->flags & F_SATFINITE) && (h & 0x7fff) == (bf ? 0x7f80 : 0x7c00))
    h--;
  return h;
}

/* An s8 result in its register (16 bits at least): sign-extended. */
static inline uint64_t s8reg(int dk, int db, uint64_t v) {
  return dk == K_S && db == 8 ? zx((uint64_t)sx(v, 8), 16) : v;
}

/* cvt of a NaN v between floats, as the GPU gives it: f32 results and
   .ftz give the canonical NaN, except bf16 to f32 without .ftz (its
   bits) and f64 to f32 (the default NaN of its sign); to f64 the payload
   stays, quieted. */
static uint64_t nan_cvt(const ins *in, uint64_t v) {
  int sk = in->t2k, sb = in->t2b, db = in->tb;
  if (in->flags & F_SAT) return 0;
  if (sk == K_BF && db == 32 && !(in->flags & F_FTZ))
    return (uint64_t)(uint16_t)v << 16;
  if (sk == K_F && sb == 64 && db == 32)
    return (v >> 32 & 0x80000000u) | 0x7fc00000u;
  if (db == 32) return 0x7fffffffu;
  if (in->flags & F_FTZ) return 0x7fffffffe0000000ull;
  if (sk == K_F && sb == 64) return quiet64(v);
  if (sk == K_F && sb == 32)
    return quiet64((v >> 31 & 1) << 63 | 0x7ff0000000000000ull | (v & 0x7fffffu) << 29);
  int mb = sk == K_BF ? 7 : 10;
  return quiet64((v >> 15 & 1) << 63 | 0x7ff0000000000000ull
                 | (v & ((1u << mb) - 1)) << (52 - mb));
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
    return s8reg(dk, db, zx((uint64_t)x, db));
  }
  if (dk == K_BF || (dk == K_F && db == 16))
    return cvt_narrow(in, v, dk == K_BF);
  if (!sfl) { /* integer to f32 or f64, in cvt's rounding mode */
    int mode = fe_mode(in->rnd), old = fegetround();
    if (mode != old) fesetround(mode);
    uint64_t r;
    if (sk == K_S) {
      int64_t i = sx(v, sb);
      r = db == 64 ? bd((double)i) : bf((float)i);
    } else {
      uint64_t i = zx(v, sb);
      r = db == 64 ? bd((double)i) : bf((float)i);
    }
    if (mode != old) fesetround(old);
    if (in->flags & F_SAT) /* [0, 1] */
      r = db == 64 ? bd(f64(r) > 1 ? 1 : f64(r) < 0 ? 0 : f64(r)) : bf(sat32(f32(r)));
    return r;
  }
  int t;
  double x = cvt_source(in, v, &t); /* exact */
  if (!dfl) /* float to integer */
    return s8reg(dk, db, float_to_int(round_int(x, in->rnd), dk, db,
                                      (sk == K_F && sb == 64) || db == 64));
  /* float to f32 or f64 */
  if (x != x) return nan_cvt(in, v);
  if (in->rnd >= R_NI) x = round_int(x, in->rnd);
  if (in->flags & F_SAT) x = x <= 0 ? 0 : x > 1 ? 1 : x;
  if (db == 64) return bd(x);
  int mode = fe_mode(in->rnd >= R_NI ? R_N : in->rnd), old = fegetround();
  if (mode != old) fesetround(mode);
  volatile double vx = x;
  float f = (float)vx;
  if (mode != old) fesetround(old);
  if (in->flags & F_FTZ) f = ftz(f);
  return bf(f);
}

#endif
