/* Which forms of each instruction the interpreter runs: the types,
   modifiers and operand counts for which it gives what PTX defines. Any
   other form is refused at load, naming the instruction and its line, so
   a module that loads runs as PTX says; nothing is left out silently. */
#define _POSIX_C_SOURCE 200809L
#include "ptx_dec.h"

#include <stdlib.h>

/* f16, bf16 and their pairs. */
int dec_is_half(int k, int b) {
  return (k == K_F && b == 16) || k == K_BF || k == K_H2 || k == K_BH2;
}

/* A half precision instruction OP_HALF runs, with the modifiers PTX gives
   it (.ftz and .sat only for f16, .relu only for fma, .rn the one
   rounding) and registers as sources; it becomes one. */
static int half_form(ins *in, const opnd *o, int n) {
  int op = in->op, f16 = in->tk == K_F || in->tk == K_H2;
  unsigned allowed = f16 ? F_FTZ : 0;
  if (op == OP_ADD || op == OP_SUB || op == OP_MUL || op == OP_FMA)
    allowed |= f16 ? F_SAT : 0;
  if (op == OP_FMA) allowed |= F_RELU;
  if (op == OP_MIN || op == OP_MAX) allowed |= F_NAN | F_XORSIGN;
  if (in->flags & ~allowed) return 0;
  if ((in->flags & F_SAT) && (in->flags & F_RELU)) return 0;
  int rn_ok = op == OP_ADD || op == OP_SUB || op == OP_MUL;
  if (op == OP_FMA ? in->rnd != R_N
      : in->rnd != R_NONE && !(in->rnd == R_N && rn_ok))
    return 0;
  if (op == OP_SETP && in->tk != K_H2 && in->tk != K_BH2 && in->d[1] >= 0)
    return 0; /* p|q: the pairs' */
  if ((op == OP_MIN || op == OP_MAX) && n != 3) return 0;
  for (int i = 1; i < n; i++)
    if (o[i].kind == O_IMM) return 0;
  in->op = OP_HALF;
  in->sub = (uint8_t)op;
  return 1;
}

/* cvt: .relu and .satfinite only to halves from f32 rounding .rn or .rz,
   a pair only from two f32; .ftz where an f32 is involved. */
static int cvt_form(const ins *in, int n) {
  int to_pair = in->op == OP_HALF;
  int from_f32 = in->t2k == K_F && in->t2b == 32;
  if (to_pair && (!from_f32 || n != 3 || (in->rnd != R_N && in->rnd != R_Z)))
    return 0;
  if (!to_pair && n != 2) return 0;
  if (in->t2k == K_H2 || in->t2k == K_BH2 || in->t2k == K_PRED
      || in->tk == K_PRED)
    return 0;
  if (in->flags & ~(F_FTZ | F_SAT | F_RELU | F_SATFINITE)) return 0;
  if (in->flags & (F_RELU | F_SATFINITE))
    return dec_is_half(in->tk, in->tb) && from_f32
           && (in->rnd == R_N || in->rnd == R_Z);
  /* what ptxas refuses (sm_90): .sat of a bf16 conversion or of one that
     cannot overflow, and bf16 from and to 8-bit integers */
  int dk = in->tk, db = in->tb, sk = in->t2k, sb = in->t2b;
  int dint = dk == K_U || dk == K_S || dk == K_B;
  int sint = sk == K_U || sk == K_S || sk == K_B;
  if ((dk == K_BF && sint && sb == 8) || (sk == K_BF && dint && db == 8))
    return 0;
  if (!(in->flags & F_SAT)) return 1;
  if (dk == K_BF || sk == K_BF) return 0;
  return !(dint && sint && (dk == K_S ? (sk == K_S ? sb <= db : sb < db)
                                      : sk != K_S && sb <= db));
}

/* set: the result's type u32, s32, f32, f16 or bf16 (u16 and s16 too for
   a half), a pair's u32, s32 or the pair; .ftz only for f32 and f16. */
static int set_form(const ins *in, int n) {
  int k = in->tk, b = in->tb, dk = in->t2k, db = in->t2b;
  int i32 = (dk == K_U || dk == K_S) && db == 32;
  if (k == K_PRED || n != (in->bop ? 4 : 3)) return 0;
  if ((in->flags & ~F_FTZ) || in->rnd != R_NONE) return 0;
  if ((in->flags & F_FTZ) && !(k == K_F && b != 64) && k != K_H2) return 0;
  if (k == K_H2 || k == K_BH2) return i32 || dk == k;
  if (dk == K_H2 || dk == K_BH2) return 0;
  return i32 || (dk == K_F && db == 32 && !dec_is_half(k, b)) || dec_is_half(dk, db)
         || ((dk == K_U || dk == K_S) && db == 16 && dec_is_half(k, b));
}

/* in as decoded from operation op with n operands (o): 1 when the
   interpreter runs it as PTX defines it. Flags, roundings and spaces are
   taken only where they apply, .ftz and .sat only where the interpreter
   applies them (vectors only on ld and st: refused before). */
int dec_form(ins *in, int op, int n, const opnd *o) {
  int k = in->tk, b = in->tb;
  int f32 = k == K_F && b == 32, f64 = k == K_F && b == 64;
  int integer = k == K_B || k == K_U || k == K_S;
  unsigned f = in->flags & ~(F_SYNC | F_UNI);
  int rnd = in->rnd, frnd = rnd >= R_N && rnd <= R_P, plain = !f && !rnd;
  int sp = in->space;
  if (b == 128 || in->t2b == 128) return 0;
  if (sp && op != OP_LD && op != OP_ST && op != OP_ATOM && op != OP_CVTA
      && op != OP_ISSPACEP && op != OP_NOP)
    return 0;
  if (dec_is_half(k, b)) {
    switch (op) {
    case OP_ADD: case OP_SUB: case OP_MUL: case OP_FMA: case OP_NEG:
    case OP_ABS: case OP_MIN: case OP_MAX: case OP_SETP:
      return half_form(in, o, n);
    case OP_MOV: case OP_LD: case OP_ST: case OP_SELP: case OP_CVT:
    case OP_SET: case OP_ATOM:
      break; /* moves, conversions, set, and the atomics below */
    default:
      return 0;
    }
  }
  if (f & (F_CC | F_CIN)) { /* extended precision: add.cc, addc, sub.cc,
                               subc, mad.cc, madc of 32 and 64 bits */
    if (!(op == OP_ADD || op == OP_SUB || op == OP_MAD) || rnd
        || (k != K_U && k != K_S) || (b != 32 && b != 64)
        || (f & ~(F_CC | F_CIN | (op == OP_MAD ? F_HI : 0))))
      return 0;
    in->sub = (uint8_t)op;
    in->op = OP_CARRY;
    return 1;
  }
  switch (op) {
  case OP_ADD: case OP_SUB:
    if (f32) return !(f & ~(F_FTZ | F_SAT)) && rnd <= R_P;
    if (f64) return !f && rnd <= R_P;
    return integer && !rnd && (!f || (f == F_SAT && k == K_S && b == 32));
  case OP_MUL: case OP_MAD: /* mad of floats only with a rounding */
    if (f32) return !(f & ~(F_FTZ | F_SAT)) && (op == OP_MAD ? frnd : rnd <= R_P);
    if (f64) return !f && (op == OP_MAD ? frnd : rnd <= R_P);
    if (!integer || rnd || (f & ~(F_HI | F_WIDE)) || f == (F_HI | F_WIDE))
      return 0;
    return !(f & F_WIDE) || b <= 32;
  case OP_FMA:
    if (f32) return !(f & ~(F_FTZ | F_SAT)) && frnd;
    return f64 && !f && frnd;
  case OP_DIV:
    if (f32) return !(f & ~(F_FTZ | F_APPROX)) && (!(f & F_APPROX) || !rnd)
                    && rnd <= R_P;
    if (f64) return !f && rnd <= R_P;
    return integer && plain;
  case OP_REM:
    return integer && plain;
  case OP_ABS: case OP_NEG:
    if (f32) return !(f & ~F_FTZ) && !rnd;
    return (f64 || integer) && plain;
  case OP_MIN: case OP_MAX: /* two operands (three are sm_100's) */
    if (n != 3 || rnd) return 0;
    if (f32) return !(f & ~(F_FTZ | F_NAN | F_XORSIGN));
    return (f64 || integer) && !f;
  case OP_EX2: case OP_LG2: case OP_SIN: case OP_COS: case OP_TANH:
    return f32 && (f & F_APPROX) && !(f & ~(F_APPROX | F_FTZ)) && !rnd
           && !(op == OP_TANH && (f & F_FTZ)); /* tanh has no .ftz */
  case OP_RCP: case OP_SQRT:
    if (f32)
      return !(f & ~(F_APPROX | F_FTZ)) && ((f & F_APPROX) ? !rnd : frnd);
    if (f64) return f ? f == (F_APPROX | F_FTZ) && op == OP_RCP && !rnd : frnd;
    return 0;
  case OP_RSQRT:
    return (f32 || f64) && (f & F_APPROX) && !(f & ~(F_APPROX | F_FTZ)) && !rnd;
  case OP_COPYSIGN: case OP_TESTP:
    return (f32 || f64) && plain;
  case OP_SETP:
    return !rnd && (!f || (f == F_FTZ && f32));
  case OP_SLCT:
    return !rnd && (!f || (f == F_FTZ && in->t2k == K_F && in->t2b == 32));
  case OP_CVT:
    return cvt_form(in, n);
  case OP_SET:
    return set_form(in, n);
  case OP_CVTA: /* to a generic address only of 64 bits */
    return !(f & ~F_TO) && !rnd && ((f & F_TO) || b == 64)
           && (sp == SP_GLOBAL || sp == SP_SHARED || sp == SP_LOCAL
               || sp == SP_CONST);
  case OP_ISSPACEP:
    return plain && (sp == SP_GLOBAL || sp == SP_SHARED || sp == SP_LOCAL);
  case OP_ATOM: /* .noftz: the halves' add; floats only add */
    if (rnd || (f & ~F_NOFTZ)) return 0;
    if (dec_is_half(k, b)) return in->cmp == A_ADD && f == F_NOFTZ;
    return !f && (k != K_F || in->cmp == A_ADD);
  case OP_MUL24: case OP_MAD24:
    return (k == K_U || k == K_S) && b == 32 && plain;
  case OP_SAD:
    return integer && plain;
  case OP_SHF: case OP_PRMT: case OP_LOP3: case OP_BMSK: case OP_SZEXT:
    return b == 32 && plain
           && n == 3 + (op == OP_SHF || op == OP_PRMT) + 2 * (op == OP_LOP3);
  case OP_BFIND:
    return !(f & ~F_SHIFTAMT) && !rnd;
  case OP_BAR: /* bar.sync id and bar.red: the whole block; a thread count
                  is not run */
    return n <= (in->cmp == BAR_RED ? 3 : 1) && plain;
  default:
    return plain;
  }
}

/* The fast form of in (ptx_int.h), or X_NONE: only where the fast form
   gives exactly what the general code gives for in. */
static int fast_form(const ins *in) {
  int k = in->tk, b = in->tb, op = in->op, sp = in->space;
  int integer = k == K_B || k == K_U || k == K_S;
  int f32 = k == K_F && b == 32;
  int rn = in->rnd == R_NONE || in->rnd == R_N;
  switch (op) {
  case OP_LD: case OP_ST:
    if (in->vec != 1 || in->base < 0 || (b != 32 && b != 64)) return X_NONE;
    if (sp == SP_SHARED)
      return op == OP_ST ? (b == 32 ? X_ST_SH4 : X_ST_SH8)
             : b == 64 ? X_LD_SH8 : k == K_S ? X_LD_SH4S : X_LD_SH4;
    if (sp == SP_GLOBAL)
      return op == OP_ST ? (b == 32 ? X_ST_GL4 : X_ST_GL8)
             : b == 64 ? X_LD_GL8 : k == K_S ? X_LD_GL4S : X_LD_GL4;
    return X_NONE;
  case OP_FMA: case OP_MAD: case OP_ADD: case OP_SUB: case OP_MUL:
    if (f32) {
      if ((in->flags & (F_FTZ | F_SAT)) || !rn) return X_NONE;
      return op == OP_FMA || op == OP_MAD ? X_FMA_F32 : op == OP_ADD ? X_ADD_F32
             : op == OP_SUB ? X_SUB_F32 : X_MUL_F32;
    }
    if (op == OP_MAD && integer && !in->flags) return X_MAD_LO;
    if (!integer || in->flags & ~F_WIDE || op == OP_FMA || op == OP_MAD)
      return X_NONE;
    if (in->flags & F_WIDE)
      return op == OP_MUL && b == 32 ? (k == K_S ? X_MUL_WIDE_S32
                                                 : X_MUL_WIDE_U32) : X_NONE;
    return op == OP_ADD ? X_ADD_I : op == OP_SUB ? X_SUB_I : X_MUL_LO;
  case OP_SHL:
    return X_SHL_I;
  case OP_SHR:
    return k == K_S ? X_SHR_S : X_SHR_U;
  case OP_SELP:
    return X_SELP;
  case OP_AND: case OP_OR:
    return k == K_PRED ? X_PLOGIC : op == OP_AND ? X_AND_I : X_OR_I;
  case OP_XOR:
    return k == K_PRED ? X_PLOGIC : X_NONE;
  case OP_BRA:
    return X_BRA;
  case OP_MOV:
    return k == K_PRED ? X_NONE : X_MOV;
  case OP_SETP: /* signed: the signed comparisons only */
    if (!integer || (b != 32 && b != 64) || in->flags) return X_NONE;
    if (k == K_S ? in->cmp > C_GE : in->cmp > C_HS) return X_NONE;
    switch (in->cmp) {
    case C_EQ: return X_SETP_EQ;
    case C_NE: return X_SETP_NE;
    case C_LT: case C_LO: return X_SETP_LT;
    case C_LE: case C_LS: return X_SETP_LE;
    case C_GT: case C_HI: return X_SETP_GT;
    default: return X_SETP_GE;
    }
  case OP_CVTA:
    return sp == SP_GLOBAL || sp == SP_CONST ? X_MOV : X_NONE;
  case OP_CVT: {
    int sk = in->t2k, sb = in->t2b;
    if (k == K_S && sk == K_S && b == 64 && sb == 32) return X_CVT_S64_S32;
    if ((k == K_U || k == K_B) && b == 64 && sb == 32 && (sk == K_U || sk == K_B))
      return X_CVT_U64_U32;
    if (integer && (sk == K_B || sk == K_U || sk == K_S) && b == 32
        && (sb == 32 || sb == 64) && !(in->flags & F_SAT))
      return X_CVT_TO32;
    return X_NONE;
  }
  default:
    return X_NONE;
  }
}

/* 0 when out of memory. */
int dec_fast_forms(sim_module *m) {
  unsigned char *base = calloc((size_t)m->nslots + 1, 1);
  if (!base) return 0;
  for (size_t i = 0; i < m->ncode; i++) {
    ins *in = &m->code[i];
    in->x = (uint8_t)fast_form(in);
    if (in->x >= X_LD_SH4 && in->x <= X_ST_GL8) base[in->base] = 1;
  }
  for (size_t i = 0; i < m->ncode; i++) { /* d[]: slots written (a
                                             predicate's index too) */
    ins *in = &m->code[i];
    for (int j = 0; j < 4 && in->op != OP_CALL && in->op != OP_ASSERT; j++)
      if (in->d[j] >= 0 && in->d[j] < m->nslots && base[in->d[j]])
        in->inval = 1;
    in->pre = in->inval || in->guard >= 0;
  }
  free(base);
  return 1;
}
