/* The interpreter's loop: a warp's group of lanes, instruction by
   instruction, each over the group's lanes; control flow moves the group
   or splits it, and the scheduler picks the next. Built for any CPU, and
   again with EXEC_VARIANT for x86-64 CPUs with AVX2 (exec_run_avx2) and
   AVX-512 (exec_run_avx512), whose lane loops vectorize wider (the
   Makefile's SIM_VARIANTS); sim_run picks the widest the host runs. */
#define _GNU_SOURCE
#ifdef EXEC_VARIANT
#define EXEC_CAT2(a, b) a##_##b
#define EXEC_CAT(a, b) EXEC_CAT2(a, b)
#define exec_run EXEC_CAT(exec_run, EXEC_VARIANT)
#endif
#include "ptx_alu.h"
#include "ptx_half.h"
#include "ptx_mem.h"
#include "ptx_warp.h"

#include <limits.h>

#ifndef EXEC_VARIANT
int exec_read(worker *w, warp *wp, int lane, const ins *in, uint64_t p,
              void *v, size_t n) {
  const unsigned char *h = addr_of(w, wp, lane, in, SP_GENERIC, p,
                                   (unsigned)n, 0);
  if (h) memcpy(v, h, n);
  return h != NULL;
}
#endif

/* -- the interpreter ------------------------------------------------------ */

/* The bit of each lane, for loops the compiler vectorizes. */
static const uint32_t lane_bit32[32] = {
  1u << 0, 1u << 1, 1u << 2, 1u << 3, 1u << 4, 1u << 5, 1u << 6, 1u << 7,
  1u << 8, 1u << 9, 1u << 10, 1u << 11, 1u << 12, 1u << 13, 1u << 14,
  1u << 15, 1u << 16, 1u << 17, 1u << 18, 1u << 19, 1u << 20, 1u << 21,
  1u << 22, 1u << 23, 1u << 24, 1u << 25, 1u << 26, 1u << 27, 1u << 28,
  1u << 29, 1u << 30, 1u << 31,
};

/* The expanded masks of the lanes of m (the warp's cache k): all ones a
   word where m's bit is set. */
static inline const uint64_t *lane_masks(warp *wp, int k, uint32_t m) {
  if (wp->kmask[k] != m) {
    for (int l = 0; l < 32; l++)
      wp->km[k][l] = 0 - (uint64_t)((m & lane_bit32[l]) != 0);
    wp->kmask[k] = m;
  }
  return wp->km[k];
}

/* D[l] = EXPR for each lane l of em, in the fast forms: every lane's is
   computed (no fast form traps or writes anything else; a lane outside
   em computes from what its registers hold), and written when all (no
   lane of the warp but em's is left to run: the others exited), else
   em's kept, so that the loop has no branch a lane and vectorizes
   whatever em is; without AVX2, whose blend costs more than it saves,
   only em's lanes are visited. With AVX-512 em's lanes are blended in
   under a mask register (no expanded masks to load), each vector stored
   whole (a masked store would not forward to the next instruction's
   loads). */
#if defined(__AVX512F__)
#define VLOOP_AS(ALL_, EXPR)                                                \
  do {                                                                      \
    if (ALL_) {                                                             \
      for (int l = 0; l < 32; l++) D[l] = (EXPR);                           \
    } else {                                                                \
      uint64_t T_[32];                                                      \
      for (int l = 0; l < 32; l++) T_[l] = (EXPR);                          \
      for (int c_ = 0; c_ < 32; c_ += 8)                                    \
        _mm512_storeu_si512(D + c_, _mm512_mask_mov_epi64(                  \
            _mm512_loadu_si512(D + c_), (__mmask8)(em >> c_),               \
            _mm512_loadu_si512(T_ + c_)));                                  \
    }                                                                       \
  } while (0)
#elif defined(__AVX2__)
#define VLOOP_AS(ALL_, EXPR)                                                \
  do {                                                                      \
    if (ALL_) {                                                             \
      for (int l = 0; l < 32; l++) D[l] = (EXPR);                           \
    } else {                                                                \
      const uint64_t *K_ = lane_masks(wp, 0, em);                           \
      for (int l = 0; l < 32; l++) D[l] = ((EXPR) & K_[l]) | (D[l] & ~K_[l]); \
    }                                                                       \
  } while (0)
#else
#define VLOOP_AS(ALL_, EXPR)                                                \
  do {                                                                      \
    if (ALL_) {                                                             \
      for (int l = 0; l < 32; l++) D[l] = (EXPR);                           \
    } else {                                                                \
      LOOP(D[l] = (EXPR));                                                  \
    }                                                                       \
  } while (0)
#endif
#ifdef __AVX2__
#define EVERY_LANE (em == counted && whole)
#else
#define EVERY_LANE (em == ALL)
#endif
#define VLOOP(EXPR) VLOOP_AS(EVERY_LANE, EXPR)

#ifdef SIM_X86_FMA
/* fma.rn.f32 of the lanes of em with the host's FMA instruction (where
   rc->fma says it has one): rounded once, as fmaf. */
__attribute__((target("fma"))) static void fma_f32_host(
    warp *wp, int all, uint32_t em, uint64_t *D, const uint64_t *A,
    const uint64_t *B, const uint64_t *C) {
  VLOOP_AS(all, gpu_f32(__builtin_fmaf(f32(A[l]), f32(B[l]), f32(C[l]))));
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
   joining them; parked lanes wait while others can run. With AVX2 each
   step is a loop over all 32 lanes, with no branch a lane (the lanes of
   a mask selected, not visited), which the compiler vectorizes. */
#ifdef __AVX2__
static void schedule(frame *f, uint32_t wait) {
  uint32_t group = f->mask;
  int at = f->pc, *pcs = f->pcs;
  for (int l = 0; l < 32; l++) pcs[l] = group & lane_bit32[l] ? at : pcs[l];
  uint32_t run = f->live & ~wait, go = run & ~f->park;
  f->release = run && !go;
  if (f->release) go = run;
  int min = INT_MAX;
  for (int l = 0; l < 32; l++) {
    int p = go & lane_bit32[l] ? pcs[l] : INT_MAX;
    min = p < min ? p : min;
  }
  uint32_t mask = 0;
  int other = INT_MAX;
  for (int l = 0; l < 32; l++) {
    int here = pcs[l] == min;
    mask |= run & lane_bit32[l] & (0u - (uint32_t)here);
    int p = go & lane_bit32[l] && !here ? pcs[l] : INT_MAX;
    other = p < other ? p : other;
  }
  f->park &= ~mask;
  f->mask = mask;
  f->pc = min;
  f->other = other;
}
#else
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
#endif

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

/* A .sync warp instruction's wait for its member masks (warp_wait): the
   group parks, and the scheduler runs others. */
#define SYNC_WAIT()                                                         \
  (in->e >= 0 &&                                                            \
   (f->pc = pc, warp_wait(wp, f, code, in, &em, depth ? 0 : wp->wait)))

/* Runs the group of frame f until every lane of f has left it (RUN_DONE),
   or, at depth 0, every lane left waits at a barrier (RUN_BLOCKED). */
int exec_run(worker *w, warp *wp, frame *f, int depth) {
  const sim_module *m = w->rc->m;
  const ins *code = m->code;
  uint64_t executed = 0;
  uint32_t counted = ALL; /* the group's lanes: lanes(counted) */
  unsigned nlanes = 32;
#ifdef __AVX2__
  int whole = 1; /* no lane of the warp left to run is outside counted */
#endif
  int result = RUN_DONE;
  if (f->mask & (depth ? 0 : wp->wait)) return RUN_BLOCKED; /* held at a
                                                               barrier */
  int pc = f->pc; /* f->pc, kept in a register: written back where the
                     frame is read elsewhere (SYNC, schedule) or left */
  for (;;) {
    if (pc >= f->other || !f->mask) {
      f->live &= ~wp->exited;
      f->mask &= ~wp->exited;
      f->pc = pc;
      schedule(f, depth ? 0 : wp->wait);
      pc = f->pc;
      if (!f->mask) {
        result = f->live ? RUN_BLOCKED : RUN_DONE;
        break;
      }
    }
    const ins *in = &code[pc];
    uint32_t em = f->mask;
    if (f->mask != counted) {
      counted = f->mask;
      nlanes = lanes(counted);
#ifdef __AVX2__
      whole = counted == ALL ||
              (!depth && !(f->live & ~counted & ~wp->exited));
#endif
    }
    executed += nlanes;
    if (in->pre) {
      if (in->guard >= 0)
        em &= in->gneg ? ~wp->p[in->guard] : wp->p[in->guard];
      if (in->inval) span_forget(wp, in);
    }
    /* the fast forms, each its own case; a break runs the general code */
#define OPS                                                                 \
    uint64_t *D = R(in->d[0]);                                              \
    const uint64_t *A = R(in->a), *B = R(in->b < 0 ? in->a : in->b)
#define NEXT                                                                \
    pc++;                                                                   \
    continue
    switch (in->x) {
    case X_NONE:
      break;
    /* each form its own case, for the width and space known in it */
#define FAST_LD(X, SH, N, SGN)                                              \
    case X: {                                                               \
      const uint64_t *Bs = R(in->base);                                     \
      uint64_t off = (uint64_t)in->off, *D = R(in->d[0]);                   \
      int64_t mn_, mx_;                                                     \
      if (SH ? !span_ok(wp, in, em, Bs, off, N, 0, w->rc->nshared, &mn_,    \
                        &mx_)                                               \
             : !global_span_ok(w, wp, in, em, Bs, off, N, 0))               \
        break;                                                              \
      uintptr_t h = (SH ? (uintptr_t)w->shared : 0) + (uintptr_t)off;      \
      LD_LANES(h, N, SGN);                                                  \
      NEXT;                                                                 \
    }
#define FAST_ST(X, SH, N)                                                   \
    case X: {                                                               \
      const uint64_t *Bs = R(in->base), *V = R(in->d[0]);                   \
      uint64_t off = (uint64_t)in->off;                                     \
      int64_t mn_, mx_;                                                     \
      if (SH ? !span_ok(wp, in, em, Bs, off, N, 0, w->rc->nshared, &mn_,    \
                        &mx_)                                               \
             : !global_span_ok(w, wp, in, em, Bs, off, N, 1))               \
        break;                                                              \
      uintptr_t h = (SH ? (uintptr_t)w->shared : 0) + (uintptr_t)off;      \
      ST_LANES(h, N);                                                       \
      NEXT;                                                                 \
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
    case X_SETP_EQ: { OPS; (void)D; SETP_FAST(==, C_EQ); NEXT; }
    case X_SETP_NE: { OPS; (void)D; SETP_FAST(!=, C_NE); NEXT; }
    case X_SETP_LT: { OPS; (void)D; SETP_FAST(<, C_LT); NEXT; }
    case X_SETP_LE: { OPS; (void)D; SETP_FAST(<=, C_LE); NEXT; }
    case X_SETP_GT: { OPS; (void)D; SETP_FAST(>, C_GT); NEXT; }
    case X_SETP_GE: { OPS; (void)D; SETP_FAST(>=, C_GE); NEXT; }
    case X_FMA_F32: {
      OPS;
      const uint64_t *C = R(in->c);
#ifdef SIM_X86_FMA
      if (w->rc->fma) {
        if (em != ALL || !exec_fma_f32_x86(D, A, B, C))
          fma_f32_host(wp, EVERY_LANE, em, D, A, B, C);
        NEXT;
      }
#endif
      LOOP(D[l] = gpu_f32(fmaf(f32(A[l]), f32(B[l]), f32(C[l]))));
      NEXT;
    }
    case X_ADD_F32: { OPS; VLOOP(gpu_f32(f32(A[l]) + f32(B[l]))); NEXT; }
    case X_SUB_F32: { OPS; VLOOP(gpu_f32(f32(A[l]) - f32(B[l]))); NEXT; }
    case X_MUL_F32: { OPS; VLOOP(gpu_f32(f32(A[l]) * f32(B[l]))); NEXT; }
    case X_ADD_I: { OPS; uint64_t mk = zx(~0ull, in->tb); VLOOP((A[l] + B[l]) & mk); NEXT; }
    case X_SUB_I: { OPS; uint64_t mk = zx(~0ull, in->tb); VLOOP((A[l] - B[l]) & mk); NEXT; }
    case X_MUL_LO: { /* of 32 bits: the product of the low halves */
      OPS;
      if (in->tb == 32) VLOOP((uint32_t)((uint64_t)(uint32_t)A[l] * (uint32_t)B[l]));
      else VLOOP((A[l] * B[l]) & zx(~0ull, in->tb));
      NEXT;
    }
    case X_MUL_WIDE_S32:
      { OPS; VLOOP((uint64_t)((int64_t)(int32_t)A[l] * (int32_t)B[l])); NEXT; }
    case X_MUL_WIDE_U32:
      { OPS; VLOOP((uint64_t)(uint32_t)A[l] * (uint32_t)B[l]); NEXT; }
    /* shifts: by an immediate (the same in every lane), or each lane's */
    case X_SHL_I: {
      OPS;
      unsigned bits = in->tb;
      uint64_t mk = zx(~0ull, in->tb);
      if (in->b >= m->const_base) {
        uint32_t n = (uint32_t)B[0];
        if (n >= bits) mk = 0;
        n &= 63;
        VLOOP((A[l] << n) & mk);
      } else {
        VLOOP((uint32_t)B[l] >= bits ? 0 : (A[l] << ((uint32_t)B[l] & 63)) & mk);
      }
      NEXT;
    }
    case X_MAD_LO: {
      OPS;
      const uint64_t *C = R(in->c);
      if (in->tb == 32)
        VLOOP((uint32_t)((uint64_t)(uint32_t)A[l] * (uint32_t)B[l] + C[l]));
      else
        VLOOP((A[l] * B[l] + C[l]) & zx(~0ull, in->tb));
      NEXT;
    }
    case X_SHR_U: {
      OPS;
      unsigned bits = in->tb;
      uint64_t mk = zx(~0ull, in->tb);
      if (in->b >= m->const_base) {
        uint32_t n = (uint32_t)B[0];
        if (n >= bits) mk = 0;
        n &= 63;
        VLOOP((A[l] & mk) >> n);
      } else {
        VLOOP((uint32_t)B[l] >= bits ? 0 : (A[l] & mk) >> ((uint32_t)B[l] & 63));
      }
      NEXT;
    }
    case X_SHR_S: {
      OPS;
      int bits = in->tb;
      uint64_t mk = zx(~0ull, in->tb);
      VLOOP((uint64_t)(sx(A[l], bits) >> ((uint32_t)B[l] >= (unsigned)bits
                                         ? bits - 1 : (int)(uint32_t)B[l])) & mk);
      NEXT;
    }
    case X_SELP: {
      OPS;
      uint32_t c = in->e ? ~wp->p[in->c] : wp->p[in->c];
#ifdef __AVX2__
      VLOOP(c & lane_bit[l] ? A[l] : B[l]);
#else /* (no branch a lane) */
      VLOOP(B[l] ^ ((A[l] ^ B[l]) & (0 - (uint64_t)(c >> l & 1))));
#endif
      NEXT;
    }
    case X_AND_I: { OPS; VLOOP(A[l] & B[l]); NEXT; }
    case X_OR_I: { OPS; VLOOP(A[l] | B[l]); NEXT; }
    case X_MOV: { OPS; (void)B; VLOOP(A[l]); NEXT; }
    case X_CVT_S64_S32: { OPS; (void)B; VLOOP((uint64_t)(int64_t)(int32_t)A[l]); NEXT; }
    case X_CVT_U64_U32: case X_CVT_TO32:
      { OPS; (void)B; VLOOP((uint64_t)(uint32_t)A[l]); NEXT; }
    case X_BRA: { /* (every bra) */
      int back = in->target <= pc;
      if (em == f->mask) {
        pc = in->target;
      } else if (!em) {
        pc++;
      } else if (back && in->target < f->other && !f->park) {
        /* a loop's lanes leave it: the taken ones run on alone, the
           lowest PC (what schedule would pick: no other lane of the
           frame is before f->other, none parked) */
        for (uint32_t q = f->mask & ~em; q; q &= q - 1)
          f->pcs[__builtin_ctz(q)] = pc + 1;
        if (pc + 1 < f->other) f->other = pc + 1;
        f->mask = em;
        f->release = 0;
        pc = in->target;
      } else { /* the group splits: the taken lanes and the others */
        for (uint32_t q = em; q; q &= q - 1) f->pcs[__builtin_ctz(q)] = in->target;
        for (uint32_t q = f->mask & ~em; q; q &= q - 1)
          f->pcs[__builtin_ctz(q)] = pc + 1;
        f->mask = 0;
      }
      if (back && em && ++w->backs % SIM_BACKS == 0) {
        if (exec_late(w->rc)) {
          exec_fault(w, wp, __builtin_ctz(em), in, SIM_LAUNCH_TIMEOUT,
                     "still running after CUDA_SIM_TIMEOUT (%g s): a loop "
                     "that waits on another block's write?",
                     w->rc->timeout);
          goto fault;
        }
        if (exec_stopped(w->rc)) {
          w->fault = SIM_STOPPED;
          goto fault;
        }
        if (!depth && w->nwarps > 1) { /* the others of the block go on */
          w->executed += executed;
          f->pc = pc;
          return RUN_YIELD;
        }
      }
      continue;
    }
    case X_PLOGIC: { /* and, or, xor of predicates (either negated) */
      uint32_t x = wp->p[in->a], y = wp->p[in->b], v;
      if (in->bop & 1) x = ~x;
      if (in->bop & 2) y = ~y;
      v = in->op == OP_AND ? x & y : in->op == OP_OR ? x | y : x ^ y;
      wp->p[in->d[0]] = (wp->p[in->d[0]] & ~em) | (v & em);
      NEXT;
    }
    }
#undef OPS
#undef NEXT
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
    case OP_SHFL:
      if (SYNC_WAIT()) continue;
      ins_shfl(wp, in, em, D, A, B, C);
      break;
    case OP_TEX: case OP_SULD: case OP_SUST:
      if (ins_texture(w, wp, in, em)) goto fault;
      break;
    case OP_GRIDDEP:
      if (em) exec_griddep(w, wp, in, em);
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
    case OP_PRINTF:
      if (exec_printf(w, wp, in, em)) goto fault;
      break;
    case OP_ASSERT:
      if (em && exec_assert(w, wp, in, em)) goto fault;
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
      pc++;
      if (em == f->live) { /* the whole frame waits, as one group */
        w->executed += executed;
        f->pc = pc;
        return RUN_BLOCKED;
      }
      if (em == f->mask) {
        f->mask = 0; /* schedule afresh */
        for (uint32_t q = em; q; q &= q - 1) f->pcs[__builtin_ctz(q)] = pc;
      } else {
        /* the guarded-off lanes go on; the waiting ones step aside */
        for (uint32_t q = em; q; q &= q - 1) f->pcs[__builtin_ctz(q)] = pc;
        f->mask &= ~em;
      }
      continue;
    case OP_EXIT:
      wp->exited |= em;
      f->live &= ~em;
      f->mask &= ~em;
      pc++;
      continue;
    case OP_RET:
      if (!depth) {
        wp->exited |= em;
      }
      f->live &= ~em;
      f->mask &= ~em;
      pc++;
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
      if (exec_alu(wp, in, em, D, A, B, C)) break;
      exec_fault(w, wp, 0, in, SIM_ILLEGAL_INSTRUCTION, "instruction not run");
      goto fault;
    }
    if (dir) fesetround(FE_TONEAREST);
    if ((in->flags & F_SAT) && isf32 && in->op != OP_CVT) /* .sat: [0, 1] */
      LOOP(D[l] = bf(sat32(f32(D[l]))));
    pc++;
    continue;
  fault: /* (from a fast form too, before dir is known) */
    fesetround(FE_TONEAREST);
    w->executed += executed;
    f->pc = pc;
    return RUN_FAULT;
  }
  w->executed += executed;
  return result;
}
