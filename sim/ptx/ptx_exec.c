/* The interpreter's loop: a warp's group of lanes, instruction by
   instruction, each over the group's lanes; control flow moves the group
   or splits it, and the scheduler picks the next. */
#define _GNU_SOURCE
#include "ptx_arith.h"
#include "ptx_convert.h"
#include "ptx_half.h"
#include "ptx_mem.h"
#include "ptx_warp.h"

#include <limits.h>

/* -- the interpreter ------------------------------------------------------ */

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

#ifdef SIM_X86_FMA
/* fma.rn.f32 of the lanes of em with the host's FMA instruction (where
   rc->fma says it has one): rounded once, as fmaf. */
__attribute__((target("fma"))) static void fma_f32_host(
    uint32_t em, uint64_t *D, const uint64_t *A, const uint64_t *B,
    const uint64_t *C) {
  LOOP(D[l] = gpu_f32(__builtin_fmaf(f32(A[l]), f32(B[l]), f32(C[l]))));
}
#endif

/* Set bits of a lane mask (no popcnt instruction assumed). */
static inline unsigned lanes(uint32_t x) {
  if (x == ALL) return 32;
  x -= x >> 1 & 0x55555555u;
  x = (x & 0x33333333u) + (x >> 2 & 0x33333333u);
  return (((x + (x >> 4)) & 0x0f0f0f0fu) * 0x01010101u) >> 24;
}

/* Moves lanes of the group aside and picks the next group: the runnable
   lanes (not waiting at a barrier) at the lowest PC, lanes parked there
   joining them; parked lanes wait while others can run. */
static void schedule(frame *f, uint32_t wait) {
  for (uint32_t m = f->mask; m; m &= m - 1) f->pcs[__builtin_ctz(m)] = f->pc;
  uint32_t run = f->live & ~wait, go = run & ~f->park;
  f->release = run && !go;
  if (f->release) go = run;
  int min = INT_MAX;
  for (uint32_t m = go; m; m &= m - 1) {
    int pc = f->pcs[__builtin_ctz(m)];
    if (pc < min) min = pc;
  }
  uint32_t mask = 0;
  int other = INT_MAX;
  for (uint32_t m = run; m; m &= m - 1) {
    int l = __builtin_ctz(m), pc = f->pcs[l];
    if (pc == min) mask |= 1u << l;
    else if (pc < other && (go >> l & 1)) other = pc;
  }
  f->park &= ~mask;
  f->mask = mask;
  f->pc = min;
  f->other = other;
}

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
    exec_fault(w, wp, lane, in, SIM_LAUNCH_FAILED, "cudaGraphSetConditional of "
               "handle 0x%llx, not one of the running graph's", (unsigned long long)h);
}

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

/* setp of integers of type T, each comparison its own loop (a whole
   group's bits shifted in from lane 31 down). */
#define SETP_LANES(T, OP)                                                   \
  do {                                                                      \
    if (em == ALL)                                                          \
      for (int l = 31; l >= 0; l--)                                         \
        v = v << 1 | (uint32_t)((T)A[l] OP (T)B[l]);                        \
    else                                                                    \
      for (uint32_t m_ = em; m_; m_ &= m_ - 1) {                            \
        int l = __builtin_ctz(m_);                                          \
        v |= (uint32_t)((T)A[l] OP (T)B[l]) << l;                           \
      }                                                                     \
  } while (0)
#define SETP_INT(T)                                                         \
  do {                                                                      \
    switch (in->cmp) {                                                      \
    case C_EQ: SETP_LANES(T, ==); break;                                    \
    case C_NE: SETP_LANES(T, !=); break;                                    \
    case C_LT: case C_LO: SETP_LANES(T, <); break;                          \
    case C_LE: case C_LS: SETP_LANES(T, <=); break;                         \
    case C_GT: case C_HI: SETP_LANES(T, >); break;                          \
    default: SETP_LANES(T, >=);                                             \
    }                                                                       \
  } while (0)

/* A .sync warp instruction's wait for its member masks (warp_wait): the
   group parks, and the scheduler runs others. */
#define SYNC_WAIT()                                                         \
  (in->e >= 0 && warp_wait(wp, f, code, in, &em, depth ? 0 : wp->wait))

/* Runs the group of frame f until every lane of f has left it (RUN_DONE),
   or, at depth 0, every lane left waits at a barrier (RUN_BLOCKED). */
int exec_run(worker *w, warp *wp, frame *f, int depth) {
  const sim_module *m = w->rc->m;
  const ins *code = m->code;
  uint64_t executed = 0;
  uint32_t counted = ALL; /* the group's lanes: lanes(counted) */
  unsigned nlanes = 32;
  int result = RUN_DONE;
  if (f->mask & (depth ? 0 : wp->wait)) return RUN_BLOCKED; /* held at a
                                                               barrier */
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
    if (f->mask != counted) counted = f->mask, nlanes = lanes(counted);
    executed += nlanes;
    if (in->pre) {
      if (in->guard >= 0)
        em &= in->gneg ? ~wp->p[in->guard] : wp->p[in->guard];
      if (in->inval) span_forget(wp, in);
    }
    switch (in->x) { /* the fast forms; a break runs the general code */
    case X_NONE:
      break;
    /* each form its own case, for the width and space known in it */
#define FAST_LD(X, SH, N, SGN)                                              \
    case X: {                                                               \
      const uint64_t *Bs = R(in->base);                                     \
      uint64_t off = (uint64_t)in->off, *D = R(in->d[0]);                   \
      if (SH ? !span_ok(wp, in, em, Bs, off, N, 0, w->rc->nshared)          \
             : !global_span_ok(w, wp, in, em, Bs, off, N))                  \
        break;                                                              \
      uintptr_t h = (SH ? (uintptr_t)w->shared : 0) + (uintptr_t)off;      \
      LD_LANES(h, N, SGN);                                                  \
      f->pc++;                                                              \
      continue;                                                             \
    }
#define FAST_ST(X, SH, N)                                                   \
    case X: {                                                               \
      const uint64_t *Bs = R(in->base), *V = R(in->d[0]);                   \
      uint64_t off = (uint64_t)in->off;                                     \
      if (SH ? !span_ok(wp, in, em, Bs, off, N, 0, w->rc->nshared)          \
             : !global_span_ok(w, wp, in, em, Bs, off, N))                  \
        break;                                                              \
      uintptr_t h = (SH ? (uintptr_t)w->shared : 0) + (uintptr_t)off;      \
      ST_LANES(h, N);                                                       \
      f->pc++;                                                              \
      continue;                                                             \
    }
    FAST_LD(X_LD_SH4, 1, 4, 0)
    FAST_LD(X_LD_SH4S, 1, 4, 1)
    FAST_LD(X_LD_SH8, 1, 8, 0)
    FAST_LD(X_LD_GL4, 0, 4, 0)
    FAST_LD(X_LD_GL4S, 0, 4, 1)
    FAST_LD(X_LD_GL8, 0, 8, 0)
    FAST_ST(X_ST_SH4, 1, 4)
    FAST_ST(X_ST_SH8, 1, 8)
    FAST_ST(X_ST_GL4, 0, 4)
    FAST_ST(X_ST_GL8, 0, 8)
#undef FAST_LD
#undef FAST_ST
    case X_SETP_S32: case X_SETP_U32: case X_SETP_S64: case X_SETP_U64: {
      const uint64_t *A = R(in->a), *B = R(in->b);
      uint32_t v = 0;
      if (in->x == X_SETP_S32) SETP_INT(int32_t);
      else if (in->x == X_SETP_U32) SETP_INT(uint32_t);
      else if (in->x == X_SETP_S64) SETP_INT(int64_t);
      else SETP_INT(uint64_t);
      setp_write(wp, in, em, v);
      f->pc++;
      continue;
    }
    default: {
      uint64_t *D = R(in->d[0]);
      const uint64_t *A = R(in->a), *B = R(in->b < 0 ? in->a : in->b);
      switch (in->x) {
      case X_FMA_F32: {
        const uint64_t *C = R(in->c);
#ifdef SIM_X86_FMA
        if (w->rc->fma) {
          if (em != ALL || !exec_fma_f32_x86(D, A, B, C))
            fma_f32_host(em, D, A, B, C);
          break;
        }
#endif
        LOOP(D[l] = gpu_f32(fmaf(f32(A[l]), f32(B[l]), f32(C[l]))));
        break;
      }
      case X_ADD_F32: LOOP(D[l] = gpu_f32(f32(A[l]) + f32(B[l]))); break;
      case X_SUB_F32: LOOP(D[l] = gpu_f32(f32(A[l]) - f32(B[l]))); break;
      case X_MUL_F32: LOOP(D[l] = gpu_f32(f32(A[l]) * f32(B[l]))); break;
      case X_ADD_I: {
        uint64_t mk = zx(~0ull, in->tb);
        LOOP(D[l] = (A[l] + B[l]) & mk);
        break;
      }
      case X_SUB_I: {
        uint64_t mk = zx(~0ull, in->tb);
        LOOP(D[l] = (A[l] - B[l]) & mk);
        break;
      }
      case X_MUL_LO: {
        uint64_t mk = zx(~0ull, in->tb);
        LOOP(D[l] = (A[l] * B[l]) & mk);
        break;
      }
      case X_MUL_WIDE_S32:
        LOOP(D[l] = (uint64_t)((int64_t)(int32_t)A[l] * (int32_t)B[l]));
        break;
      case X_MUL_WIDE_U32:
        LOOP(D[l] = (uint64_t)(uint32_t)A[l] * (uint32_t)B[l]);
        break;
      case X_SHL_I: {
        unsigned bits = in->tb;
        uint64_t mk = zx(~0ull, in->tb);
        LOOP(uint32_t s_ = (uint32_t)B[l];
             D[l] = s_ >= bits ? 0 : (A[l] << s_) & mk);
        break;
      }
      case X_MAD_LO: {
        const uint64_t *C = R(in->c);
        uint64_t mk = zx(~0ull, in->tb);
        LOOP(D[l] = (A[l] * B[l] + C[l]) & mk);
        break;
      }
      case X_SHR_U: {
        unsigned bits = in->tb;
        uint64_t mk = zx(~0ull, in->tb);
        LOOP(uint32_t s_ = (uint32_t)B[l];
             D[l] = s_ >= bits ? 0 : (A[l] & mk) >> s_);
        break;
      }
      case X_SHR_S: {
        int bits = in->tb;
        uint64_t mk = zx(~0ull, in->tb);
        LOOP(uint32_t s_ = (uint32_t)B[l];
             D[l] = (uint64_t)(sx(A[l], bits)
                               >> (s_ >= (unsigned)bits ? bits - 1 : (int)s_)) & mk);
        break;
      }
      case X_SELP: {
        uint32_t c = in->e ? ~wp->p[in->c] : wp->p[in->c];
        LOOP(D[l] = (c >> l & 1) ? A[l] : B[l]);
        break;
      }
      case X_AND_I: LOOP(D[l] = A[l] & B[l]); break;
      case X_OR_I: LOOP(D[l] = A[l] | B[l]); break;
      case X_MOV: LOOP(D[l] = A[l]); break;
      case X_CVT_S64_S32: LOOP(D[l] = (uint64_t)(int64_t)(int32_t)A[l]); break;
      case X_CVT_U64_U32: case X_CVT_TO32: LOOP(D[l] = (uint32_t)A[l]); break;
      }
      f->pc++;
      continue;
    }
    }
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
    case OP_LD:
      if (ins_ld(w, wp, in, em, D)) goto fault;
      break;
    case OP_ST:
      if (ins_st(w, wp, in, em)) goto fault;
      break;
    case OP_ATOM:
      if (ins_atom(w, wp, in, em, D, A, B)) goto fault;
      break;
    case OP_REDUX:
      if (SYNC_WAIT()) continue;
      ins_redux(wp, in, em, D, A);
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
    case OP_SHFL:
      if (SYNC_WAIT()) continue;
      ins_shfl(wp, in, em, D, A, B, C);
      break;
    case OP_VOTE:
      if (SYNC_WAIT()) continue;
      ins_vote(wp, in, em, D);
      break;
    case OP_MATCH:
      if (SYNC_WAIT()) continue;
      ins_match(wp, in, em, D, A);
      break;
    case OP_WSYNC:
      if (SYNC_WAIT()) continue;
      break;
    case OP_HALF:
      ins_half(wp, in, em, D, A, B, C);
      break;
    case OP_CARRY:
      ins_carry(wp, in, em, D, A, B, C);
      break;
    case OP_SET:
      ins_set(wp, in, em, D, A, B);
      break;
    case OP_SREG: {
      uint64_t v = exec_sreg(w, in->d[0], w->executed + executed);
      LOOP(D[l] = v);
      break;
    }
    case OP_ACTIVEMASK: /* predicated-off lanes are not active */
      LOOP(D[l] = em);
      break;
    case OP_SETCOND:
      LOOP(cond_call(w, wp, l, in); if (w->fault) goto fault);
      break;
    case OP_TRAP:
      if (em) {
        exec_fault(w, wp, __builtin_ctz(em), in, SIM_LAUNCH_FAILED, "trap");
        goto fault;
      }
      break;
    case OP_BAR:
      if (depth) break; /* refused at load */
      if (in->cmp == BAR_RED) { /* the predicate counts as the lanes arrive */
        uint32_t pv = (in->e ? ~wp->p[in->c] : wp->p[in->c]) & em;
        w->red = 1;
        w->red_count += lanes(pv);
        w->red_none &= !pv;
        w->red_all &= pv == em;
      }
      wp->wait |= em;
      f->pc++;
      if (em == f->live) { /* the whole frame waits, as one group */
        w->executed += executed;
        return RUN_BLOCKED;
      }
      if (em == f->mask) {
        f->mask = 0; /* schedule afresh */
        for (uint32_t q = em; q; q &= q - 1) f->pcs[__builtin_ctz(q)] = f->pc;
      } else {
        /* the guarded-off lanes go on; the waiting ones step aside */
        for (uint32_t q = em; q; q &= q - 1) f->pcs[__builtin_ctz(q)] = f->pc;
        f->mask &= ~em;
      }
      continue;
    case OP_BRA: {
      int back = in->target <= f->pc;
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
      if (back && em && ++w->backs % SIM_BACKS == 0) {
        if (exec_late(w->rc)) {
          exec_fault(w, wp, __builtin_ctz(em), in, SIM_LAUNCH_TIMEOUT,
                     "still running after CUDA_SIM_TIMEOUT (%g s): a loop "
                     "that waits on another block's write?",
                     w->rc->timeout);
          goto fault;
        }
        if (!depth && w->nwarps > 1) { /* the others of the block go on */
          w->executed += executed;
          return RUN_YIELD;
        }
      }
      continue;
    }
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
      if (depth >= SIM_MAX_CALLS) {
        exec_fault(w, wp, __builtin_ctz(em), in, SIM_LAUNCH_FAILED,
                   "calls nested deeper than %d (the simulator's limit)",
                   SIM_MAX_CALLS);
        goto fault;
      }
      const func *g = m->funcs[in->fn];
      size_t pfs = m->pframe;
      for (int i = 0; i < in->vec; i++)
        LOOP(unsigned char *pf = wp->pf + (size_t)l * pfs;
             memmove(pf + g->in[i].off, pf + in->d[i], (size_t)g->in[i].size));
      frame sub;
      sub.pc = g->start;
      sub.other = INT_MAX;
      sub.live = sub.mask = em;
      sub.park = 0;
      sub.release = 0;
      w->executed += executed;
      executed = 0;
      int r = exec_run(w, wp, &sub, depth + 1);
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
      exec_fault(w, wp, 0, in, SIM_ILLEGAL_INSTRUCTION, "instruction not run");
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
