/* Instructions: the opcode table, modifiers, operands checked against
   what the interpreter runs, and calls. What it does not run is refused,
   naming the instruction and its line. */
#define _POSIX_C_SOURCE 200809L
#include "ptx_dec.h"

#include <stdlib.h>

/* -- instructions --------------------------------------------------------- */

typedef struct mods {
  uint8_t tk[3], tb[3];
  int nt;
  ins *in;
  const char *base;
  int baselen;
} mods;

/* Words that change nothing the simulator can show: caching, ordering
   (everything is sequentially consistent here), scopes, alignment hints. */
static int ignorable(const char *s, int len) {
  static const char *const w[] = {
    "ca", "cg", "cs", "lu", "cv", "nc", "wb", "wt", "volatile", "relaxed",
    "acquire", "release", "acq_rel", "weak", "sc", "cta", "gpu", "sys",
    "cluster", "aligned", "uni", "L2::64B", "L2::128B", "L2::256B",
    "L1::evict_last", "L1::evict_first", "L1::evict_normal",
    "L1::no_allocate", "L1::evict_unchanged", "L2::evict_last",
    "L2::evict_first", "L2::evict_normal", "L2::cache_hint",
  };
  for (size_t i = 0; i < sizeof w / sizeof *w; i++)
    if (modw(s, len, w[i])) return 1;
  return 0;
}

static int op_of(const char *s, int len) {
  static const struct { const char *n; int op; } ops[] = {
    {"mov", OP_MOV}, {"add", OP_ADD}, {"sub", OP_SUB}, {"mul", OP_MUL},
    {"mad", OP_MAD}, {"fma", OP_FMA}, {"div", OP_DIV}, {"rem", OP_REM},
    {"abs", OP_ABS}, {"neg", OP_NEG}, {"min", OP_MIN}, {"max", OP_MAX},
    {"and", OP_AND}, {"or", OP_OR}, {"xor", OP_XOR}, {"not", OP_NOT},
    {"cnot", OP_CNOT}, {"shl", OP_SHL}, {"shr", OP_SHR}, {"shf", OP_SHF},
    {"bfe", OP_BFE}, {"bfi", OP_BFI}, {"brev", OP_BREV}, {"popc", OP_POPC},
    {"clz", OP_CLZ}, {"bfind", OP_BFIND}, {"prmt", OP_PRMT},
    {"setp", OP_SETP}, {"selp", OP_SELP}, {"slct", OP_SLCT},
    {"cvt", OP_CVT}, {"cvta", OP_CVTA}, {"ld", OP_LD}, {"ldu", OP_LD},
    {"st", OP_ST}, {"atom", OP_ATOM}, {"red", OP_ATOM}, {"bar", OP_BAR},
    {"barrier", OP_BAR}, {"membar", OP_NOP}, {"fence", OP_NOP},
    {"bra", OP_BRA}, {"call", OP_CALL}, {"ret", OP_RET}, {"exit", OP_EXIT},
    {"shfl", OP_SHFL}, {"vote", OP_VOTE}, {"match", OP_MATCH},
    {"activemask", OP_ACTIVEMASK}, {"ex2", OP_EX2}, {"lg2", OP_LG2},
    {"rcp", OP_RCP}, {"rsqrt", OP_RSQRT}, {"sqrt", OP_SQRT}, {"sin", OP_SIN},
    {"cos", OP_COS}, {"tanh", OP_TANH}, {"copysign", OP_COPYSIGN},
    {"testp", OP_TESTP}, {"trap", OP_TRAP}, {"isspacep", OP_ISSPACEP},
    {"mul24", OP_MUL24}, {"mad24", OP_MAD24}, {"sad", OP_SAD},
    {"lop3", OP_LOP3}, {"nanosleep", OP_NOP}, {"prefetch", OP_NOP},
    {"prefetchu", OP_NOP}, {"pmevent", OP_NOP}, {"redux", OP_REDUX},
    {"set", OP_SET}, {"bmsk", OP_BMSK}, {"szext", OP_SZEXT},
    {"addc", OP_ADD}, {"subc", OP_SUB}, {"madc", OP_MAD},
    {"tex", OP_TEX}, {"suld", OP_SULD}, {"sust", OP_SUST},
    {"griddepcontrol", OP_GRIDDEP},
  };
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (modw(s, len, ops[i].n)) return ops[i].op;
  return -1;
}

/* Reads the words after the base name into in and the type list. */
static int parse_mods(dec *d, const tok *t, mods *md) {
  ins *in = md->in;
  const char *p = t->s + md->baselen, *end = t->s + t->len;
  int xorsign = 0, abs = 0, minmax = in->op == OP_MIN || in->op == OP_MAX;
  while (p < end) {
    const char *s = ++p; /* after '.' */
    while (p < end && *p != '.') p++;
    int len = (int)(p - s);
    uint8_t k, b;
    static const char *const cmps[] = {
      "eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ",
      "neu", "ltu", "leu", "gtu", "geu", "num", "nan"};
    static const char *const rnds[] = {"", "rn", "rz", "rm", "rp", "rni",
                                       "rzi", "rmi", "rpi"};
    static const char *const spaces[] = {"", "global", "shared", "local",
                                         "param", "", "const"};
    static const char *const aops[] = {"add", "min", "max", "inc", "dec",
                                       "and", "or", "xor", "exch", "cas"};
    int done = 0;
    if (modw(s, len, "sync")) { /* bar.sync, and a warp's .sync forms */
      in->flags |= F_SYNC;
      continue;
    }
    if (dec_parse_type(s, len, &k, &b)) {
      if (md->nt == 3) return dec_fail(d, t->line, "too many types");
      md->tk[md->nt] = k, md->tb[md->nt++] = b;
      continue;
    }
    if (in->op == OP_SETP || in->op == OP_SET || in->op == OP_SLCT)
      for (int i = 0; i < 18 && !done; i++)
        if (modw(s, len, cmps[i])) in->cmp = (uint8_t)i, done = 1;
    if ((in->op == OP_SETP || in->op == OP_SET) && !done) {
      if (modw(s, len, "and")) in->bop = B_AND, done = 1;
      else if (modw(s, len, "or")) in->bop = B_OR, done = 1;
      else if (modw(s, len, "xor")) in->bop = B_XOR, done = 1;
    }
    if (in->op == OP_ATOM || in->op == OP_REDUX)
      for (int i = 0; i < 10 && !done; i++)
        if (modw(s, len, aops[i])) in->cmp = (uint8_t)i, done = 1;
    if (in->op == OP_SHFL) {
      static const char *const sm[] = {"up", "down", "bfly", "idx"};
      for (int i = 0; i < 4 && !done; i++)
        if (modw(s, len, sm[i])) in->cmp = (uint8_t)i, done = 1;
    }
    if (in->op == OP_VOTE) {
      static const char *const vm[] = {"all", "any", "uni", "ballot"};
      for (int i = 0; i < 4 && !done; i++)
        if (modw(s, len, vm[i])) in->cmp = (uint8_t)i, done = 1;
    }
    if (in->op == OP_MATCH && !done) {
      if (modw(s, len, "any")) in->cmp = 0, done = 1;
      else if (modw(s, len, "all")) in->cmp = 1, done = 1;
    }
    if (in->op == OP_TESTP && !done) {
      static const char *const tm[] = {"finite", "infinite", "number",
                                       "notanumber", "normal", "subnormal"};
      for (int i = 0; i < 6 && !done; i++)
        if (modw(s, len, tm[i])) in->cmp = (uint8_t)i, done = 1;
    }
    if (in->op == OP_SHF && !done) {
      if (modw(s, len, "l")) in->cmp = 0, done = 1;
      else if (modw(s, len, "r")) in->cmp = 1, done = 1;
    }
    if ((in->op == OP_SHF || in->op == OP_BMSK || in->op == OP_SZEXT)
        && !done) {
      if (modw(s, len, "wrap")) in->bop = 1, done = 1;
      else if (modw(s, len, "clamp")) in->bop = 0, done = 1;
    }
    if ((in->op == OP_TEX || in->op == OP_SULD || in->op == OP_SUST) && !done) {
      /* the geometry in cmp; surfaces' raw form .b, the out-of-bounds
         mode in bop (trap, clamp, zero) */
      if (modw(s, len, "1d")) in->cmp = 1, done = 1;
      else if (modw(s, len, "2d")) in->cmp = 2, done = 1;
      else if (modw(s, len, "3d")) in->cmp = 3, done = 1;
      else if (in->op != OP_TEX && modw(s, len, "b")) done = 1;
      else if (in->op != OP_TEX && modw(s, len, "trap")) in->bop = 0, done = 1;
      else if (in->op != OP_TEX && modw(s, len, "clamp")) in->bop = 1, done = 1;
      else if (in->op != OP_TEX && modw(s, len, "zero")) in->bop = 2, done = 1;
    }
    if (in->op == OP_GRIDDEP && !done && !in->cmp) { /* its one action */
      if (modw(s, len, "wait")) in->cmp = GD_WAIT, done = 1;
      else if (modw(s, len, "launch_dependents")) in->cmp = GD_LAUNCH, done = 1;
    }
    if (in->op == OP_PRMT && !done && len > 0)
      return dec_fail(d, t->line, "unsupported instruction '%.*s'", t->len,
                      t->s);
    for (int i = 1; i < 9 && !done; i++)
      if (modw(s, len, rnds[i])) in->rnd = (uint8_t)i, done = 1;
    for (int i = 1; i < 7 && !done; i++)
      if (*spaces[i] && modw(s, len, spaces[i])) in->space = (uint8_t)i, done = 1;
    if (done) continue;
    if (modw(s, len, "ftz")) in->flags |= F_FTZ;
    else if (modw(s, len, "sat")) in->flags |= F_SAT;
    else if (modw(s, len, "hi")) in->flags |= F_HI;
    else if (modw(s, len, "lo")) {}
    else if (modw(s, len, "wide")) in->flags |= F_WIDE;
    else if (modw(s, len, "approx") || modw(s, len, "full"))
      in->flags |= F_APPROX;
    else if (modw(s, len, "to")) in->flags |= F_TO;
    else if (modw(s, len, "shiftamt") && in->op == OP_BFIND)
      in->flags |= F_SHIFTAMT;
    else if (modw(s, len, "uni") && in->op == OP_BRA) in->flags |= F_UNI;
    else if (modw(s, len, "NaN") && minmax) in->flags |= F_NAN;
    else if (modw(s, len, "xorsign") && minmax) xorsign = 1;
    else if (modw(s, len, "abs") && minmax) abs = 1;
    else if (modw(s, len, "relu")) in->flags |= F_RELU;
    else if (modw(s, len, "satfinite")) in->flags |= F_SATFINITE;
    else if (modw(s, len, "noftz")) in->flags |= F_NOFTZ;
    else if (modw(s, len, "cc")) in->flags |= F_CC;
    else if (modw(s, len, "v2") || modw(s, len, "v4")) in->vec = (uint8_t)(s[1] - '0');
    else if (in->op == OP_BAR && modw(s, len, "warp")) in->cmp = BAR_WARP;
    else if (in->op == OP_BAR && modw(s, len, "red")) in->cmp = BAR_RED;
    else if (in->op == OP_BAR && modw(s, len, "popc")) in->bop = BR_POPC;
    else if (in->op == OP_BAR && modw(s, len, "and")) in->bop = BR_AND;
    else if (in->op == OP_BAR && modw(s, len, "or")) in->bop = BR_OR;
    else if (in->op == OP_NOP && (modw(s, len, "gl") || modw(s, len, "sc")
                                  || modw(s, len, "acq_rel")))
      {}
    else if (!ignorable(s, len) || (in->op == OP_BRA && !modw(s, len, "uni")))
      return dec_fail(d, t->line, "unsupported instruction '%.*s'", t->len,
                      t->s);
  }
  if (xorsign != abs) /* .xorsign.abs go together */
    return dec_fail(d, t->line, "unsupported instruction '%.*s'", t->len, t->s);
  if (xorsign) in->flags |= F_XORSIGN;
  return 1;
}

int dec_add_ins(dec *d, ins **out) {
  sim_module *m = d->m;
  if (!dec_grow((void **)&m->code, &d->ccode, m->ncode, sizeof *m->code) ||
      !dec_grow((void **)&m->locs, &d->clocs, m->ncode, sizeof *m->locs))
    return dec_fail(d, line_now(d), "out of memory");
  m->locs[m->ncode] = d->at;
  *out = &m->code[m->ncode++];
  memset(*out, 0, sizeof **out);
  (*out)->guard = -1;
  (*out)->base = -1;
  (*out)->a = (*out)->b = (*out)->c = (*out)->e = -1;
  (*out)->d[0] = (*out)->d[1] = (*out)->d[2] = (*out)->d[3] = -1;
  (*out)->target = (*out)->fn = -1;
  return 1;
}

/* Decodes one instruction whose opcode word is t; guard already parsed. */
int dec_instruction(dec *d, tok *t, int guard, int gneg) {
  const char *dot = memchr(t->s, '.', (size_t)t->len);
  int baselen = dot ? (int)(dot - t->s) : t->len;
  int op = op_of(t->s, baselen);
  if (op < 0)
    return dec_fail(d, t->line, "unsupported instruction '%.*s'", t->len, t->s);
  opnd o[6];
  int n = 0;
  if (op == OP_BRA) { /* bra[.uni] label: resolved at the function's end */
    tok *lt = next(d);
    if (!lt || !dec_expect(d, ";"))
      return dec_fail(d, t->line, "malformed '%.*s'", t->len, t->s);
    ins *in;
    if (!dec_add_ins(d, &in)) return 0;
    in->op = OP_BRA;
    in->line = t->line;
    in->guard = (int16_t)guard;
    in->gneg = (uint8_t)gneg;
    mods md = {{0}, {0}, 0, in, t->s, baselen};
    if (!parse_mods(d, t, &md)) return 0;
    if (!PUSH(d, d->fix, d->nfix, d->cfix)) return dec_fail(d, t->line, "out of memory");
    d->fix[d->nfix++] = (fixup){(int)(in - d->m->code), t->line, lt->s, lt->len};
    return 1;
  }
  if (!is(peek(d), ";")) {
    for (;;) {
      if (n == 6) return dec_fail(d, t->line, "too many operands");
      if (!dec_operand(d, &o[n++])) return 0;
      if (is(peek(d), ",")) { next(d); continue; }
      break;
    }
  }
  if (!dec_expect(d, ";")) return 0;
  for (int i = 0; i < n; i++) /* special registers read as it runs */
    if (o[i].kind == O_REG && o[i].r >= S_READ && o[i].r < NSPECIAL) {
      ins *rd;
      if (!dec_add_ins(d, &rd)) return 0;
      rd->op = OP_SREG;
      rd->d[0] = o[i].r;
      rd->line = t->line;
      if (o[i].r >= S_RESERVED_BEGIN && o[i].r <= S_RESERVED_1)
        d->m->reserved_smem = 1;
    }
  ins *in;
  if (!dec_add_ins(d, &in)) return 0;
  in->op = (uint8_t)op;
  in->line = t->line;
  in->guard = (int16_t)guard;
  in->gneg = (uint8_t)gneg;
  mods md = {{0}, {0}, 0, in, t->s, baselen};
  if (!parse_mods(d, t, &md)) return 0;
  if (modw(t->s, baselen, "addc") || modw(t->s, baselen, "subc")
      || modw(t->s, baselen, "madc"))
    in->flags |= F_CIN;
  if (in->vec && op != OP_LD && op != OP_ST && op != OP_TEX && op != OP_SULD
      && op != OP_SUST) /* vector atomics among them */
    return dec_fail(d, t->line, "unsupported instruction '%.*s'", t->len, t->s);
  in->tk = md.tk[0], in->tb = md.tb[0];
  in->t2k = md.nt > 1 ? md.tk[1] : md.tk[0];
  in->t2b = md.nt > 1 ? md.tb[1] : md.tb[0];
  int k = in->tk, b = in->tb;
#define SRC(i, kk, bb) ((i) < n ? dec_src_slot(d, &o[i], kk, bb, "operand") : \
                        (dec_fail(d, t->line, "missing operand of '%.*s'", t->len, t->s), -1))
#define DST(i) ((i) < n && o[i].kind == O_REG ? o[i].r : \
                (i) < n && o[i].kind == O_SINK ? dec_new_slots(d, 1) : \
                (dec_fail(d, t->line, "bad destination of '%.*s'", t->len, t->s), -1))
#define PRED(i) ((i) < n && o[i].kind == O_PRED ? o[i].r : \
                 (dec_fail(d, t->line, "expected a predicate in '%.*s'", t->len, t->s), -1))
  int unsupported = 0;
  switch (op) {
  case OP_NOP: case OP_TRAP: case OP_EXIT: break;
  case OP_RET: break;
  case OP_MOV:
    if (md.nt != 1) { unsupported = 1; break; }
    if (k == K_PRED) {
      in->d[0] = PRED(0);
      if (n > 1 && o[1].kind == O_PRED) in->a = o[1].r, in->bop = (uint8_t)o[1].neg;
      else if (n > 1 && o[1].kind == O_IMM) in->a = -2 - (int)(o[1].imm != 0);
      else unsupported = 1;
      break;
    }
    if (n > 1 && o[1].kind == O_VEC) { /* pack */
      in->op = OP_PACK;
      in->d[0] = DST(0);
      in->vec = (uint8_t)o[1].nv;
      for (int i = 0; i < o[1].nv; i++) {
        if (o[1].v[i] < 0) unsupported = 1;
        in->d[i] = i ? o[1].v[i] : in->d[i];
      }
      in->a = o[1].v[0];
      in->b = o[1].v[1];
      in->c = o[1].nv > 2 ? o[1].v[2] : -1;
      in->e = o[1].nv > 3 ? o[1].v[3] : -1;
      in->d[1] = in->d[2] = in->d[3] = -1;
      break;
    }
    if (n > 0 && o[0].kind == O_VEC) { /* unpack */
      in->op = OP_UNPACK;
      in->vec = (uint8_t)o[0].nv;
      for (int i = 0; i < o[0].nv; i++)
        in->d[i] = o[0].v[i] >= 0 ? o[0].v[i] : dec_new_slots(d, 1);
      in->a = SRC(1, K_B, b);
      break;
    }
    in->d[0] = DST(0);
    in->a = SRC(1, k, b);
    break;
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_REM:
  case OP_MIN: case OP_MAX: case OP_SHL: case OP_SHR: case OP_COPYSIGN:
  case OP_MUL24:
    if (k == K_PRED) { unsupported = 1; break; }
    in->d[0] = DST(0);
    in->a = SRC(1, k, b);
    in->b = SRC(2, (op == OP_SHL || op == OP_SHR) ? K_U : k,
                (op == OP_SHL || op == OP_SHR) ? 32 : b);
    break;
  case OP_AND: case OP_OR: case OP_XOR:
    if (k == K_PRED) {
      in->d[0] = PRED(0);
      in->a = PRED(1);
      in->b = PRED(2);
      in->bop = (uint8_t)((n > 1 && o[1].neg) | (n > 2 && o[2].neg) << 1);
      break;
    }
    in->d[0] = DST(0);
    in->a = SRC(1, k, b);
    in->b = SRC(2, k, b);
    break;
  case OP_NOT: case OP_CNOT:
    if (k == K_PRED) {
      in->d[0] = PRED(0);
      in->a = PRED(1);
      break;
    }
    /* fallthrough */
  case OP_ABS: case OP_NEG: case OP_BREV: case OP_POPC: case OP_CLZ:
  case OP_BFIND: case OP_EX2: case OP_LG2: case OP_RCP: case OP_RSQRT:
  case OP_SQRT: case OP_SIN: case OP_COS: case OP_TANH:
    if (k == K_PRED) { unsupported = 1; break; }
    in->d[0] = DST(0);
    in->a = SRC(1, k, b);
    break;
  case OP_MAD: case OP_FMA: case OP_SAD: case OP_MAD24:
    in->d[0] = DST(0);
    in->a = SRC(1, k, b);
    in->b = SRC(2, k, b);
    in->c = SRC(3, k, (in->flags & F_WIDE) ? 2 * b : b);
    if (in->flags & F_WIDE) in->t2b = (uint8_t)(2 * b);
    break;
  case OP_SHF: case OP_BFI: case OP_PRMT: case OP_LOP3:
    in->d[0] = DST(0);
    in->a = SRC(1, k, b);
    in->b = SRC(2, k, b);
    in->c = SRC(3, K_U, 32);
    if (op == OP_BFI) in->e = SRC(4, K_U, 32);
    if (op == OP_LOP3) in->e = SRC(4, K_U, 32);
    break;
  case OP_BMSK: case OP_SZEXT: /* bmsk.mode.b32, szext.mode.{u32,s32} */
    in->d[0] = DST(0);
    in->a = SRC(1, K_U, 32);
    in->b = SRC(2, K_U, 32);
    break;
  case OP_BFE:
    in->d[0] = DST(0);
    in->a = SRC(1, k, b);
    in->b = SRC(2, K_U, 32);
    in->c = SRC(3, K_U, 32);
    break;
  case OP_SETP:
    if (md.nt != 1) { unsupported = 1; break; }
    in->d[0] = PRED(0);
    in->d[1] = n > 0 ? o[0].r2 : -1;
    in->a = SRC(1, k, b);
    in->b = SRC(2, k, b);
    if (in->bop) {
      in->c = PRED(3);
      in->e = n > 3 && o[3].neg;
    }
    break;
  case OP_SET: /* set.CmpOp[.BoolOp].dtype.stype d, a, b[, {!}c] */
    if (md.nt != 2) { unsupported = 1; break; }
    in->tk = md.tk[1], in->tb = md.tb[1]; /* compared */
    in->t2k = md.tk[0], in->t2b = md.tb[0]; /* the result's */
    in->d[0] = DST(0);
    in->a = SRC(1, in->tk, in->tb);
    in->b = SRC(2, in->tk, in->tb);
    if (in->bop) {
      in->c = PRED(3);
      in->e = n > 3 && o[3].neg;
    }
    break;
  case OP_SELP:
    in->d[0] = DST(0);
    in->a = SRC(1, k, b);
    in->b = SRC(2, k, b);
    in->c = PRED(3);
    in->e = n > 3 && o[3].neg;
    break;
  case OP_SLCT:
    in->d[0] = DST(0);
    in->a = SRC(1, k, b);
    in->b = SRC(2, k, b);
    in->c = SRC(3, in->t2k, in->t2b);
    break;
  case OP_TESTP:
    in->d[0] = PRED(0);
    in->a = SRC(1, k, b);
    break;
  case OP_CVT: /* to a pair, cvt d, a, b: a to the high half */
    if (md.nt != 2) { unsupported = 1; break; }
    in->d[0] = DST(0);
    in->a = SRC(1, in->t2k, in->t2b);
    if (k == K_H2 || k == K_BH2) {
      in->b = SRC(2, in->t2k, in->t2b);
      in->op = OP_HALF;
      in->sub = OP_CVT;
    }
    break;
  case OP_CVTA:
    in->d[0] = DST(0);
    in->a = SRC(1, K_U, 64);
    break;
  case OP_ISSPACEP:
    in->d[0] = PRED(0);
    in->a = SRC(1, K_U, 64);
    break;
  case OP_LD: case OP_ST: {
    int mem = op == OP_LD ? 1 : 0, val = op == OP_LD ? 0 : 1;
    if (md.nt != 1 || n != 2 || o[mem].kind != O_MEM || k == K_PRED || b > 64) {
      unsupported = 1;
      break;
    }
    int space = in->space;
    if (o[mem].space == SP_PARAM || o[mem].space == SP_FPARAM) {
      if (space != SP_PARAM) { unsupported = 1; break; }
      space = o[mem].space;
    } else if (space == SP_PARAM) {
      space = d->fn->entry ? SP_PARAM : SP_FPARAM;
    }
    if (space == SP_GENERIC && o[mem].space == SP_SHARED)
      o[mem].off += (int64_t)GEN_SHARED;
    if (space == SP_GENERIC && o[mem].space == SP_LOCAL)
      o[mem].off += (int64_t)GEN_LOCAL;
    in->space = (uint8_t)space;
    in->base = o[mem].base;
    in->off = o[mem].off;
    if (in->base < 0 && space != SP_PARAM && space != SP_FPARAM)
      in->base = S_ZERO;
    int nv = in->vec ? in->vec : 1;
    if (in->vec && (o[val].kind != O_VEC || o[val].nv != nv)) {
      unsupported = 1;
      break;
    }
    for (int i = 0; i < nv; i++) {
      if (mem) { /* load */
        int r = in->vec ? o[val].v[i] : DST(val);
        in->d[i] = r >= 0 ? r : dec_new_slots(d, 1);
      } else if (in->vec) {
        if (o[val].v[i] < 0) { unsupported = 1; break; }
        in->d[i] = o[val].v[i];
      } else {
        in->d[i] = SRC(val, k, b);
      }
    }
    in->nd = (uint8_t)nv;
    in->vec = (uint8_t)nv;
    break;
  }
  case OP_ATOM: {
    int red = t->s[0] == 'r';
    int mem = red ? 0 : 1;
    int named = o[mem].space; /* of an address [symbol+offset] */
    if (md.nt != 1 || n < mem + 2 || o[mem].kind != O_MEM
        || (named >= 0 && named != SP_SHARED && named != SP_GLOBAL)) {
      unsupported = 1;
      break;
    }
    if (in->space != SP_GENERIC && in->space != SP_GLOBAL
        && in->space != SP_SHARED) { unsupported = 1; break; }
    if (in->space == SP_GENERIC && named == SP_SHARED)
      o[mem].off += (int64_t)GEN_SHARED;
    in->d[0] = red ? dec_new_slots(d, 1) : DST(0);
    in->base = o[mem].base >= 0 ? o[mem].base : S_ZERO;
    in->off = o[mem].off;
    in->a = SRC(mem + 1, k, b);
    if (in->cmp == A_CAS) in->b = SRC(mem + 2, k, b);
    break;
  }
  /* The member mask of a warp's .sync forms goes in e; the forms without
     .sync (vote, shfl) take the lanes running together. */
  case OP_REDUX: /* .add .min .max of u32 and s32; .and .or .xor of b32 */
    if (!(in->flags & F_SYNC) || n != 3 || md.nt != 1 || b != 32
        || (k != K_U && k != K_S && k != K_B)
        || (k == K_B) != (in->cmp == A_AND || in->cmp == A_OR
                          || in->cmp == A_XOR)
        || in->cmp == A_INC || in->cmp == A_DEC || in->cmp >= A_EXCH) {
      unsupported = 1;
      break;
    }
    in->d[0] = DST(0);
    in->a = SRC(1, k, b);
    in->e = SRC(2, K_U, 32);
    break;
  case OP_BAR:
    if (in->cmp == BAR_WARP) { /* bar.warp.sync membermask */
      if (!(in->flags & F_SYNC) || n != 1) { unsupported = 1; break; }
      in->op = OP_WSYNC;
      in->e = SRC(0, K_U, 32);
      break;
    }
    if (in->cmp == BAR_RED) { /* bar.red.popc.u32 d, a, {!}c; .and/.or.pred */
      if (n != 3 || o[2].kind != O_PRED || !in->bop
          || (in->bop == BR_POPC ? k != K_U || b != 32 : k != K_PRED)) {
        unsupported = 1;
        break;
      }
      in->d[0] = in->bop == BR_POPC ? DST(0) : PRED(0);
      in->a = SRC(1, K_U, 32);
      in->c = o[2].r;
      in->e = o[2].neg;
      break;
    }
    if (n > 0) in->a = SRC(0, K_U, 32);
    if (n > 1) in->b = SRC(1, K_U, 32);
    break;
  case OP_SHFL:
    if (n != ((in->flags & F_SYNC) ? 5 : 4) || in->tb != 32) {
      unsupported = 1;
      break;
    }
    in->d[0] = DST(0);
    in->d[1] = o[0].r2;
    in->a = SRC(1, K_B, 32);
    in->b = SRC(2, K_U, 32);
    in->c = SRC(3, K_U, 32);
    if (in->flags & F_SYNC) in->e = SRC(4, K_U, 32);
    break;
  case OP_VOTE:
    if (in->cmp == V_BALLOT) in->d[0] = DST(0);
    else in->d[0] = PRED(0);
    if (n != ((in->flags & F_SYNC) ? 3 : 2) || o[1].kind != O_PRED) {
      unsupported = 1;
      break;
    }
    in->a = o[1].r;
    in->bop = (uint8_t)o[1].neg;
    if (in->flags & F_SYNC) in->e = SRC(2, K_U, 32);
    break;
  case OP_MATCH: /* match.any.sync.b32 d, a, m; match.all.sync d[|p], a, m */
    if (!(in->flags & F_SYNC) || n != 3 || k != K_B || (b != 32 && b != 64)) {
      unsupported = 1;
      break;
    }
    in->d[0] = DST(0);
    in->d[1] = o[0].r2;
    in->a = SRC(1, k, b);
    in->e = SRC(2, K_U, 32);
    break;
  case OP_ACTIVEMASK:
    in->d[0] = DST(0);
    break;
  case OP_TEX: case OP_SULD: case OP_SUST: {
    /* tex.2d.v4.f32.f32 {d}, [t, {x, y}]; suld.b.2d.b32 {d}, [s, {x, y}];
       sust.b.2d.b32 [s, {x, y}], {v}: the handle in base, the coordinates
       in a, b, c (x in bytes for surfaces), the texels in d */
    int mem = op == OP_SUST ? 0 : 1, val = 1 - mem;
    int nv = in->vec ? in->vec : 1, dims = in->cmp;
    if (n != 2 || o[mem].kind != O_MEM || o[mem].base < 0 || dims < 1
        || o[mem].nv < dims || o[mem].nv > 4 || (op == OP_TEX && nv != 4)) {
      unsupported = 1;
      break;
    }
    if (op == OP_TEX && (md.nt != 2 || k != K_F || b != 32 ||
                         !((in->t2k == K_F || in->t2k == K_S) && in->t2b == 32))) {
      unsupported = 1;
      break;
    }
    if (op != OP_TEX && (md.nt != 1 || k != K_B || b > 64)) {
      unsupported = 1;
      break;
    }
    in->base = o[mem].base;
    int32_t *xyz[3] = { &in->a, &in->b, &in->c };
    for (int i = 0; i < dims; i++) {
      if (o[mem].v[i] < 0) { unsupported = 1; break; }
      *xyz[i] = o[mem].v[i];
    }
    for (int i = 0; i < nv && !unsupported; i++) {
      int r = o[val].kind == O_VEC ? (i < o[val].nv ? o[val].v[i] : -1)
            : i == 0 && o[val].kind == O_REG ? o[val].r : -1;
      if (r < 0 && op == OP_SUST) { unsupported = 1; break; }
      in->d[i] = r >= 0 ? r : dec_new_slots(d, 1);
    }
    in->nd = (uint8_t)nv;
    in->vec = (uint8_t)nv;
    break;
  }
  case OP_GRIDDEP: /* griddepcontrol.wait, .launch_dependents */
    unsupported = n || !in->cmp;
    break;
  case OP_CALL:
    break; /* the caller fills it in */
  default:
    unsupported = 1;
  }
  if (!d->failed && !unsupported) unsupported = !dec_form(in, op, n, o);
  if (d->failed) return 0;
  if (unsupported)
    return dec_fail(d, t->line, "unsupported instruction '%.*s'", t->len, t->s);
  return 1;
}

/* A call: call[.uni] [(ret),] name[, (args)]; the callee's .func. */
int dec_call(dec *d, tok *t, int guard, int gneg) {
  opnd o[3];
  int n = 0;
  for (;;) {
    if (n == 3) return dec_fail(d, t->line, "malformed call");
    if (!dec_operand(d, &o[n++])) return 0;
    if (is(peek(d), ",")) { next(d); continue; }
    break;
  }
  if (!dec_expect(d, ";")) return 0;
  int at = o[0].kind == O_LIST ? 1 : 0;
  if (at >= n || o[at].kind != O_FUNC)
    return dec_fail(d, t->line, "unsupported call");
  func *callee = d->m->funcs[o[at].r];
  const opnd *ret = at ? &o[0] : NULL, *args = at + 1 < n ? &o[at + 1] : NULL;
  ins *in;
  if (!dec_add_ins(d, &in)) return 0;
  in->line = t->line;
  in->guard = (int16_t)guard;
  in->gneg = (uint8_t)gneg;
  if (!strcmp(callee->name, "cudaGraphSetConditional")) {
    if (!args || args->nv != 2 || ret)
      return dec_fail(d, t->line, "malformed call of cudaGraphSetConditional");
    in->op = OP_SETCOND;
    in->a = (int32_t)args->ps[0]->addr;
    in->b = (int32_t)args->ps[1]->addr;
    return 1;
  }
  /* the device runtime's printf and assert: the parameters' offsets in
     the caller's frame (vprintf: format and arguments in a and b, the
     result in c; __assertfail: message, file, line, function in d[]) */
  if (!strcmp(callee->name, "vprintf") && callee->start < 0) {
    if (!args || args->nv != 2 || (ret && ret->nv != 1))
      return dec_fail(d, t->line, "malformed call of vprintf");
    in->op = OP_PRINTF;
    in->a = (int32_t)args->ps[0]->addr;
    in->b = (int32_t)args->ps[1]->addr;
    in->c = ret ? (int32_t)ret->ps[0]->addr : -1;
    return 1;
  }
  if (!strcmp(callee->name, "__assertfail") && callee->start < 0) {
    if (!args || args->nv != 5 || ret)
      return dec_fail(d, t->line, "malformed call of __assertfail");
    in->op = OP_ASSERT;
    for (int i = 0; i < 4; i++) in->d[i] = (int32_t)args->ps[i]->addr;
    return 1;
  }
  if ((args ? args->nv : 0) != callee->nin || (ret ? ret->nv : 0) != callee->nout)
    return dec_fail(d, t->line,
                    "call of '%s' with the wrong number of parameters",
                    callee->name);
  in->op = OP_CALL;
  in->fn = o[at].r;
  /* the caller's parameter frame offsets, read at run time */
  in->vec = (uint8_t)(args ? args->nv : 0);
  in->nd = (uint8_t)(ret ? ret->nv : 0);
  if (in->vec > 4 || in->nd > 1)
    return dec_fail(d, t->line, "call with more than 4 parameters or 1 result");
  for (int i = 0; i < in->vec; i++) in->d[i] = (int32_t)args->ps[i]->addr;
  if (in->nd) in->a = (int32_t)ret->ps[0]->addr;
  if (d->fn->has_bar == 0) d->fn->calls_user = 1;
  return 1;
}
