/* Names and operands: registers, immediates and special registers as
   slots of the register file, symbols and functions by name, and the
   operands of an instruction. */
#define _POSIX_C_SOURCE 200809L
#include "ptx_dec.h"

#include <ctype.h>

/* -- slots ---------------------------------------------------------------- */

int dec_new_slots(dec *d, int n) {
  int s = d->m->nslots;
  d->m->nslots += n;
  return s;
}

/* The slot of an immediate (deduplicated within the module). */
int dec_const_slot(dec *d, uint64_t v) {
  sim_module *m = d->m;
  for (int i = 0; i < m->nconst; i++)
    if (m->consts[i] == v) return CONST_MARK + i;
  size_t cap = d->cconst;
  if (!dec_grow((void **)&m->consts, &cap, (size_t)m->nconst,
                sizeof *m->consts))
    return -1;
  d->cconst = cap;
  m->consts[m->nconst] = v;
  return CONST_MARK + m->nconst++;
}

static const char *const specials[NSPECIAL] = {
  "%tid.x", "%tid.y", "%tid.z", "%ntid.x", "%ntid.y", "%ntid.z", "%ctaid.x",
  "%ctaid.y", "%ctaid.z", "%nctaid.x", "%nctaid.y", "%nctaid.z", "%laneid",
  "%warpid", "%nwarpid", "%smid", "%nsmid", "%gridid", "%lanemask_eq",
  "%lanemask_le", "%lanemask_lt", "%lanemask_ge", "%lanemask_gt",
  "%dynamic_smem_size", "%zero_", "%clock", "%clock_hi", "%clock64",
  "%globaltimer", "%globaltimer_lo", "%globaltimer_hi", "%total_smem_size",
  "%aggr_smem_size", "%reserved_smem_offset_begin",
  "%reserved_smem_offset_end", "%reserved_smem_offset_cap",
  "%reserved_smem_offset_0", "%reserved_smem_offset_1", "%clusterid.x",
  "%clusterid.y", "%clusterid.z", "%nclusterid.x", "%nclusterid.y",
  "%nclusterid.z", "%cluster_ctaid.x", "%cluster_ctaid.y",
  "%cluster_ctaid.z", "%cluster_nctaid.x", "%cluster_nctaid.y",
  "%cluster_nctaid.z", "%cluster_ctarank", "%cluster_nctarank",
};

/* Register r (slot, or predicate index with *pred set), or -1. */
int dec_find_reg(dec *d, const tok *t, int *pred) {
  for (int i = 0; i < NSPECIAL; i++)
    if (is(t, specials[i])) return *pred = 0, i;
  if (is(t, "%tid") || is(t, "%ntid") || is(t, "%ctaid") || is(t, "%nctaid"))
    return -1;
  for (size_t i = d->nregs; i-- > 0; ) {
    const regdecl *r = &d->regs[i];
    if (t->len < r->len || memcmp(t->s, r->name, (size_t)r->len)) continue;
    if (!r->count) {
      if (t->len == r->len) return *pred = r->pred, r->base;
      continue;
    }
    if (t->len == r->len) continue;
    int n = 0;
    for (int j = r->len; j < t->len; j++) {
      if (!isdigit((unsigned char)t->s[j]) || n > 1000000) { n = -1; break; }
      n = n * 10 + (t->s[j] - '0');
    }
    if (n >= 0 && n < r->count) return *pred = r->pred, r->base + n;
  }
  return -1;
}

sym *dec_find_sym(sym *v, size_t n, const tok *t) {
  for (size_t i = n; i-- > 0; )
    if (v[i].len == t->len && !memcmp(v[i].name, t->s, (size_t)t->len))
      return &v[i];
  return NULL;
}

static sym *lookup(dec *d, const tok *t) {
  sym *s = dec_find_sym(d->lsyms, d->nlsyms, t);
  return s ? s : dec_find_sym(d->gsyms, d->ngsyms, t);
}

static int find_func(dec *d, const tok *t) {
  for (size_t i = 0; i < d->m->nfuncs; i++)
    if ((size_t)t->len == strlen(d->m->funcs[i]->name)
        && !memcmp(d->m->funcs[i]->name, t->s, (size_t)t->len))
      return (int)i;
  return -1;
}

/* -- operands ------------------------------------------------------------- */

static int symbol_or_reg(dec *d, opnd *o, tok *t) {
  int pred = 0, r = dec_find_reg(d, t, &pred);
  if (r >= 0) {
    o->kind = pred ? O_PRED : O_REG;
    o->r = r;
    return 1;
  }
  if (is(t, "_")) return o->kind = O_SINK, 1;
  sym *s = lookup(d, t);
  if (s) {
    o->kind = O_ADDR;
    o->space = s->space;
    o->imm = (uint64_t)s->addr;
    return 1;
  }
  if (find_func(d, t) >= 0) {
    o->kind = O_FUNC;
    o->r = find_func(d, t);
    return 1;
  }
  return dec_fail(d, t->line, "unknown name '%.*s'", t->len, t->s);
}

int dec_operand(dec *d, opnd *o) {
  memset(o, 0, sizeof *o);
  o->space = -1;
  o->base = -1;
  tok *t = next(d);
  if (!t) return dec_fail(d, line_now(d), "unexpected end of text");
  o->line = t->line;
  if (is(t, "[")) {               /* [reg], [reg+imm], [sym+imm], [imm] */
    o->kind = O_MEM;
    int sign = 1;
    for (;;) {
      tok *u = next(d);
      if (!u) return dec_fail(d, t->line, "unterminated address");
      if (is(u, "]")) break;
      if (is(u, ",")) { /* [handle, {x, y, z}]: a texture's coordinates */
        opnd c;
        if (!dec_operand(d, &c)) return 0;
        if (c.kind != O_VEC)
          return dec_fail(d, u->line, "expected the coordinates {x, ...}");
        memcpy(o->v, c.v, sizeof o->v);
        o->nv = c.nv;
        continue;
      }
      if (is(u, "+")) { sign = 1; continue; }
      if (is(u, "-")) { sign = -1; continue; }
      uint64_t v;
      int isf;
      if (dec_parse_number(u, 0, &v, &isf) && !isf) {
        o->off += sign * (int64_t)v;
        continue;
      }
      opnd x;
      memset(&x, 0, sizeof x);
      if (!symbol_or_reg(d, &x, u)) return 0;
      if (x.kind == O_REG && o->base < 0) o->base = x.r;
      else if (x.kind == O_ADDR && o->space < 0) {
        o->space = x.space;
        o->off += (int64_t)x.imm;
      } else {
        return dec_fail(d, u->line, "unsupported address '%.*s'", u->len, u->s);
      }
    }
    return 1;
  }
  if (is(t, "{")) {               /* vector */
    o->kind = O_VEC;
    for (;;) {
      tok *u = next(d);
      if (!u) return dec_fail(d, t->line, "unterminated vector");
      if (is(u, "}")) break;
      if (is(u, ",")) continue;
      opnd x;
      memset(&x, 0, sizeof x);
      if (!symbol_or_reg(d, &x, u)) return 0;
      if (o->nv == 4 || (x.kind != O_REG && x.kind != O_SINK))
        return dec_fail(d, u->line, "unsupported vector element '%.*s'", u->len,
                        u->s);
      o->v[o->nv++] = x.kind == O_REG ? x.r : -1;
    }
    return 1;
  }
  if (is(t, "(")) {               /* a call's parameter list */
    o->kind = O_LIST;
    for (;;) {
      tok *u = next(d);
      if (!u) return dec_fail(d, t->line, "unterminated list");
      if (is(u, ")")) break;
      if (is(u, ",")) continue;
      sym *s = lookup(d, u);
      if (!s || s->space != SP_FPARAM || o->nv == 16)
        return dec_fail(d, u->line, "unsupported call argument '%.*s'", u->len,
                        u->s);
      o->ps[o->nv++] = s;
    }
    return 1;
  }
  int neg = 0;
  if (is(t, "-")) {
    neg = 1;
    if (!(t = next(d))) return dec_fail(d, o->line, "unexpected end of text");
  }
  if (is(t, "!")) {
    if (!(t = next(d)) || !symbol_or_reg(d, o, t) || o->kind != O_PRED)
      return dec_fail(d, o->line, "expected a predicate after '!'");
    o->neg = 1;
    return 1;
  }
  if (dec_parse_number(t, neg, &o->imm, &o->isf)) return o->kind = O_IMM, 1;
  if (is(t, "WARP_SZ")) { /* the predefined constant (NVRTC's warpSize) */
    o->kind = O_IMM;
    o->imm = neg ? (uint64_t)-32 : 32;
    return 1;
  }
  if (neg)
    return dec_fail(d, t->line, "unsupported operand '-%.*s'", t->len, t->s);
  if (!symbol_or_reg(d, o, t)) return 0;
  if ((o->kind == O_PRED || o->kind == O_REG) && is(peek(d), "|")) {
    next(d);
    opnd q;
    tok *u = next(d);
    if (!u || !symbol_or_reg(d, &q, u) || q.kind != O_PRED)
      return dec_fail(d, t->line, "expected a predicate after '|'");
    o->r2 = q.r;
  } else {
    o->r2 = -1;
  }
  if (o->kind == O_ADDR && is(peek(d), "+")) { /* sym+imm */
    next(d);
    uint64_t v;
    int isf;
    tok *u = next(d);
    if (!u || !dec_parse_number(u, 0, &v, &isf) || isf)
      return dec_fail(d, t->line, "bad offset after '%.*s'", t->len, t->s);
    o->imm += v;
  }
  return 1;
}

/* The slot holding a source operand read as type (k, bits). */
int dec_src_slot(dec *d, const opnd *o, int k, int bits, const char *what) {
  if (o->kind == O_REG) return o->r;
  if (o->kind == O_IMM) {
    uint64_t v = o->imm;
    if ((k == K_F && bits == 16) || k == K_BF || k == K_H2 || k == K_BH2) {
      if (o->isf) /* the bits of a half are the one literal taken */
        return dec_fail(d, o->line, "unsupported immediate of a half type"), -1;
    } else if (k == K_F && !o->isf) { /* an integer where a float goes */
      double f = (double)(int64_t)v;
      if (bits == 32) {
        float g = (float)f;
        uint32_t u;
        memcpy(&u, &g, 4);
        v = u;
      } else {
        memcpy(&v, &f, 8);
      }
    } else if (k == K_F && bits == 32 && o->isf == 64) {
      double f;
      memcpy(&f, &v, 8);
      float g = (float)f;
      uint32_t u;
      memcpy(&u, &g, 4);
      v = u;
    } else if (k == K_F && bits == 64 && o->isf == 32) {
      uint32_t u = (uint32_t)v;
      float g;
      memcpy(&g, &u, 4);
      double f = g;
      memcpy(&v, &f, 8);
    }
    if ((k != K_F || bits == 16) && bits < 64) /* registers hold values of */
      v &= (1ull << bits) - 1;                  /* fewer bits zero-extended */
    int s = dec_const_slot(d, v);
    return s < 0 ? dec_fail(d, o->line, "out of memory"), -1 : s;
  }
  if (o->kind == O_ADDR) {
    if (o->space == SP_PARAM || o->space == SP_FPARAM)
      return dec_fail(d, o->line,
                      "the address of a .param is not supported"), -1;
    int s = dec_const_slot(d, o->imm);
    return s < 0 ? dec_fail(d, o->line, "out of memory"), -1 : s;
  }
  dec_fail(d, o->line, "%s: expected a register or an immediate", what);
  return -1;
}
