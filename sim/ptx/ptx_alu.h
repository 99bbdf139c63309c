/* The value instructions of the interpreter's loop: arithmetic, bit
   operations, comparisons, selections and conversions of the lanes of em,
   each lane's registers D (the result), A, B and C; f32 and f64 results
   as the GPU gives them (gpu_f32, gpu_f64). Inlined into the loop, the
   only place to call it (ptx_exec.c, the only file to include this). */
#ifndef PTX_ALU_H
#define PTX_ALU_H

#include "ptx_arith.h"
#include "ptx_convert.h"
#ifdef __AVX2__
#include <immintrin.h>
#endif

/* f32 operations with x, y, z the operands (flushed under .ftz); a NaN
   result is the GPU's canonical NaN (gpu_f32). */
#define F32OP(...)                                                          \
  do {                                                                      \
    if (in->flags & F_FTZ)                                                  \
      LOOP(float x = ftz(f32(A[l])); float y = ftz(f32(B[l]));              \
           float z = ftz(f32(C[l])); (void)y; (void)z;                      \
           D[l] = gpu_f32(ftz(__VA_ARGS__)));                               \
    else                                                                    \
      LOOP(float x = f32(A[l]); float y = f32(B[l]); float z = f32(C[l]);   \
           (void)y; (void)z; D[l] = gpu_f32(__VA_ARGS__));                  \
  } while (0)
/* F32OP with E the exact result (or one rounded to double): under .ftz a
   result that is tiny before rounding is a zero, as on the GPU. */
#define F32OPE(E, ...)                                                      \
  do {                                                                      \
    if (in->flags & F_FTZ)                                                  \
      LOOP(float x = ftz(f32(A[l])); float y = ftz(f32(B[l]));              \
           float z = ftz(f32(C[l])); (void)y; (void)z;                      \
           D[l] = gpu_f32(ftz(tiny0(__VA_ARGS__, E))));                     \
    else                                                                    \
      LOOP(float x = f32(A[l]); float y = f32(B[l]); float z = f32(C[l]);   \
           (void)y; (void)z; D[l] = gpu_f32(__VA_ARGS__));                  \
  } while (0)
/* f64 operations: a NaN result is the last NaN operand, quieted (gpu_f64). */
#define F64OP(...)                                                          \
  LOOP(double x = f64(A[l]); double y = f64(B[l]); double z = f64(C[l]);    \
       (void)x; (void)y; (void)z;                                           \
       D[l] = gpu_f64(in, __VA_ARGS__, A[l], B[l], C[l]))

/* setp's results, v the comparisons of the lanes of em: p, and q where
   the instruction has one, each combined with its third predicate. */
static inline void setp_write(warp *wp, const ins *in, uint32_t em,
                              uint32_t v) {
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
}

/* setp of integers of 32 and 64 bits, the fast forms': each operand's
   key (the value moved to the top of the word, the sign bit flipped for
   unsigned types) compared as signed 64-bit integers. With AVX2 or
   AVX-512 every lane is compared (setp_write keeps those of em), a
   vector of lanes at a time, with no branch a lane whatever em is: bit l
   of setp_bits is lane l's result (kind: C_EQ, C_NE, C_LT, C_LE, C_GT or
   C_GE, a constant where it is inlined). */
static const uint64_t lane_bit[32] = {
  1ull << 0, 1ull << 1, 1ull << 2, 1ull << 3, 1ull << 4, 1ull << 5,
  1ull << 6, 1ull << 7, 1ull << 8, 1ull << 9, 1ull << 10, 1ull << 11,
  1ull << 12, 1ull << 13, 1ull << 14, 1ull << 15, 1ull << 16, 1ull << 17,
  1ull << 18, 1ull << 19, 1ull << 20, 1ull << 21, 1ull << 22, 1ull << 23,
  1ull << 24, 1ull << 25, 1ull << 26, 1ull << 27, 1ull << 28, 1ull << 29,
  1ull << 30, 1ull << 31,
};
#if defined(__AVX512F__)
static ALWAYS_INLINE uint32_t setp_bits(const uint64_t *A, const uint64_t *B,
                                        unsigned sh, uint64_t flip,
                                        int kind) {
  __m512i F = _mm512_set1_epi64((long long)flip);
  __m128i S = _mm_cvtsi32_si128((int)sh);
  uint32_t v = 0;
  for (int c = 0; c < 4; c++) {
    __m512i a = _mm512_xor_si512(
        _mm512_sll_epi64(_mm512_loadu_si512((const void *)(A + 8 * c)), S), F);
    __m512i b = _mm512_xor_si512(
        _mm512_sll_epi64(_mm512_loadu_si512((const void *)(B + 8 * c)), S), F);
    __mmask8 k;
    switch (kind) {
    case C_EQ: k = _mm512_cmpeq_epi64_mask(a, b); break;
    case C_NE: k = _mm512_cmpneq_epi64_mask(a, b); break;
    case C_LT: k = _mm512_cmplt_epi64_mask(a, b); break;
    case C_LE: k = _mm512_cmple_epi64_mask(a, b); break;
    case C_GT: k = _mm512_cmpgt_epi64_mask(a, b); break;
    default: k = _mm512_cmpge_epi64_mask(a, b);
    }
    v |= (uint32_t)k << (8 * c);
  }
  return v;
}
/* The same of 32-bit integers: the low halves compared as 16 lanes of 32
   bits, what is above them never read (no shift to the top, no flip),
   and their results (the even bits) gathered. */
static ALWAYS_INLINE uint32_t setp_bits32(const uint64_t *A,
                                          const uint64_t *B, int sgn,
                                          int kind) {
  uint32_t v = 0;
  for (int c = 0; c < 4; c++) {
    __m512i a = _mm512_loadu_si512((const void *)(A + 8 * c));
    __m512i b = _mm512_loadu_si512((const void *)(B + 8 * c));
    __mmask16 k;
    switch (kind) {
    case C_EQ: k = _mm512_cmpeq_epi32_mask(a, b); break;
    case C_NE: k = _mm512_cmpneq_epi32_mask(a, b); break;
    case C_LT:
      k = sgn ? _mm512_cmplt_epi32_mask(a, b) : _mm512_cmplt_epu32_mask(a, b);
      break;
    case C_LE:
      k = sgn ? _mm512_cmple_epi32_mask(a, b) : _mm512_cmple_epu32_mask(a, b);
      break;
    case C_GT:
      k = sgn ? _mm512_cmpgt_epi32_mask(a, b) : _mm512_cmpgt_epu32_mask(a, b);
      break;
    default:
      k = sgn ? _mm512_cmpge_epi32_mask(a, b) : _mm512_cmpge_epu32_mask(a, b);
    }
    v |= _pext_u32((uint32_t)k, 0x5555u) << (8 * c);
  }
  return v;
}
#elif defined(__AVX2__)
static ALWAYS_INLINE uint32_t setp_bits(const uint64_t *A, const uint64_t *B,
                                        unsigned sh, uint64_t flip,
                                        int kind) {
  __m256i F = _mm256_set1_epi64x((long long)flip);
  __m128i S = _mm_cvtsi32_si128((int)sh);
  uint32_t v = 0;
  for (int c = 0; c < 8; c++) {
    __m256i a = _mm256_xor_si256(
        _mm256_sll_epi64(_mm256_loadu_si256((const void *)(A + 4 * c)), S), F);
    __m256i b = _mm256_xor_si256(
        _mm256_sll_epi64(_mm256_loadu_si256((const void *)(B + 4 * c)), S), F);
    __m256i m;
    unsigned flipbits = 0;
    switch (kind) {
    case C_EQ: m = _mm256_cmpeq_epi64(a, b); break;
    case C_NE: m = _mm256_cmpeq_epi64(a, b), flipbits = 0xf; break;
    case C_LT: m = _mm256_cmpgt_epi64(b, a); break;
    case C_LE: m = _mm256_cmpgt_epi64(a, b), flipbits = 0xf; break;
    case C_GT: m = _mm256_cmpgt_epi64(a, b); break;
    default: m = _mm256_cmpgt_epi64(b, a), flipbits = 0xf;
    }
    unsigned bits = (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(m));
    v |= (bits ^ flipbits) << (4 * c);
  }
  return v;
}
/* The same of 32-bit integers: the low halves compared as 32-bit lanes
   (the sign bit flipped for unsigned types; what is above them never
   read), their results (the even bits) gathered. */
static ALWAYS_INLINE uint32_t setp_bits32(const uint64_t *A,
                                          const uint64_t *B, int sgn,
                                          int kind) {
  __m256i F = _mm256_set1_epi32(sgn || kind == C_EQ || kind == C_NE
                                    ? 0 : (int)0x80000000u);
  uint32_t v = 0;
  for (int c = 0; c < 8; c++) {
    __m256i a = _mm256_xor_si256(
        _mm256_loadu_si256((const void *)(A + 4 * c)), F);
    __m256i b = _mm256_xor_si256(
        _mm256_loadu_si256((const void *)(B + 4 * c)), F);
    __m256i m;
    unsigned flipbits = 0;
    switch (kind) {
    case C_EQ: m = _mm256_cmpeq_epi32(a, b); break;
    case C_NE: m = _mm256_cmpeq_epi32(a, b), flipbits = 0xf; break;
    case C_LT: m = _mm256_cmpgt_epi32(b, a); break;
    case C_LE: m = _mm256_cmpgt_epi32(a, b), flipbits = 0xf; break;
    case C_GT: m = _mm256_cmpgt_epi32(a, b); break;
    default: m = _mm256_cmpgt_epi32(b, a), flipbits = 0xf;
    }
    unsigned bits = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(m));
    v |= (_pext_u32(bits, 0x55u) ^ flipbits) << (4 * c);
  }
  return v;
}
#endif
#define SETP_KEY(X) ((int64_t)(((X) << sh_) ^ flip_))
#ifdef __AVX2__
#define SETP_FAST(OP, KIND)                                                 \
  setp_write(wp, in, em,                                                    \
             in->tb == 32 ? setp_bits32(A, B, in->tk == K_S, KIND)          \
                          : setp_bits(A, B, 64 - in->tb,                    \
                                      in->tk == K_S ? 0 : 1ull << 63, KIND))
#else /* the lanes of em, one by one */
#define SETP_FAST(OP, KIND)                                                 \
  do {                                                                      \
    unsigned sh_ = 64 - in->tb;                                             \
    uint64_t flip_ = in->tk == K_S ? 0 : 1ull << 63;                        \
    uint32_t v_ = 0;                                                        \
    if (em == ALL)                                                          \
      for (int l = 31; l >= 0; l--)                                         \
        v_ = v_ << 1 | (uint32_t)(SETP_KEY(A[l]) OP SETP_KEY(B[l]));        \
    else                                                                    \
      for (uint32_t m_ = em; m_; m_ &= m_ - 1) {                            \
        int l = __builtin_ctz(m_);                                          \
        v_ |= (uint32_t)(SETP_KEY(A[l]) OP SETP_KEY(B[l])) << l;            \
      }                                                                     \
    setp_write(wp, in, em, v_);                                             \
  } while (0)
#endif

/* Runs in if it is a value instruction: 1, else 0 (the loop's other
   cases, or an instruction it does not run). */
static inline __attribute__((always_inline)) int exec_alu(
    warp *wp, const ins *in, uint32_t em, uint64_t *D, const uint64_t *A,
    const uint64_t *B, const uint64_t *C) {
  int k = in->tk, bits = in->tb;
  int isf = k == K_F, isf32 = isf && bits == 32;
  switch (in->op) {
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
    if (isf32) F32OPE((double)x + y, x + y);
    else if (isf) F64OP(x + y);
    else if ((in->flags & F_SAT) && k == K_S)
      LOOP(int64_t v = sx(A[l], 32) + sx(B[l], 32);
           D[l] = zx((uint64_t)(v > INT32_MAX ? INT32_MAX
                                : v < INT32_MIN ? INT32_MIN : v), 32));
    else LOOP(D[l] = zx(A[l] + B[l], bits));
    break;
  case OP_SUB:
    if (isf32) F32OPE((double)x - y, x - y);
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
      if (mad) F32OPE(fma(x, y, z), fmaf(x, y, z));
      else F32OPE((double)x * y, x * y);
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
    if (isf32) F32OPE(fma(x, y, z), fmaf(x, y, z));
    else F64OP(fma(x, y, z));
    break;
  case OP_DIV:
    if (isf32) F32OPE((double)x / y, x / y);
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
    if (isf32 && (in->flags & (F_NAN | F_XORSIGN)))
      F32OP(minmax_f32(in, x, y));
    else if (isf32)
      F32OP(minmax(mx, x, y));
    else if (isf)
      F64OP(minmax(mx, x, y));
    else if (k == K_S) {
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
  case OP_BFE: {
    uint32_t fm = bits == 64 ? ~0u : 0xff; /* the GPU's 64-bit forms */
    LOOP(uint32_t pos = (uint32_t)B[l] & fm, len = (uint32_t)C[l] & fm;
         uint64_t x = zx(A[l], bits), v;
         if (len == 0) { v = 0; }
         else {
           if (pos > (unsigned)bits) pos = (unsigned)bits;
           v = pos >= (unsigned)bits ? 0 : x >> pos;
           if (len < 64) v &= (1ull << len) - 1;
           if (k == K_S) {
             unsigned top = (uint64_t)pos + len - 1 >= (unsigned)bits ? (unsigned)bits - 1
                                                                 : pos + len - 1;
             int sgn = (int)(x >> top & 1);
             /* positions past the top bit take the sign too */
             unsigned got = len < (unsigned)bits - pos ? len : (unsigned)bits - pos;
             if (sgn && got < 64) v |= ~0ull << got;
           }
         }
         D[l] = zx(v, bits));
    break;
  }
  case OP_BFI: {
    const uint64_t *E = R(in->e);
    uint32_t fm = bits == 64 ? ~0u : 0xff;
    LOOP(uint32_t pos = (uint32_t)C[l] & fm, len = (uint32_t)E[l] & fm;
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
  case OP_BMSK:
    LOOP(D[l] = bmsk((uint32_t)A[l], (uint32_t)B[l], !in->bop));
    break;
  case OP_SZEXT:
    LOOP(D[l] = szext((uint32_t)A[l], (uint32_t)B[l], !in->bop, k == K_S));
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
    else if (isf)
      LOOP(v |= (uint32_t)cmp_float(in->cmp, f64(A[l]), f64(B[l])) << l);
    else
      LOOP(v |= (uint32_t)cmp_int(in->cmp, A[l], B[l], k, bits) << l);
    setp_write(wp, in, em, v);
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
               : in->cmp == 4 ? c == FP_NORMAL || c == FP_ZERO /* as the GPU */
               : c == FP_SUBNORMAL;
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
  case OP_EX2: F32OP(exp2f(x)); break;
  case OP_LG2: F32OP(log2f(x)); break;
  case OP_RCP: /* f64 .ftz: rcp.approx.ftz.f64 */
    if (isf32) F32OPE(1.0 / x, 1.0f / x);
    else if (in->flags & F_FTZ) F64OP(ftz64(1.0 / ftz64(hi64(A[l]))));
    else F64OP(1.0 / x);
    break;
  case OP_RSQRT:
    if (isf32) F32OP(1.0f / sqrtf(x));
    else if (in->flags & F_FTZ) F64OP(ftz64(1.0 / sqrt(ftz64(hi64(A[l])))));
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
    if (isf32) LOOP(D[l] = (A[l] & 0x80000000u) | (B[l] & 0x7fffffffu));
    else LOOP(D[l] = (A[l] & 1ull << 63) | (B[l] & ~(1ull << 63)));
    break;
  default:
    return 0;
  }
  return 1;
}

#endif
