/* PTX text to the simulator's decoded form (ptx_int.h), once per module.
   What the interpreter does not run is refused here, naming the instruction
   and its line: a module that loads runs as PTX says it should. */
#define _POSIX_C_SOURCE 200809L
#include "ptx_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tok { const char *s; int len, line; } tok;

/* Register declarations: "%r<20>" is a range of 20, "%SP" one register. */
typedef struct regdecl {
  const char *name;
  int len, count, base, pred; /* count 0: the exact name */
} regdecl;

typedef struct sym {          /* a named address in some space */
  const char *name;
  int len, space;             /* SP_SHARED, SP_LOCAL, SP_PARAM, SP_FPARAM,
                                 SP_GLOBAL (a module variable) */
  int64_t addr;
  int size;
} sym;

typedef struct label { const char *name; int len, pc; } label;
typedef struct fixup { int pc, line; const char *name; int len; } fixup;

typedef struct dec {
  sim_module *m;
  tok *t;
  size_t nt, i;
  char *err;
  size_t nerr;
  int failed;
  sym *gsyms;                 /* module: shared and global variables */
  size_t ngsyms, cgsyms;
  /* the function being decoded */
  regdecl *regs;
  size_t nregs, cregs;
  sym *lsyms;
  size_t nlsyms, clsyms;
  label *labels;
  size_t nlabels, clabels;
  fixup *fix;
  size_t nfix, cfix;
  size_t ccode, cconst;
  func *fn;
} dec;

static int fail(dec *d, int line, const char *fmt, ...) {
  if (d->failed) return 0;
  d->failed = 1;
  va_list ap;
  va_start(ap, fmt);
  char msg[200];
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(d->err, d->nerr, "PTX line %d: %s", line, msg);
  return 0;
}

static int grow(void **v, size_t *cap, size_t n, size_t size) {
  if (n < *cap) return 1;
  size_t c = *cap ? 2 * *cap : 16;
  void *p = realloc(*v, c * size);
  if (!p) return 0;
  *v = p;
  *cap = c;
  return 1;
}
#define PUSH(d, v, n, c) grow((void **)&(v), &(c), (n), sizeof *(v))

/* -- lexing --------------------------------------------------------------- */

static int word_ch(int c) {
  return isalnum(c) || c == '_' || c == '$' || c == '%' || c == '.'
         || c == ':';
}

/* Splits comment-free text into words and single punctuation. A word may
   hold "::" (ld.global.L1::evict_last); a label's ':' stands alone. */
static int lex(dec *d, const char *s) {
  size_t cap = 0;
  int line = 1;
  for (const char *p = s; *p; ) {
    if (*p == '\n') { line++; p++; continue; }
    if (isspace((unsigned char)*p)) { p++; continue; }
    if (p[0] == '/' && p[1] == '/') {
      while (*p && *p != '\n') p++;
      continue;
    }
    if (p[0] == '/' && p[1] == '*') {
      for (p += 2; *p && !(p[0] == '*' && p[1] == '/'); p++) line += *p == '\n';
      if (*p) p += 2;
      continue;
    }
    if (!grow((void **)&d->t, &cap, d->nt, sizeof *d->t)) return 0;
    tok *t = &d->t[d->nt++];
    t->s = p;
    t->line = line;
    if (*p == '"') {
      for (p++; *p && *p != '"' && *p != '\n'; p++) {}
      if (*p == '"') p++;
    } else if (word_ch((unsigned char)*p) && *p != ':') {
      while (*p && (word_ch((unsigned char)*p)
                    && (*p != ':' || p[1] == ':' || (p > t->s && p[-1] == ':'))))
        p++;
    } else {
      p++;
    }
    t->len = (int)(p - t->s);
  }
  return 1;
}

static int is(const tok *t, const char *w) {
  return t && (size_t)t->len == strlen(w) && !memcmp(t->s, w, (size_t)t->len);
}

static tok *peek(dec *d) { return d->i < d->nt ? &d->t[d->i] : NULL; }
static tok *next(dec *d) { return d->i < d->nt ? &d->t[d->i++] : NULL; }

static int line_now(dec *d) {
  return d->i < d->nt ? d->t[d->i].line : d->nt ? d->t[d->nt - 1].line : 0;
}

static int expect(dec *d, const char *w) {
  tok *t = next(d);
  if (is(t, w)) return 1;
  return fail(d, t ? t->line : line_now(d), "expected '%s', got '%.*s'", w,
              t ? t->len : 0, t ? t->s : "");
}

static void skip_statement(dec *d) {
  for (tok *t; (t = next(d)) && !is(t, ";"); ) {}
}

static void skip_line(dec *d, int line) {
  while (d->i < d->nt && d->t[d->i].line == line) d->i++;
}

/* -- types ---------------------------------------------------------------- */

static int parse_type(const char *s, int len, uint8_t *k, uint8_t *b) {
  static const struct { const char *n; uint8_t k, b; } types[] = {
    {"b8", K_B, 8}, {"b16", K_B, 16}, {"b32", K_B, 32}, {"b64", K_B, 64},
    {"u8", K_U, 8}, {"u16", K_U, 16}, {"u32", K_U, 32}, {"u64", K_U, 64},
    {"s8", K_S, 8}, {"s16", K_S, 16}, {"s32", K_S, 32}, {"s64", K_S, 64},
    {"f16", K_F, 16}, {"f32", K_F, 32}, {"f64", K_F, 64}, {"pred", K_PRED, 1},
    {"bf16", K_BF, 16}, {"b128", K_B, 128},
  };
  for (size_t i = 0; i < sizeof types / sizeof *types; i++)
    if ((size_t)len == strlen(types[i].n) && !memcmp(types[i].n, s, (size_t)len)) {
      *k = types[i].k;
      *b = types[i].b;
      return 1;
    }
  return 0;
}

/* -- slots ---------------------------------------------------------------- */

static int new_slots(dec *d, int n) {
  int s = d->m->nslots;
  d->m->nslots += n;
  return s;
}

/* The slot of an immediate (deduplicated within the module). */
static int const_slot(dec *d, uint64_t v) {
  sim_module *m = d->m;
  for (int i = 0; i < m->nconst; i++)
    if (m->consts[i] == v) return CONST_MARK + i;
  size_t cap = d->cconst;
  if (!grow((void **)&m->consts, &cap, (size_t)m->nconst, sizeof *m->consts))
    return -1;
  d->cconst = cap;
  m->consts[m->nconst] = v;
  return CONST_MARK + m->nconst++;
}

static const char *const specials[NSPECIAL] = {
  "%tid.x", "%tid.y", "%tid.z", "%ntid.x", "%ntid.y", "%ntid.z", "%ctaid.x",
  "%ctaid.y", "%ctaid.z", "%nctaid.x", "%nctaid.y", "%nctaid.z", "%laneid",
  "%warpid", "%nwarpid", "%smid", "%nsmid", "%gridid", "%lanemask_eq",
  "%lanemask_le", "%lanemask_lt", "%lanemask_ge", "%lanemask_gt", "%clock",
  "%clock64", "%globaltimer", "%dynamic_smem_size", "%total_smem_size",
  "%zero_",
};

/* Register r (slot, or predicate index with *pred set), or -1. */
static int find_reg(dec *d, const tok *t, int *pred) {
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

static sym *find_sym(sym *v, size_t n, const tok *t) {
  for (size_t i = n; i-- > 0; )
    if (v[i].len == t->len && !memcmp(v[i].name, t->s, (size_t)t->len))
      return &v[i];
  return NULL;
}

static sym *lookup(dec *d, const tok *t) {
  sym *s = find_sym(d->lsyms, d->nlsyms, t);
  return s ? s : find_sym(d->gsyms, d->ngsyms, t);
}

static int find_func(dec *d, const tok *t) {
  for (size_t i = 0; i < d->m->nfuncs; i++)
    if ((size_t)t->len == strlen(d->m->funcs[i]->name)
        && !memcmp(d->m->funcs[i]->name, t->s, (size_t)t->len))
      return (int)i;
  return -1;
}

/* -- numbers -------------------------------------------------------------- */

/* An integer or float literal: 0f3F800000 (f32 bits), 0d... (f64 bits),
   0x.., 0.., decimal, a trailing U. *isf: 0 integer, 32 or 64 float bits. */
static int parse_number(const tok *t, int neg, uint64_t *v, int *isf) {
  char buf[64];
  if (t->len <= 0 || t->len >= (int)sizeof buf) return 0;
  memcpy(buf, t->s, (size_t)t->len);
  buf[t->len] = '\0';
  char *end;
  *isf = 0;
  if (buf[0] == '0' && (buf[1] == 'f' || buf[1] == 'F' || buf[1] == 'd'
                        || buf[1] == 'D')) {
    *isf = buf[1] == 'f' || buf[1] == 'F' ? 32 : 64;
    *v = strtoull(buf + 2, &end, 16);
    if (neg) *v ^= *isf == 32 ? 0x80000000ull : 0x8000000000000000ull;
    return *end == '\0' && end > buf + 2;
  }
  if (!isdigit((unsigned char)buf[0])) return 0;
  if (strchr(buf, '.') || (strchr(buf, 'e') && !strchr(buf, 'x'))) {
    double f = strtod(buf, &end);
    if (*end) return 0;
    if (neg) f = -f;
    memcpy(v, &f, 8);
    *isf = 64;
    return 1;
  }
  int base = 10;
  const char *p = buf;
  if (buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X')) base = 16, p += 2;
  else if (buf[0] == '0' && buf[1]) base = 8, p += 1;
  *v = strtoull(p, &end, base);
  if (*end == 'U' || *end == 'u') end++;
  if (*end) return 0;
  if (neg) *v = (uint64_t)0 - *v;
  return 1;
}

/* -- operands ------------------------------------------------------------- */

enum { O_NONE, O_REG, O_PRED, O_IMM, O_MEM, O_VEC, O_ADDR, O_SINK, O_LIST,
       O_FUNC };

typedef struct opnd {
  int kind, line;
  int32_t r, r2;        /* O_REG slot / O_PRED index; r2: "p|q"'s q */
  int neg;              /* !p */
  uint64_t imm;         /* O_IMM; O_ADDR: the address */
  int isf;
  int32_t base;         /* O_MEM */
  int64_t off;
  int space;            /* O_MEM, O_ADDR: space of the symbol, or -1 */
  int32_t v[4];         /* O_VEC slots (-1 for '_'), O_LIST param syms */
  int nv;
  sym *ps[16];          /* O_LIST: the call's parameters */
} opnd;

static int operand(dec *d, opnd *o);

static int symbol_or_reg(dec *d, opnd *o, tok *t) {
  int pred = 0, r = find_reg(d, t, &pred);
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
  return fail(d, t->line, "unknown name '%.*s'", t->len, t->s);
}

static int operand(dec *d, opnd *o) {
  memset(o, 0, sizeof *o);
  o->space = -1;
  o->base = -1;
  tok *t = next(d);
  if (!t) return fail(d, line_now(d), "unexpected end of text");
  o->line = t->line;
  if (is(t, "[")) {               /* [reg], [reg+imm], [sym+imm], [imm] */
    o->kind = O_MEM;
    int sign = 1;
    for (;;) {
      tok *u = next(d);
      if (!u) return fail(d, t->line, "unterminated address");
      if (is(u, "]")) break;
      if (is(u, "+")) { sign = 1; continue; }
      if (is(u, "-")) { sign = -1; continue; }
      uint64_t v;
      int isf;
      if (parse_number(u, 0, &v, &isf) && !isf) {
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
        return fail(d, u->line, "unsupported address '%.*s'", u->len, u->s);
      }
    }
    return 1;
  }
  if (is(t, "{")) {               /* vector */
    o->kind = O_VEC;
    for (;;) {
      tok *u = next(d);
      if (!u) return fail(d, t->line, "unterminated vector");
      if (is(u, "}")) break;
      if (is(u, ",")) continue;
      opnd x;
      memset(&x, 0, sizeof x);
      if (!symbol_or_reg(d, &x, u)) return 0;
      if (o->nv == 4 || (x.kind != O_REG && x.kind != O_SINK))
        return fail(d, u->line, "unsupported vector element '%.*s'", u->len,
                    u->s);
      o->v[o->nv++] = x.kind == O_REG ? x.r : -1;
    }
    return 1;
  }
  if (is(t, "(")) {               /* a call's parameter list */
    o->kind = O_LIST;
    for (;;) {
      tok *u = next(d);
      if (!u) return fail(d, t->line, "unterminated list");
      if (is(u, ")")) break;
      if (is(u, ",")) continue;
      sym *s = lookup(d, u);
      if (!s || s->space != SP_FPARAM || o->nv == 16)
        return fail(d, u->line, "unsupported call argument '%.*s'", u->len,
                    u->s);
      o->ps[o->nv++] = s;
    }
    return 1;
  }
  int neg = 0;
  if (is(t, "-")) {
    neg = 1;
    if (!(t = next(d))) return fail(d, o->line, "unexpected end of text");
  }
  if (is(t, "!")) {
    if (!(t = next(d)) || !symbol_or_reg(d, o, t) || o->kind != O_PRED)
      return fail(d, o->line, "expected a predicate after '!'");
    o->neg = 1;
    return 1;
  }
  if (parse_number(t, neg, &o->imm, &o->isf)) return o->kind = O_IMM, 1;
  if (neg) return fail(d, t->line, "unsupported operand '-%.*s'", t->len, t->s);
  if (!symbol_or_reg(d, o, t)) return 0;
  if ((o->kind == O_PRED || o->kind == O_REG) && is(peek(d), "|")) {
    next(d);
    opnd q;
    tok *u = next(d);
    if (!u || !symbol_or_reg(d, &q, u) || q.kind != O_PRED)
      return fail(d, t->line, "expected a predicate after '|'");
    o->r2 = q.r;
  } else {
    o->r2 = -1;
  }
  if (o->kind == O_ADDR && is(peek(d), "+")) { /* sym+imm */
    next(d);
    uint64_t v;
    int isf;
    tok *u = next(d);
    if (!u || !parse_number(u, 0, &v, &isf) || isf)
      return fail(d, t->line, "bad offset after '%.*s'", t->len, t->s);
    o->imm += v;
  }
  return 1;
}

/* The slot holding a source operand read as type (k, bits). */
static int src_slot(dec *d, const opnd *o, int k, int bits, const char *what) {
  if (o->kind == O_REG) return o->r;
  if (o->kind == O_IMM) {
    uint64_t v = o->imm;
    if (k == K_F && !o->isf) { /* an integer literal where a float goes */
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
    if (k != K_F && k != K_BF && bits < 64) /* registers hold zero-extended */
      v &= (1ull << bits) - 1;               /* integers below 64 bits */
    int s = const_slot(d, v);
    return s < 0 ? fail(d, o->line, "out of memory"), -1 : s;
  }
  if (o->kind == O_ADDR) {
    if (o->space == SP_PARAM || o->space == SP_FPARAM)
      return fail(d, o->line, "the address of a .param is not supported"), -1;
    int s = const_slot(d, o->imm);
    return s < 0 ? fail(d, o->line, "out of memory"), -1 : s;
  }
  fail(d, o->line, "%s: expected a register or an immediate", what);
  return -1;
}

/* -- declarations --------------------------------------------------------- */

/* ".reg .b32 %r<20>, %x;" after ".reg". */
static int decl_reg(dec *d) {
  tok *t = next(d);
  uint8_t k, b;
  int vec = 1;
  if (t && (is(t, ".v2") || is(t, ".v4"))) {
    vec = t->s[2] - '0';
    t = next(d);
  }
  if (!t || t->s[0] != '.' || !parse_type(t->s + 1, t->len - 1, &k, &b))
    return fail(d, t ? t->line : line_now(d), "bad .reg declaration");
  if (vec != 1) return fail(d, t->line, "vector registers are not supported");
  for (;;) {
    tok *n = next(d);
    if (!n) return fail(d, t->line, "bad .reg declaration");
    if (is(n, ";")) return 1;
    if (is(n, ",")) continue;
    if (!PUSH(d, d->regs, d->nregs, d->cregs)) return fail(d, n->line, "out of memory");
    regdecl *r = &d->regs[d->nregs++];
    r->name = n->s;
    r->len = n->len;
    r->count = 0;
    r->pred = k == K_PRED;
    if (is(peek(d), "<")) {
      next(d);
      tok *c = next(d);
      uint64_t v;
      int isf;
      if (!c || !parse_number(c, 0, &v, &isf) || isf || v > 1000000
          || !expect(d, ">"))
        return fail(d, n->line, "bad register range");
      r->count = (int)v;
    }
    int count = r->count ? r->count : 1;
    if (r->pred) {
      r->base = d->m->npreds;
      d->m->npreds += count;
    } else {
      r->base = new_slots(d, count);
    }
  }
}

/* [.align A] .type name [ '[' N ']' ]... after a space word, attributes
   such as .ptr .global passed over: the name, the element's kind and
   bytes, and the declaration's size and alignment. */
static int decl_shape(dec *d, tok **name, uint8_t *kind, size_t *elem,
                      size_t *size, size_t *align) {
  size_t al = 0, count = 1;
  uint8_t k = 0, b = 0;
  *elem = 0;
  tok *t;
  while ((t = next(d))) {
    if (is(t, ".align")) {
      uint64_t v;
      int isf;
      tok *n = next(d);
      if (!n || !parse_number(n, 0, &v, &isf)) break;
      al = v;
    } else if (t->s[0] == '.' && parse_type(t->s + 1, t->len - 1, &k, &b)) {
      *elem = k == K_PRED ? 1 : b / 8;
    } else if (t->s[0] == '.' && (is(t, ".v2") || is(t, ".v4"))) {
      count *= (size_t)(t->s[2] - '0');
    } else if (t->s[0] != '.') {
      break;
    }
  }
  if (!t || !*elem) return fail(d, t ? t->line : line_now(d), "bad variable declaration");
  *name = t;
  *kind = k;
  while (is(peek(d), "[")) {
    next(d);
    tok *n = next(d);
    uint64_t v;
    int isf;
    if (is(n, "]")) { count = 0; continue; } /* extern name[] */
    if (!n || !parse_number(n, 0, &v, &isf) || isf || !expect(d, "]"))
      return fail(d, t->line, "bad array size");
    count *= v;
  }
  *size = *elem * count;
  *align = al ? al : *elem;
  return 1;
}

/* A declaration (decl_shape) with its ';', or its initializer (global,
   const): the bytes into *init. */
static int decl_var(dec *d, size_t *size, size_t *align, tok **name,
                    unsigned char **init) {
  uint8_t k;
  size_t elem;
  *init = NULL;
  if (!decl_shape(d, name, &k, &elem, size, align)) return 0;
  tok *t = *name;
  if (is(peek(d), "=")) {
    next(d);
    unsigned char *data = calloc(*size ? *size : 1, 1);
    if (!data) return fail(d, t->line, "out of memory");
    size_t at = 0;
    int brace = is(peek(d), "{");
    if (brace) next(d);
    for (tok *v; (v = next(d)) && !is(v, ";") && !is(v, "}"); ) {
      if (is(v, ",")) continue;
      int neg = is(v, "-");
      if (neg && !(v = next(d))) break;
      uint64_t x;
      int isf;
      if (!parse_number(v, neg, &x, &isf) || at + elem > *size) {
        free(data);
        return fail(d, v->line, "unsupported initializer '%.*s'", v->len, v->s);
      }
      if (k == K_F && !isf) {
        double f = (double)(int64_t)x;
        if (elem == 4) { float g = (float)f; uint32_t u; memcpy(&u, &g, 4); x = u; }
        else memcpy(&x, &f, 8);
      }
      memcpy(data + at, &x, elem); /* little-endian host */
      at += elem;
    }
    if (brace && is(peek(d), ";")) next(d);
    *init = data;
    return 1;
  }
  return expect(d, ";");
}

static int add_sym(dec *d, int local, const tok *name, int space,
                   int64_t addr, int size) {
  sym **v = local ? &d->lsyms : &d->gsyms;
  size_t *n = local ? &d->nlsyms : &d->ngsyms;
  size_t *c = local ? &d->clsyms : &d->cgsyms;
  if (!grow((void **)v, c, *n, sizeof **v)) return fail(d, name->line, "out of memory");
  sym *s = &(*v)[(*n)++];
  s->name = name->s;
  s->len = name->len;
  s->space = space;
  s->addr = addr;
  s->size = size;
  return 1;
}

static size_t align_up(size_t x, size_t a) {
  return a > 1 ? (x + a - 1) / a * a : x;
}

/* Every .shared variable of the text, in one layout; extern (dynamic)
   ones after all static ones. */
static int layout_shared(dec *d) {
  size_t at = 0, extern_align = 16;
  for (int pass = 0; pass < 2 && !d->failed; pass++) {
    for (d->i = 0; d->i < d->nt; ) {
      tok *t = next(d);
      if (!is(t, ".shared")) continue;
      int ext = d->i >= 2 && is(&d->t[d->i - 2], ".extern");
      size_t size, align;
      tok *name;
      unsigned char *init;
      if (!decl_var(d, &size, &align, &name, &init)) return 0;
      free(init);
      if (ext != pass) continue;
      if (ext) {
        if (align > extern_align) extern_align = align;
        continue;
      }
      at = align_up(at, align);
      if (!add_sym(d, 0, name, SP_SHARED, (int64_t)at, (int)size)) return 0;
      at += size;
    }
    if (pass == 0) {
      at = align_up(at, extern_align);
      d->m->shared_static = at;
    }
  }
  for (d->i = 0; d->i < d->nt; ) { /* the extern ones: at the end */
    tok *t = next(d);
    if (!is(t, ".shared") || d->i < 2 || !is(&d->t[d->i - 2], ".extern"))
      continue;
    size_t size, align;
    tok *name;
    unsigned char *init;
    if (!decl_var(d, &size, &align, &name, &init)) return 0;
    free(init);
    if (!find_sym(d->gsyms, d->ngsyms, name)
        && !add_sym(d, 0, name, SP_SHARED, (int64_t)d->m->shared_static, 0))
      return 0;
  }
  return !d->failed;
}

/* A .global or .const variable: host memory the module owns. */
static int decl_global(dec *d) {
  size_t size, align;
  tok *name;
  unsigned char *init;
  if (!decl_var(d, &size, &align, &name, &init)) return 0;
  sim_module *m = d->m;
  var *v = realloc(m->vars, (m->nvars + 1) * sizeof *v);
  if (!v) { free(init); return fail(d, name->line, "out of memory"); }
  m->vars = v;
  var *x = &v[m->nvars];
  x->data = init ? init : calloc(size ? size : 1, 1);
  x->name = malloc((size_t)name->len + 1);
  if (!x->data || !x->name) {
    free(x->data);
    free(x->name);
    return fail(d, name->line, "out of memory");
  }
  memcpy(x->name, name->s, (size_t)name->len);
  x->name[name->len] = '\0';
  x->size = size;
  m->nvars++;
  return add_sym(d, 0, name, SP_GLOBAL, (int64_t)(uintptr_t)x->data, (int)size);
}

/* "( .param .u64 a, .param .align 8 .b8 b[16] )": each parameter's size and
   alignment, its name a symbol of the function being decoded. */
static int param_list(dec *d, func *f, int out, size_t **psize,
                      size_t **palign, int *pn) {
  *pn = 0;
  *psize = *palign = NULL;
  if (!is(peek(d), "(")) return 1;
  next(d);
  size_t cap = 0;
  while (!is(peek(d), ")")) {
    tok *t = next(d);
    if (!t) return fail(d, line_now(d), "unterminated parameter list");
    if (is(t, ",")) continue;
    if (!is(t, ".param") && !is(t, ".reg"))
      return fail(d, t->line, "unsupported parameter '%.*s'", t->len, t->s);
    tok *name;
    uint8_t k;
    size_t elem, size, al;
    if (!decl_shape(d, &name, &k, &elem, &size, &al)) return 0;
    if (!grow((void **)psize, &cap, (size_t)*pn, sizeof **psize)) return 0;
    size_t *a = realloc(*palign, cap * sizeof *a);
    if (!a) return fail(d, name->line, "out of memory");
    *palign = a;
    (*psize)[*pn] = size;
    (*palign)[*pn] = al;
    if (!add_sym(d, 1, name, f->entry ? SP_PARAM : SP_FPARAM, *pn, (int)size))
      return 0;
    d->lsyms[d->nlsyms - 1].addr = -1 - *pn; /* placed below */
    d->lsyms[d->nlsyms - 1].size = out; /* marks which list, for placing */
    (*pn)++;
  }
  next(d);
  return 1;
}

/* -- instructions --------------------------------------------------------- */

typedef struct mods {
  uint8_t tk[3], tb[3];
  int nt;
  ins *in;
  const char *base;
  int baselen;
} mods;

static int modw(const char *s, int len, const char *w) {
  return (size_t)len == strlen(w) && !memcmp(s, w, (size_t)len);
}

/* Words that change nothing the simulator can show: caching, ordering
   (everything is sequentially consistent here), scopes, alignment hints. */
static int ignorable(const char *s, int len) {
  static const char *const w[] = {
    "ca", "cg", "cs", "lu", "cv", "nc", "wb", "wt", "volatile", "relaxed",
    "acquire", "release", "acq_rel", "weak", "sc", "cta", "gpu", "sys",
    "cluster", "aligned", "sync", "uni", "L2::64B", "L2::128B", "L2::256B",
    "L1::evict_last", "L1::evict_first", "L1::evict_normal",
    "L1::no_allocate", "L1::evict_unchanged", "L2::evict_last",
    "L2::evict_first", "L2::evict_normal", "L2::cache_hint", "noftz",
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
  };
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (modw(s, len, ops[i].n)) return ops[i].op;
  return -1;
}

/* Reads the words after the base name into in and the type list. */
static int parse_mods(dec *d, const tok *t, mods *md) {
  ins *in = md->in;
  const char *p = t->s + md->baselen, *end = t->s + t->len;
  int is_red = modw(t->s, md->baselen, "red");
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
    if (parse_type(s, len, &k, &b)) {
      if (md->nt == 3) return fail(d, t->line, "too many types");
      md->tk[md->nt] = k, md->tb[md->nt++] = b;
      continue;
    }
    if (in->op == OP_SETP || in->op == OP_SLCT)
      for (int i = 0; i < 18 && !done; i++)
        if (modw(s, len, cmps[i])) in->cmp = (uint8_t)i, done = 1;
    if (in->op == OP_SETP && !done) {
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
      else if (modw(s, len, "wrap")) in->bop = 1, done = 1;
      else if (modw(s, len, "clamp")) in->bop = 0, done = 1;
    }
    if (in->op == OP_PRMT && !done && len > 0)
      return fail(d, t->line, "unsupported instruction '%.*s'", t->len, t->s);
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
    else if (modw(s, len, "v2") || modw(s, len, "v4")) in->vec = (uint8_t)(s[1] - '0');
    else if ((in->op == OP_BAR) && (modw(s, len, "sync") || modw(s, len, "warp")
                                  || modw(s, len, "aligned") || modw(s, len, "cta")))
      in->cmp |= modw(s, len, "warp");
    else if (in->op == OP_BAR && (modw(s, len, "arrive") || modw(s, len, "red")))
      return fail(d, t->line, "unsupported instruction '%.*s'", t->len, t->s);
    else if (in->op == OP_NOP && (modw(s, len, "gl") || modw(s, len, "sc")
                                  || modw(s, len, "acq_rel")))
      {}
    else if (!ignorable(s, len) || (in->op == OP_BRA && !modw(s, len, "uni")))
      return fail(d, t->line, "unsupported instruction '%.*s'", t->len, t->s);
  }
  (void)is_red;
  return 1;
}

static int add_ins(dec *d, ins **out) {
  sim_module *m = d->m;
  if (!grow((void **)&m->code, &d->ccode, m->ncode, sizeof *m->code))
    return fail(d, line_now(d), "out of memory");
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
static int instruction(dec *d, tok *t, int guard, int gneg) {
  const char *dot = memchr(t->s, '.', (size_t)t->len);
  int baselen = dot ? (int)(dot - t->s) : t->len;
  int op = op_of(t->s, baselen);
  if (op < 0)
    return fail(d, t->line, "unsupported instruction '%.*s'", t->len, t->s);
  opnd o[6];
  int n = 0;
  if (op == OP_BRA) { /* bra[.uni] label: resolved at the function's end */
    tok *lt = next(d);
    if (!lt || !expect(d, ";"))
      return fail(d, t->line, "malformed '%.*s'", t->len, t->s);
    ins *in;
    if (!add_ins(d, &in)) return 0;
    in->op = OP_BRA;
    in->line = t->line;
    in->guard = (int16_t)guard;
    in->gneg = (uint8_t)gneg;
    mods md = {{0}, {0}, 0, in, t->s, baselen};
    if (!parse_mods(d, t, &md)) return 0;
    if (!PUSH(d, d->fix, d->nfix, d->cfix)) return fail(d, t->line, "out of memory");
    d->fix[d->nfix++] = (fixup){(int)(in - d->m->code), t->line, lt->s, lt->len};
    return 1;
  }
  if (!is(peek(d), ";")) {
    for (;;) {
      if (n == 6) return fail(d, t->line, "too many operands");
      if (!operand(d, &o[n++])) return 0;
      if (is(peek(d), ",")) { next(d); continue; }
      break;
    }
  }
  if (!expect(d, ";")) return 0;
  ins *in;
  if (!add_ins(d, &in)) return 0;
  in->op = (uint8_t)op;
  in->line = t->line;
  in->guard = (int16_t)guard;
  in->gneg = (uint8_t)gneg;
  mods md = {{0}, {0}, 0, in, t->s, baselen};
  if (!parse_mods(d, t, &md)) return 0;
  in->tk = md.tk[0], in->tb = md.tb[0];
  in->t2k = md.nt > 1 ? md.tk[1] : md.tk[0];
  in->t2b = md.nt > 1 ? md.tb[1] : md.tb[0];
  int k = in->tk, b = in->tb;
#define SRC(i, kk, bb) ((i) < n ? src_slot(d, &o[i], kk, bb, "operand") : \
                        (fail(d, t->line, "missing operand of '%.*s'", t->len, t->s), -1))
#define DST(i) ((i) < n && o[i].kind == O_REG ? o[i].r : \
                (i) < n && o[i].kind == O_SINK ? new_slots(d, 1) : \
                (fail(d, t->line, "bad destination of '%.*s'", t->len, t->s), -1))
#define PRED(i) ((i) < n && o[i].kind == O_PRED ? o[i].r : \
                 (fail(d, t->line, "expected a predicate in '%.*s'", t->len, t->s), -1))
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
        in->d[i] = o[0].v[i] >= 0 ? o[0].v[i] : new_slots(d, 1);
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
  case OP_CVT:
    if (md.nt != 2) { unsupported = 1; break; }
    in->d[0] = DST(0);
    in->a = SRC(1, in->t2k, in->t2b);
    break;
  case OP_CVTA:
    if (in->space != SP_GLOBAL && in->space != SP_SHARED
        && in->space != SP_LOCAL && in->space != SP_CONST) {
      unsupported = 1;
      break;
    }
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
        in->d[i] = r >= 0 ? r : new_slots(d, 1);
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
    if (md.nt != 1 || n < mem + 2 || o[mem].kind != O_MEM || o[mem].space >= 0) {
      unsupported = 1;
      break;
    }
    if (in->space != SP_GENERIC && in->space != SP_GLOBAL
        && in->space != SP_SHARED) { unsupported = 1; break; }
    in->d[0] = red ? new_slots(d, 1) : DST(0);
    in->base = o[mem].base >= 0 ? o[mem].base : S_ZERO;
    in->off = o[mem].off;
    in->a = SRC(mem + 1, k, b);
    if (in->cmp == A_CAS) in->b = SRC(mem + 2, k, b);
    if (k == K_F && in->cmp != A_ADD && in->cmp != A_EXCH && in->cmp != A_MIN
        && in->cmp != A_MAX)
      unsupported = 1;
    if (b < 32 && !(in->cmp == A_CAS && b == 16)) unsupported = 1;
    break;
  }
  case OP_REDUX:
    in->d[0] = DST(0);
    in->a = SRC(1, k, b);
    in->b = n > 2 ? SRC(2, K_U, 32) : -1;
    break;
  case OP_BAR:
    if (in->cmp & 1) { in->op = OP_NOP; break; } /* bar.warp.sync */
    if (n > 0) in->a = SRC(0, K_U, 32);
    if (n > 1) in->b = SRC(1, K_U, 32);
    break;
  case OP_SHFL:
    if (n < 4 || in->tb != 32) { unsupported = 1; break; }
    in->d[0] = DST(0);
    in->d[1] = o[0].r2;
    in->a = SRC(1, K_B, 32);
    in->b = SRC(2, K_U, 32);
    in->c = SRC(3, K_U, 32);
    in->e = n > 4 ? SRC(4, K_U, 32) : const_slot(d, 0xffffffffu);
    break;
  case OP_VOTE:
    if (in->cmp == V_BALLOT) in->d[0] = DST(0);
    else in->d[0] = PRED(0);
    if (n < 2 || o[1].kind != O_PRED) { unsupported = 1; break; }
    in->a = o[1].r;
    in->bop = (uint8_t)o[1].neg;
    in->b = n > 2 ? SRC(2, K_U, 32) : const_slot(d, 0xffffffffu);
    break;
  case OP_MATCH:
    in->d[0] = DST(0);
    in->d[1] = n > 0 ? o[0].r2 : -1;
    in->a = SRC(1, k, b);
    in->b = SRC(2, K_U, 32);
    break;
  case OP_ACTIVEMASK:
    in->d[0] = DST(0);
    break;
  case OP_CALL:
    break; /* the caller fills it in */
  default:
    unsupported = 1;
  }
  /* forms whose operations the interpreter would get wrong: f16 and bf16
     arithmetic, mul24.hi, cvt to f16 or bf16 with a directed rounding */
  int half = (k == K_F && b == 16) || k == K_BF || b == 128;
  switch (op) {
  case OP_MOV: case OP_LD: case OP_ST: case OP_SETP: case OP_SELP:
  case OP_PACK: case OP_UNPACK: case OP_CVT: case OP_NOP: case OP_RET:
  case OP_EXIT: case OP_TRAP: case OP_BAR: case OP_CALL:
    break;
  case OP_ATOM:
    unsupported |= half && !(in->cmp == A_CAS && k == K_B);
    break;
  default:
    unsupported |= half;
  }
  if ((op == OP_MUL24 || op == OP_MAD24) && (in->flags & F_HI)) unsupported = 1;
  if (op == OP_CVT && ((k == K_F && b == 16) || k == K_BF)
      && in->rnd != R_NONE && in->rnd != R_N)
    unsupported = 1;
  if (op == OP_CVT && (b == 128 || in->t2b == 128)) unsupported = 1;
  if (op == OP_SETP && (k == K_BF || b == 128)) unsupported = 1;
  if ((op == OP_MAD || op == OP_MUL) && k != K_F && (in->flags & F_SAT))
    unsupported = 1;
  if (d->failed) return 0;
  if (unsupported)
    return fail(d, t->line, "unsupported instruction '%.*s'", t->len, t->s);
  return 1;
}

/* A call: call[.uni] [(ret),] name[, (args)]; the callee's .func. */
static int call(dec *d, tok *t, int guard, int gneg) {
  opnd o[3];
  int n = 0;
  for (;;) {
    if (n == 3) return fail(d, t->line, "malformed call");
    if (!operand(d, &o[n++])) return 0;
    if (is(peek(d), ",")) { next(d); continue; }
    break;
  }
  if (!expect(d, ";")) return 0;
  int at = o[0].kind == O_LIST ? 1 : 0;
  if (at >= n || o[at].kind != O_FUNC)
    return fail(d, t->line, "unsupported call");
  func *callee = d->m->funcs[o[at].r];
  const opnd *ret = at ? &o[0] : NULL, *args = at + 1 < n ? &o[at + 1] : NULL;
  ins *in;
  if (!add_ins(d, &in)) return 0;
  in->line = t->line;
  in->guard = (int16_t)guard;
  in->gneg = (uint8_t)gneg;
  if (!strcmp(callee->name, "cudaGraphSetConditional")) {
    if (!args || args->nv != 2 || ret)
      return fail(d, t->line, "malformed call of cudaGraphSetConditional");
    in->op = OP_SETCOND;
    in->a = (int32_t)args->ps[0]->addr;
    in->b = (int32_t)args->ps[1]->addr;
    return 1;
  }
  if (callee->start < 0 && callee->end < 0)
    return fail(d, t->line, "call of '%s', which has no body", callee->name);
  if ((args ? args->nv : 0) != callee->nin || (ret ? ret->nv : 0) != callee->nout)
    return fail(d, t->line, "call of '%s' with the wrong number of parameters",
                callee->name);
  in->op = OP_CALL;
  in->fn = o[at].r;
  /* the caller's parameter frame offsets, read at run time */
  in->vec = (uint8_t)(args ? args->nv : 0);
  in->nd = (uint8_t)(ret ? ret->nv : 0);
  if (in->vec > 4 || in->nd > 1)
    return fail(d, t->line, "call with more than 4 parameters or 1 result");
  for (int i = 0; i < in->vec; i++) in->d[i] = (int32_t)args->ps[i]->addr;
  if (in->nd) in->a = (int32_t)ret->ps[0]->addr;
  if (d->fn->has_bar == 0) d->fn->calls_user = 1;
  return 1;
}

/* Places a function's parameters (formals and call-site .param
   declarations) in the module's parameter frame. */
static int64_t place_fparam(dec *d, size_t size, size_t align) {
  size_t at = align_up(d->m->pframe, align ? align : 1);
  d->m->pframe = at + size;
  return (int64_t)at;
}

/* The body of f, from after '{' to its matching '}'. */
static int body(dec *d, func *f) {
  f->start = (int)d->m->ncode;
  int depth = 1;
  while (depth > 0 && !d->failed) {
    tok *t = next(d);
    if (!t) return fail(d, line_now(d), "unterminated body of '%s'", f->name);
    if (is(t, "{")) { depth++; continue; }
    if (is(t, "}")) { depth--; continue; }
    if (is(t, ";")) continue;
    if (is(t, ".reg")) { if (!decl_reg(d)) return 0; continue; }
    if (is(t, ".loc") || is(t, ".file")) { skip_line(d, t->line); continue; }
    if (is(t, ".pragma")) { skip_statement(d); continue; }
    if (is(t, ".shared")) { /* laid out already */
      size_t size, align;
      tok *name;
      unsigned char *init;
      if (!decl_var(d, &size, &align, &name, &init)) return 0;
      free(init);
      continue;
    }
    if (is(t, ".local") || is(t, ".param")) {
      int local = is(t, ".local");
      size_t size, align;
      tok *name;
      unsigned char *init;
      if (!decl_var(d, &size, &align, &name, &init)) return 0;
      free(init);
      int64_t at;
      if (local) {
        at = (int64_t)align_up(d->m->local_size, align);
        d->m->local_size = (size_t)at + size;
      } else {
        sym *old = find_sym(d->lsyms, d->nlsyms, name);
        if (old && old->space == SP_FPARAM && (size_t)old->size >= size)
          continue; /* the same name in another call sequence */
        at = place_fparam(d, size, align);
      }
      if (!add_sym(d, 1, name, local ? SP_LOCAL : SP_FPARAM, at, (int)size))
        return 0;
      continue;
    }
    if (t->s[0] == '.')
      return fail(d, t->line, "unsupported directive '%.*s'", t->len, t->s);
    if (is(peek(d), ":")) { /* a label */
      next(d);
      if (!PUSH(d, d->labels, d->nlabels, d->clabels)) return fail(d, t->line, "out of memory");
      d->labels[d->nlabels++] = (label){t->s, t->len, (int)d->m->ncode};
      continue;
    }
    int guard = -1, gneg = 0;
    if (is(t, "@")) {
      tok *p = next(d);
      if (is(p, "!")) { gneg = 1; p = next(d); }
      int pred = 0;
      if (!p || (guard = find_reg(d, p, &pred)) < 0 || !pred)
        return fail(d, t->line, "bad guard predicate");
      if (!(t = next(d))) return fail(d, line_now(d), "unexpected end");
    }
    const char *dot = memchr(t->s, '.', (size_t)t->len);
    int baselen = dot ? (int)(dot - t->s) : t->len;
    if (modw(t->s, baselen, "call")) {
      if (!call(d, t, guard, gneg)) return 0;
    } else if (!instruction(d, t, guard, gneg)) {
      return 0;
    }
  }
  f->end = (int)d->m->ncode;
  /* a body falls off its end into a ret */
  ins *in;
  if (!add_ins(d, &in)) return 0;
  in->op = OP_RET;
  in->line = line_now(d);
  f->end = (int)d->m->ncode;
  for (size_t i = 0; i < d->nfix; i++) {
    fixup *x = &d->fix[i];
    size_t j = 0;
    while (j < d->nlabels && !(d->labels[j].len == x->len
                               && !memcmp(d->labels[j].name, x->name, (size_t)x->len)))
      j++;
    if (j == d->nlabels)
      return fail(d, x->line, "unknown label '%.*s'", x->len, x->name);
    d->m->code[x->pc].target = d->labels[j].pc;
  }
  for (int i = f->start; i < f->end; i++)
    if (d->m->code[i].op == OP_BAR) f->has_bar = 1;
  return 1;
}

static int function(dec *d, int entry, int ext) {
  func *f = calloc(1, sizeof *f);
  if (!f) return fail(d, line_now(d), "out of memory");
  sim_module *m = d->m;
  func **v = realloc(m->funcs, (m->nfuncs + 1) * sizeof *v);
  if (!v) { free(f); return fail(d, line_now(d), "out of memory"); }
  m->funcs = v;
  f->m = m;
  f->entry = entry;
  f->start = f->end = -1;
  d->nlsyms = d->nregs = d->nlabels = d->nfix = 0;
  d->fn = f;
  size_t *osize = NULL, *oalign = NULL, *isize = NULL, *ialign = NULL;
  int nout = 0, nin = 0;
  if (!entry && !param_list(d, f, 1, &osize, &oalign, &nout)) goto bad;
  tok *name = next(d);
  if (!name || name->s[0] == '(' || name->s[0] == '.') {
    fail(d, line_now(d), "a function without a name");
    goto bad;
  }
  if (!(f->name = malloc((size_t)name->len + 1))) goto bad;
  memcpy(f->name, name->s, (size_t)name->len);
  f->name[name->len] = '\0';
  m->funcs[m->nfuncs++] = f;
  if (!param_list(d, f, 0, &isize, &ialign, &nin)) goto fail_late;
  f->nin = nin;
  f->nout = nout;
  f->in = calloc((size_t)nin + 1, sizeof *f->in);
  f->out = calloc((size_t)nout + 1, sizeof *f->out);
  if (!f->in || !f->out) goto fail_late;
  if (entry) {
    f->koff = calloc((size_t)nin + 1, sizeof *f->koff);
    f->ksize = calloc((size_t)nin + 1, sizeof *f->ksize);
    if (!f->koff || !f->ksize) goto fail_late;
    size_t at = 0;
    for (int i = 0; i < nin; i++) {
      at = align_up(at, ialign[i]);
      f->koff[i] = at;
      f->ksize[i] = isize[i];
      at += isize[i];
    }
    f->argbytes = at;
  }
  for (size_t i = 0; i < d->nlsyms; i++) { /* place the parameters */
    sym *s = &d->lsyms[i];
    int idx = (int)(-1 - s->addr), out = s->size;
    size_t size = out ? osize[idx] : isize[idx];
    size_t align = out ? oalign[idx] : ialign[idx];
    if (entry) {
      s->addr = (int64_t)f->koff[idx];
    } else {
      s->addr = place_fparam(d, size, align);
      fparam *p = out ? &f->out[idx] : &f->in[idx];
      p->off = (int32_t)s->addr;
      p->size = (int32_t)size;
    }
    s->size = (int)size;
  }
  free(osize), free(oalign), free(isize), free(ialign);
  osize = oalign = isize = ialign = NULL;
  /* performance directives, then a body or a ';' */
  for (tok *t; (t = peek(d)) && !is(t, "{") && !is(t, ";"); next(d)) {}
  if (is(peek(d), ";")) {
    next(d);
    return 1;
  }
  if (ext) return fail(d, line_now(d), "an .extern function with a body");
  next(d);
  return body(d, f);
fail_late:
  free(osize), free(oalign), free(isize), free(ialign);
  return fail(d, line_now(d), "out of memory");
bad:
  free(osize), free(oalign), free(isize), free(ialign);
  free(f->name);
  free(f);
  return 0;
}

static void free_func(func *f) {
  free(f->name);
  free(f->in);
  free(f->out);
  free(f->koff);
  free(f->ksize);
  free(f);
}

void sim_unload(sim_module *m) {
  if (!m) return;
  for (size_t i = 0; i < m->nfuncs; i++) free_func(m->funcs[i]);
  free(m->funcs);
  for (size_t i = 0; i < m->nvars; i++) {
    free(m->vars[i].name);
    free(m->vars[i].data);
  }
  free(m->vars);
  free(m->code);
  free(m->consts);
  free(m);
}

/* Whether f reaches itself through calls (the simulator gives every
   function one frame), and propagates bar.sync to callers. */
static int check_calls(dec *d, int fi, unsigned char *state) {
  func *f = d->m->funcs[fi];
  if (state[fi] == 2) return 1;
  if (state[fi] == 1)
    return fail(d, 0, "recursive call of '%s' is not supported", f->name);
  state[fi] = 1;
  for (int i = f->start; f->start >= 0 && i < f->end; i++) {
    ins *in = &d->m->code[i];
    if (in->op != OP_CALL) continue;
    if (!check_calls(d, in->fn, state)) return 0;
    func *g = d->m->funcs[in->fn];
    if (g->has_bar)
      return fail(d, in->line, "bar.sync in a called function ('%s') is not "
                  "supported", g->name);
    in->target = g->start;
  }
  state[fi] = 2;
  return 1;
}

sim_module *sim_load(const char *ptx, char *err, size_t nerr) {
  dec d;
  memset(&d, 0, sizeof d);
  d.err = err;
  d.nerr = nerr;
  snprintf(err, nerr, "out of memory");
  sim_module *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  d.m = m;
  m->nslots = NSPECIAL;
  if (!lex(&d, ptx)) goto out;
  if (!layout_shared(&d)) goto out;
  for (d.i = 0; d.i < d.nt && !d.failed; ) {
    tok *t = next(&d);
    if (is(t, ".version") || is(t, ".target") || is(t, ".address_size")) {
      skip_line(&d, t->line);
      continue;
    }
    if (is(t, ";") || is(t, ".visible") || is(t, ".weak") || is(t, ".common"))
      continue;
    int ext = 0;
    if (is(t, ".extern")) {
      ext = 1;
      if (!(t = next(&d))) break;
    }
    if (is(t, ".entry") || is(t, ".func")) {
      d.nlsyms = 0;
      function(&d, is(t, ".entry"), ext);
    } else if (is(t, ".global") || is(t, ".const")) {
      decl_global(&d);
    } else if (is(t, ".shared")) {
      size_t size, align;
      tok *name;
      unsigned char *init;
      if (decl_var(&d, &size, &align, &name, &init)) free(init);
    } else if (is(t, ".file") || is(t, ".loc")) {
      skip_line(&d, t->line);
    } else if (is(t, ".section")) {
      while (d.i < d.nt && !is(&d.t[d.i], "}")) d.i++;
      d.i++;
    } else {
      fail(&d, t->line, "unsupported directive '%.*s'", t->len, t->s);
    }
  }
  if (!d.failed) {
    unsigned char *state = calloc(m->nfuncs + 1, 1);
    if (!state) {
      fail(&d, 0, "out of memory");
    } else {
      for (size_t i = 0; i < m->nfuncs && !d.failed; i++)
        check_calls(&d, (int)i, state);
      free(state);
    }
  }
  if (!d.failed && m->nslots > (1 << 20)) fail(&d, 0, "too many registers");
  if (!d.failed) { /* the immediates' slots follow the registers' */
    m->const_base = m->nslots;
    m->nslots += m->nconst;
    for (size_t i = 0; i < m->ncode; i++) {
      ins *in = &m->code[i];
      int32_t *f[] = {&in->a, &in->b, &in->c, &in->e, &in->base, &in->d[0],
                      &in->d[1], &in->d[2], &in->d[3]};
      for (size_t j = 0; j < sizeof f / sizeof *f; j++)
        if (*f[j] >= CONST_MARK) *f[j] = *f[j] - CONST_MARK + m->const_base;
    }
  }
out:
  if (!d.failed && !d.t) d.failed = 0;
  free(d.t), free(d.gsyms), free(d.regs), free(d.lsyms), free(d.labels),
    free(d.fix);
  if (d.failed || !m->code) {
    if (!d.failed && !m->code && m->nfuncs) goto ok; /* only declarations */
    if (d.failed) {
      sim_unload(m);
      return NULL;
    }
  }
ok:
  if (m->pframe == 0) m->pframe = 8;
  if (m->local_size == 0) m->local_size = 8;
  return m;
}

const sim_kernel *sim_kernel_find(const sim_module *m, const char *name) {
  for (size_t i = 0; i < m->nfuncs; i++)
    if (m->funcs[i]->entry && !strcmp(m->funcs[i]->name, name))
      return m->funcs[i];
  return NULL;
}

size_t sim_static_shared(const sim_kernel *k) { return k->m->shared_static; }

/* -- fatbins -------------------------------------------------------------- */

static uint64_t rd(const unsigned char *p, int n) {
  uint64_t v = 0;
  while (n--) v = v << 8 | p[n];
  return v;
}

/* A fatbin: a header (magic 0xba55ed50, version, header size, body size),
   then entries, each with a header (kind 1 PTX, 2 ELF; header size; payload
   size; flags, 0x2000 compressed; ...; uncompressed size at 0x38). */
char *sim_fatbin_ptx(const unsigned char *p, size_t n, char *err,
                     size_t nerr) {
  if (n < 16 || rd(p, 4) != 0xba55ed50u) {
    snprintf(err, nerr, "not a fatbin");
    return NULL;
  }
  size_t at = rd(p + 4, 2) >= 1 ? (size_t)rd(p + 6, 2) : 16;
  size_t end = at + (size_t)rd(p + 8, 8);
  if (end > n) end = n;
  int compressed = 0;
  while (at + 0x40 <= end) {
    const unsigned char *e = p + at;
    size_t hsize = (size_t)rd(e + 4, 4), psize = (size_t)rd(e + 8, 8);
    unsigned kind = (unsigned)rd(e, 2);
    uint64_t flags = rd(e + 0x10, 8);
    if (hsize < 0x40 || at + hsize + psize > end) break;
    if (kind == 1) {
      if (flags & 0x2000) {
        compressed = 1;
      } else {
        const char *text = (const char *)e + hsize;
        size_t len = strnlen(text, psize);
        char *s = malloc(len + 1);
        if (!s) {
          snprintf(err, nerr, "out of memory");
          return NULL;
        }
        memcpy(s, text, len);
        s[len] = '\0';
        return s;
      }
    }
    at += hsize + psize;
  }
  snprintf(err, nerr, compressed
           ? "no PTX in this image the simulator can read (its PTX is "
             "compressed: build it with nvcc -Xfatbin=-compress-all=false "
             "or --no-compress); the simulator runs PTX"
           : "no PTX in this image; the simulator runs PTX");
  return NULL;
}
