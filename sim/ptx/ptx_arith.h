/* The interpreter's arithmetic beside the loop: PTX's min and max, the
   extended precision of the carry flag, bit field masks and extensions.
   Part of the loop's translation unit (ptx_exec.c, the only file to
   include it). */
#ifndef PTX_ARITH_H
#define PTX_ARITH_H

#include "ptx_exec.h"

/* The GPU's NaN results. f32 arithmetic gives one NaN, 0x7fffffff, for
   every NaN it makes or is given. f64 arithmetic gives one of its NaN
   operands, quieted (b before a; div a before b; fma and mad b, c, a),
   or the default NaN where none is (the host's, the same). */
static inline uint64_t gpu_f32(float r) { return r != r ? 0x7fffffffu : bf(r); }
static inline uint64_t quiet64(uint64_t v) { return v | 0x0008000000000000ull; }
static inline int nan64(uint64_t v) { return (v & ~(1ull << 63)) > 0x7ff0000000000000ull; }
static inline uint64_t gpu_f64(const ins *in, double r, uint64_t a, uint64_t b,
                               uint64_t c) {
  if (r == r) return bd(r);
  int three = in->c >= 0 && (in->op == OP_FMA || in->op == OP_MAD);
  uint64_t o[3] = { b, three ? c : a, a };
  if (in->op == OP_DIV) o[0] = a, o[1] = b;
  for (int i = 0; i < 3; i++)
    if (nan64(o[i])) return quiet64(o[i]);
  return bd(r);
}

/* r, or a zero of its sign where the exact result e is tiny (below 2^-126):
   .ftz on the GPU flushes before rounding. */
static inline float tiny0(float r, double e) {
  return e != 0 && fabs(e) < 0x1p-126 ? (signbit(e) ? -0.0f : 0.0f) : r;
}

/* rcp and rsqrt.approx.ftz.f64 read the upper half of their operand. */
static inline double hi64(uint64_t v) { return f64(v & 0xffffffff00000000ull); }

/* .sat of f32 and f16 results: [+0, 1], NaN and -0 to +0. */
static inline float sat32(float x) { return x != x || x <= 0 ? 0 : x > 1 ? 1 : x; }

__extension__ typedef __int128 s128;
__extension__ typedef unsigned __int128 u128;

/* min and max of PTX: a NaN operand gives the other, and +0 > -0. */
static inline double minmax(int mx, double x, double y) {
  if (x != x) return y;
  if (y != y || (x == y ? !!signbit(x) != mx : (x < y) != mx)) return x;
  return y;
}

/* min and max.f32 with .NaN (a NaN operand gives the canonical NaN) or
   .xorsign.abs (of magnitudes, the sign the XOR of the operands'). */
static float minmax_f32(const ins *in, float x, float y) {
  int sign = !!signbit(x) != !!signbit(y);
  if ((in->flags & F_NAN) && (x != x || y != y)) return f32(0x7fffffffu);
  if (in->flags & F_XORSIGN) x = fabsf(x), y = fabsf(y);
  float r = (float)minmax(in->op == OP_MAX, x, y);
  return r != r || !(in->flags & F_XORSIGN) ? r : sign ? -r : r;
}

/* Extended precision (OP_CARRY): add, sub (a borrow for carry) and mad
   (.lo or .hi of the product) with the lane's carry flag in (addc, subc,
   madc) and out (.cc). Apart from the loop, as it is rare. */
static __attribute__((noinline)) void ins_carry(warp *wp, const ins *in,
                                                uint32_t em, uint64_t *D,
                                                const uint64_t *A,
                                                const uint64_t *B,
                                                const uint64_t *C) {
  int bits = in->tb, sgn = in->tk == K_S;
  u128 top = bits == 64 ? ~0ull : 0xffffffffull;
  uint32_t cf = in->flags & F_CIN ? wp->carry : 0, out = 0;
  LOOP(u128 a = A[l] & top, b = B[l] & top, c = C[l] & top, r;
       u128 cin = cf >> l & 1;
       int flag;
       if (in->sub == OP_SUB) {
         r = a - b - cin;
         flag = a < b + cin;
       } else {
         if (in->sub == OP_MAD) {
           u128 p = sgn ? (u128)((s128)sx(A[l], bits) * (s128)sx(B[l], bits))
                        : a * b;
           a = in->flags & F_HI ? p >> bits & top : p & top;
           b = c;
         }
         r = a + b + cin;
         flag = (int)(r >> bits & 1);
       }
       D[l] = (uint64_t)(r & top);
       out |= (uint32_t)flag << l);
  if (in->flags & F_CC) wp->carry = (wp->carry & ~em) | out;
}

/* bmsk: a mask of b bits from bit a (.clamp: a or b past 31 as the ISA
   says; .wrap: both modulo 32). */
static inline uint32_t bmsk(uint32_t a, uint32_t b, int clamp) {
  uint32_t a1 = a & 31, b1 = b & 31, m0 = ~0u << a1;
  int over = a1 + b1 >= 32 || (clamp && b >= 32);
  if (clamp && a >= 32) m0 = 0, over = 1;
  return m0 & ~(over ? 0 : b1 == 0 ? ~0u : ~0u << (a1 + b1));
}

/* szext: the low b bits of a, sign- (signed) or zero-extended. */
static inline uint32_t szext(uint32_t a, uint32_t b, int clamp, int sgn) {
  uint32_t b1 = b & 31;
  int large = clamp && b >= 32;
  uint32_t m = large ? 0 : ~0u << b1;
  int sign = sgn && b1 && !large && (a >> ((b1 - 1) & 31) & 1);
  return (a & ~m) | (sign ? m : 0);
}

#endif
