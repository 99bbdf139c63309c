/* The half precision instructions (OP_HALF): f16 and bf16 and their pairs
   f16x2 and bf16x2, each half computed exactly in double (products of
   two halves are exact there, sums exact with their TwoSum error) and
   rounded once to nearest even, as the GPU computes them; comparisons,
   set, and cvt to pairs. A NaN result is the canonical 0x7fff (PTX: an
   unspecified NaN). Part of the loop's translation unit (ptx_exec.c, the
   only file to include it). */
#ifndef PTX_HALF_H
#define PTX_HALF_H

#include "ptx_convert.h"

/* Under .ftz (f16 only) subnormals become zeros of their sign. */
static uint16_t half_flush(const ins *in, uint16_t h) {
  return (in->flags & F_FTZ) && !(h & 0x7c00) ? h & 0x8000 : h;
}

/* s + e (e below all of s's bits) rounded, then .ftz, .relu (a negative
   result is +0) and .sat ([0, 1], NaN to +0) of the result. */
static uint16_t half_round(const ins *in, int bf, double s, double e) {
  uint16_t h = half_flush(in, narrow(s, (e > 0) - (e < 0), bf, R_N));
  /* .ftz flushes what is tiny before rounding, as the GPU does */
  if ((in->flags & F_FTZ) && (fabs(s) < 0x1p-14 || (fabs(s) == 0x1p-14 &&
                                                    (s > 0 ? e < 0 : e > 0))))
    h = signbit(s) ? 0x8000 : 0;
  if (narrow_nan(h, bf)) return (in->flags & F_SAT) ? 0 : 0x7fff;
  if ((in->flags & F_RELU) && (h & 0x8000)) return 0;
  if (in->flags & F_SAT) { /* -0 too */
    if (h & 0x8000) return 0;
    if (narrow_value(h, bf) > 1) return bf ? 0x3f80 : 0x3c00;
  }
  return h;
}

/* min and max: a NaN operand gives the other (.NaN: NaN), +0 > -0;
   .xorsign.abs compares magnitudes and gives the XOR of the signs. */
static uint16_t half_minmax(const ins *in, int bf, uint16_t a, uint16_t b) {
  uint16_t sign = (a ^ b) & 0x8000, d;
  if (in->flags & F_XORSIGN) a &= 0x7fff, b &= 0x7fff;
  int na = narrow_nan(a, bf), nb = narrow_nan(b, bf), mx = in->sub == OP_MAX;
  if ((na && nb) || ((in->flags & F_NAN) && (na || nb))) return 0x7fff;
  if (na || nb) {
    d = na ? b : a;
  } else {
    double x = narrow_value(a, bf), y = narrow_value(b, bf);
    int first = x == y ? (mx ? !(a & 0x8000) : (a & 0x8000) != 0)
                       : (mx ? x > y : x < y);
    d = first ? a : b;
  }
  if (in->flags & F_XORSIGN) d = (d & 0x7fff) | sign;
  return half_flush(in, d);
}

/* One half of an arithmetic instruction. */
static uint16_t half_arith(const ins *in, int bf, uint16_t a, uint16_t b,
                           uint16_t c) {
  a = half_flush(in, a), b = half_flush(in, b), c = half_flush(in, c);
  double x = narrow_value(a, bf), y = narrow_value(b, bf), s, p;
  switch (in->sub) {
  case OP_ADD: s = x + y; return half_round(in, bf, s, sum_error(x, y, s));
  case OP_SUB: s = x - y; return half_round(in, bf, s, sum_error(x, -y, s));
  case OP_MUL: return half_round(in, bf, x * y, 0);
  case OP_FMA:
    p = x * y;
    s = p + narrow_value(c, bf);
    return half_round(in, bf, s, sum_error(p, narrow_value(c, bf), s));
  case OP_NEG: return narrow_nan(a, bf) ? 0x7fff : a ^ 0x8000;
  case OP_ABS: return narrow_nan(a, bf) ? 0x7fff : a & 0x7fff;
  default: return half_minmax(in, bf, a, b);
  }
}

static int half_cmp(const ins *in, int bf, uint16_t a, uint16_t b) {
  return cmp_float(in->cmp, narrow_value(half_flush(in, a), bf),
                   narrow_value(half_flush(in, b), bf));
}

/* setp's and set's combination with the predicate c. */
static int bool_op(int bop, int t, int c) {
  return bop == B_AND ? t & c : bop == B_OR ? t | c : bop == B_XOR ? t ^ c : t;
}

/* Half i (0 the low, 1 the high) of v. */
#define HALF(v, i) ((uint16_t)((v) >> 16 * (i)))

/* OP_HALF across the lanes of em. A pair's setp gives the low half's
   result in p and the high half's in q; cvt to a pair converts a to the
   high half and b to the low. Apart from the loop, which the others need
   more. */
static __attribute__((noinline)) void ins_half(warp *wp, const ins *in,
                                               uint32_t em, uint64_t *D,
                                               const uint64_t *A,
                                               const uint64_t *B,
                                               const uint64_t *C) {
  int k = in->tk, bf = k == K_BF || k == K_BH2;
  int n = k == K_H2 || k == K_BH2 ? 2 : 1;
  uint32_t c = in->bop ? (in->e ? ~wp->p[in->c] : wp->p[in->c]) : 0;
  switch (in->sub) {
  case OP_SETP: {
    uint32_t p = 0, q = 0;
    LOOP(for (int i = 0; i < n; i++) {
           int t = half_cmp(in, bf, HALF(A[l], i), HALF(B[l], i));
           uint32_t r = (uint32_t)bool_op(in->bop, t, (int)(c >> l & 1));
           if (i) q |= r << l; else p |= r << l;
         });
    wp->p[in->d[0]] = (wp->p[in->d[0]] & ~em) | p;
    if (in->d[1] >= 0) wp->p[in->d[1]] = (wp->p[in->d[1]] & ~em) | q;
    return;
  }
  case OP_CVT:
    LOOP(D[l] = (uint64_t)cvt_narrow(in, A[l], bf) << 16
                | cvt_narrow(in, B[l], bf));
    return;
  default:
    LOOP(uint64_t r = 0;
         for (int i = 0; i < n; i++)
           r |= (uint64_t)half_arith(in, bf, HALF(A[l], i), HALF(B[l], i),
                                     HALF(C[l], i)) << 16 * i;
         D[l] = r);
  }
}

/* set: the comparison of a and b (of type tk, tb; a pair's per half)
   combined with c, as 1.0 or all ones of the result's type (t2k, t2b; a
   pair's halves, or 0xffff halves of an integer) or 0. */
static __attribute__((noinline)) void ins_set(warp *wp, const ins *in,
                                              uint32_t em, uint64_t *D,
                                              const uint64_t *A,
                                              const uint64_t *B) {
  int k = in->tk, bits = in->tb, dk = in->t2k, db = in->t2b;
  int n = k == K_H2 || k == K_BH2 ? 2 : 1, bf = k == K_BF || k == K_BH2;
  int narrow_src = bf || n == 2 || (k == K_F && bits == 16);
  uint64_t one = dk == K_F && db == 32 ? 0x3f800000
               : (dk == K_F && db == 16) || dk == K_H2 ? 0x3c00
               : dk == K_BF || dk == K_BH2 ? 0x3f80
               : n == 2 || db == 16 ? 0xffff : 0xffffffff;
  uint32_t c = in->bop ? (in->e ? ~wp->p[in->c] : wp->p[in->c]) : 0;
  LOOP(uint64_t r = 0;
       for (int i = 0; i < n; i++) {
         int t;
         if (narrow_src)
           t = half_cmp(in, bf, HALF(A[l], i), HALF(B[l], i));
         else if (k == K_F && bits == 32 && (in->flags & F_FTZ))
           t = cmp_float(in->cmp, ftz(f32(A[l])), ftz(f32(B[l])));
         else if (k == K_F)
           t = cmp_float(in->cmp, bits == 32 ? f32(A[l]) : f64(A[l]),
                         bits == 32 ? f32(B[l]) : f64(B[l]));
         else
           t = cmp_int(in->cmp, A[l], B[l], k, bits);
         if (bool_op(in->bop, t, (int)(c >> l & 1))) r |= one << 16 * i;
       }
       D[l] = r);
}

#endif
