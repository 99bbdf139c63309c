/* Kernel signatures and module variables from PTX text (mangled names:
   demangle.c). Every reader is bounded by an explicit length and
   iterative: no input reads outside its buffer or recurses. */
#include "kernel/ptx.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Largest parameter (array) accepted; real ones are at most a few KB. */
#define MAX_PARAM_BYTES (1ul << 24)

static int is_digit(int c) { return c >= '0' && c <= '9'; }
static int is_alpha(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static int is_ident(int c) { return is_alpha(c) || is_digit(c) || c == '_'; }
static int is_space(int c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}

/* ---- PTX text ---------------------------------------------------------- */

/* A cursor over len bytes: pos <= len always, and no token passes len. */
typedef struct lexer {
  const char *s;
  size_t len, pos;
} lexer;

typedef struct token {
  const char *p;
  size_t n; /* 0 only at the end of the text */
} token;

/* Directives, instructions, identifiers and numbers lex as one word. */
static int is_word(int c) {
  return is_ident(c) || c == '$' || c == '%' || c == '.';
}

/* Next token, past white space and comments; a string literal is one token
   (so a quoted ".entry" is not one); anything else is a single byte. */
static token lex(lexer *lx) {
  const char *s = lx->s;
  size_t i = lx->pos, n = lx->len, j;
  token t;
  for (;;) {
    while (i < n && is_space((unsigned char)s[i])) i++;
    if (i + 1 < n && s[i] == '/' && s[i + 1] == '/') {
      for (i += 2; i < n && s[i] != '\n'; i++) {}
    } else if (i + 1 < n && s[i] == '/' && s[i + 1] == '*') {
      for (i += 2; i < n && !(i + 1 < n && s[i] == '*' && s[i + 1] == '/');
           i++) {}
      i = i < n ? i + 2 : n; /* an unclosed comment runs to the end */
    } else {
      break;
    }
  }
  t.p = s + i;
  t.n = 0;
  if (i < n) {
    j = i + 1;
    if (is_word((unsigned char)s[i])) {
      while (j < n && is_word((unsigned char)s[j])) j++;
    } else if (s[i] == '"') {
      while (j < n && s[j] != '"' && s[j] != '\n')
        j += (s[j] == '\\' && j + 1 < n) ? 2 : 1;
      if (j < n && s[j] == '"') j++;
    }
    t.n = j - i;
    i = j;
  }
  lx->pos = i;
  return t;
}

/* The last token ended the text inside a word: a bad word there may just
   be cut short. */
static int cut(const lexer *lx) {
  return lx->pos == lx->len && lx->len > 0 &&
         is_word((unsigned char)lx->s[lx->len - 1]);
}

static int tok_is(token t, const char *w) {
  size_t n = strlen(w);
  return t.n == n && memcmp(t.p, w, n) == 0;
}

/* A decimal number in 1..max, else 0. */
static unsigned long tok_num(token t, unsigned long max) {
  unsigned long v = 0;
  size_t i;
  if (t.n == 0) return 0;
  for (i = 0; i < t.n; i++) {
    if (!is_digit((unsigned char)t.p[i])) return 0;
    v = v * 10 + (unsigned long)(t.p[i] - '0');
    if (v > max) return 0;
  }
  return v;
}

/* PTX identifier: [A-Za-z][A-Za-z0-9_$]* or [_$%][A-Za-z0-9_$]+. */
static int tok_ident(token t) {
  size_t i;
  int c = t.n ? (unsigned char)t.p[0] : 0;
  if (!is_alpha(c) && !((c == '_' || c == '$' || c == '%') && t.n > 1))
    return 0;
  for (i = 1; i < t.n; i++) {
    c = (unsigned char)t.p[i];
    if (!is_ident(c) && c != '$') return 0;
  }
  return 1;
}

static const struct {
  const char *name;
  unsigned char type, size;
} ptx_types[] = {
  {".u8", CG_P_INT, 1},   {".s8", CG_P_INT, 1},   {".b8", CG_P_INT, 1},
  {".u16", CG_P_INT, 2},  {".s16", CG_P_INT, 2},  {".b16", CG_P_INT, 2},
  {".f16", CG_P_INT, 2},  {".u32", CG_P_INT, 4},  {".s32", CG_P_INT, 4},
  {".b32", CG_P_INT, 4},  {".f32", CG_F32, 4},  {".u64", CG_P_PTR_OR_INT, 8},
  {".s64", CG_P_PTR_OR_INT, 8}, {".b64", CG_P_PTR_OR_INT, 8},
  {".f64", CG_F64, 8},
};

static int ptx_type(token t) {
  size_t i;
  for (i = 0; i < sizeof ptx_types / sizeof ptx_types[0]; i++)
    if (tok_is(t, ptx_types[i].name)) return (int)i;
  return -1;
}

static int tok_qualifier(token t) {
  return tok_is(t, ".ptr") || tok_is(t, ".global") || tok_is(t, ".const") ||
         tok_is(t, ".local") || tok_is(t, ".shared");
}

enum { P_OK, P_BAD, P_END };

/* One ".param [qualifiers] .type name[dims]" whose first token is t; the
   caller reads the ',' or ')' after it. P_END: the text ended inside it. */
static int parse_param(lexer *lx, token t, cg_param *p) {
  int k = -1, i;
  unsigned long align = 0, count = 1, dim, esize;
  int array = 0;
  lexer save;
  if (t.n == 0) return P_END;
  if (!tok_is(t, ".param")) return P_BAD;
  for (;;) {
    t = lex(lx);
    if (t.n == 0) return P_END;
    /* ".ptr.global.align" lexes as one word: take its parts one by one */
    while (t.n > 1 && t.p[0] == '.' && memchr(t.p + 1, '.', t.n - 1)) {
      token part = { t.p, (size_t)((const char *)memchr(t.p + 1, '.', t.n - 1)
                                   - t.p) };
      if (!tok_qualifier(part)) return P_BAD;
      t.p += part.n;
      t.n -= part.n;
    }
    if (tok_is(t, ".align")) {
      t = lex(lx);
      if (t.n == 0) return P_END;
      if (align || !(align = tok_num(t, 4096)) || (align & (align - 1)))
        return P_BAD;
    } else if (tok_qualifier(t)) {
      continue;
    } else if ((i = ptx_type(t)) >= 0) {
      if (k >= 0) return P_BAD;
      k = i;
    } else if (k >= 0 && tok_ident(t)) {
      break; /* the name */
    } else {
      return P_BAD;
    }
  }
  esize = ptx_types[k].size;
  for (;;) {
    save = *lx;
    t = lex(lx);
    if (!tok_is(t, "[")) {
      *lx = save;
      break;
    }
    t = lex(lx);
    if (t.n == 0) return P_END;
    if (!(dim = tok_num(t, MAX_PARAM_BYTES))) return P_BAD;
    t = lex(lx);
    if (t.n == 0) return P_END;
    if (!tok_is(t, "]") || count > MAX_PARAM_BYTES / esize / dim) return P_BAD;
    count *= dim;
    array = 1;
  }
  /* With .ptr, .align is the pointee's: it only shapes arrays. */
  if (array)
    *p = cg_value_param(CG_P_BYTES, (unsigned)(count * esize),
                     (unsigned)(align ? align : esize));
  else
    *p = cg_value_param(ptx_types[k].type, ptx_types[k].size, ptx_types[k].size);
  return P_OK;
}

/* Name and parameter list of the .entry just lexed, into e (zeroed). */
static int parse_entry(lexer *lx, ptx_entry *e, char *err, size_t errlen) {
  token t = lex(lx);
  lexer save;
  cg_param p;
  int k, r;
  if (t.n == 0 || (!tok_ident(t) && cut(lx))) {
    cg_seterr(err, errlen, "truncated PTX: .entry without a name");
    return -1;
  }
  if (!tok_ident(t)) {
    cg_seterr(err, errlen, "malformed PTX: .entry without a valid name");
    return -1;
  }
  if (t.n >= sizeof e->name) {
    cg_seterr(err, errlen, "entry name over %d characters: '%.40s...'",
           (int)sizeof e->name - 1, t.p);
    return -1;
  }
  memcpy(e->name, t.p, t.n);
  e->name[t.n] = '\0';
  save = *lx;
  t = lex(lx);
  if (t.n == 0) {
    cg_seterr(err, errlen, "truncated PTX: entry '%s' ends after its name",
           e->name);
    return -1;
  }
  if (!tok_is(t, "(")) { /* ".entry name {": no parameter list */
    *lx = save;
    return 0;
  }
  t = lex(lx);
  if (tok_is(t, ")")) return 0;
  for (k = 1;; k++) {
    r = parse_param(lx, t, &p);
    if (r == P_OK && e->nparams == CG_MAX_PARAMS) {
      cg_seterr(err, errlen, "entry '%s' has more than %d parameters", e->name,
             CG_MAX_PARAMS);
      return -1;
    }
    if (r == P_OK) {
      e->params[e->nparams++] = p;
      t = lex(lx);
      if (tok_is(t, ")")) return 0;
      r = t.n == 0 ? P_END : tok_is(t, ",") ? P_OK : P_BAD;
    }
    if (r == P_BAD && cut(lx)) r = P_END;
    if (r == P_END) {
      cg_seterr(err, errlen, "truncated PTX: entry '%s' has no closing ')'",
             e->name);
      return -1;
    }
    if (r == P_BAD) {
      cg_seterr(err, errlen, "malformed parameter %d of entry '%s'", k, e->name);
      return -1;
    }
    t = lex(lx);
  }
}

/* Takes the C types of a mangled name when they agree with the PTX in count
   and sizes; base is then the unscoped function name, else the entry name
   (cut to fit base). */
static void type_entry(ptx_entry *e) {
  cg_param c[CG_MAX_PARAMS];
  char base[sizeof e->base];
  int i, k = ptx_demangle(e->name, base, sizeof base, c, CG_MAX_PARAMS);
  size_t m;
  for (i = 0; k == e->nparams && i < k; i++)
    if (c[i].size != e->params[i].size) k = -1;
  if (k == e->nparams) {
    memcpy(e->params, c, (size_t)k * sizeof c[0]);
    memcpy(e->base, base, strlen(base) + 1);
    e->typed = 1;
    return;
  }
  m = strlen(e->name);
  if (m >= sizeof e->base) m = sizeof e->base - 1;
  memcpy(e->base, e->name, m);
  e->base[m] = '\0';
  e->typed = 0;
}

ptx_entry *ptx_parse(const char *src, size_t len, int *n, char *err,
                     size_t errlen) {
  lexer lx;
  token t;
  ptx_entry *v = NULL, *grown;
  size_t cap = 0, cnt = 0, i;
  int version = 0, target = 0;
  if (n) *n = 0;
  lx.s = src ? src : "";
  lx.len = src ? len : 0;
  lx.pos = 0;
  for (;;) {
    t = lex(&lx);
    if (t.n == 0) break;
    if (tok_is(t, ".version")) {
      version = 1;
    } else if (tok_is(t, ".target")) {
      target = 1;
    } else if (tok_is(t, ".entry")) {
      if (!version || !target) break;
      if (cnt == cap) {
        cap = cap ? 2 * cap : 8;
        if (cap > (size_t)INT_MAX || !(grown = realloc(v, cap * sizeof *v))) {
          free(v);
          cg_seterr(err, errlen, "out of memory");
          return NULL;
        }
        v = grown;
      }
      memset(&v[cnt], 0, sizeof v[cnt]);
      if (parse_entry(&lx, &v[cnt], err, errlen)) {
        free(v);
        return NULL;
      }
      cnt++;
    }
  }
  if (!version || !target) {
    free(v);
    cg_seterr(err, errlen, "not PTX (no .version/.target directive)");
    return NULL;
  }
  if (!v && !(v = calloc(1, sizeof *v))) {
    cg_seterr(err, errlen, "out of memory");
    return NULL;
  }
  for (i = 0; i < cnt; i++) type_entry(&v[i]);
  if (n) *n = (int)cnt;
  return v;
}

/* The element type a variable's PTX type names: .u and .s types and the
   floats say; .b types and .pred do not (-1). */
static int var_type(token t, unsigned *size) {
  static const struct { const char *name; int type; unsigned size; } v[] = {
    {".f32", CG_F32, 4}, {".f64", CG_F64, 8}, {".s8", CG_I8, 1},
    {".u8", CG_U8, 1}, {".s16", CG_I16, 2}, {".u16", CG_U16, 2},
    {".s32", CG_I32, 4}, {".u32", CG_U32, 4}, {".s64", CG_I64, 8},
    {".u64", CG_U64, 8}, {".f16", CG_F16, 2}, {".bf16", CG_BF16, 2},
    {".b8", -1, 1}, {".b16", -1, 2}, {".b32", -1, 4}, {".b64", -1, 8},
    {".f16x2", -1, 4}, {".bf16x2", -1, 4},
  };
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    if (tok_is(t, v[i].name)) {
      *size = v[i].size;
      return v[i].type;
    }
  *size = 0;
  return -2;
}

/* One declaration after its .global or .const: [.align n] [.v2|.v4] .type
   name [dims]. 0 when it is not one this reader models (it is skipped). */
static int parse_global(lexer *lx, ptx_global *g) {
  token t = lex(lx);
  unsigned long long vec = 1, count = 1;
  unsigned size;
  while (tok_is(t, ".align") || tok_is(t, ".attribute")) {
    if (tok_is(t, ".align")) t = lex(lx);
    t = lex(lx);
  }
  if (tok_is(t, ".v2") || tok_is(t, ".v4")) {
    vec = (unsigned long long)(t.p[2] - '0');
    t = lex(lx);
  }
  int type = var_type(t, &size);
  if (type == -2) return 0;
  t = lex(lx);
  if (!tok_ident(t) || t.p[0] == '$' || t.n >= sizeof g->name) return 0;
  memcpy(g->name, t.p, t.n);
  g->name[t.n] = '\0';
  size_t save = lx->pos;
  for (t = lex(lx); tok_is(t, "["); t = lex(lx)) {
    unsigned long d = tok_num(lex(lx), 1ul << 40);
    if (!d || !tok_is(lex(lx), "]") || count > (1ull << 40) / d) return 0;
    count *= d;
    save = lx->pos;
  }
  lx->pos = save;
  g->type = vec == 1 ? type : -1;
  g->bytes = count * vec * size;
  return 1;
}

ptx_global *ptx_globals(const char *src, size_t len, int *n, char *err,
                        size_t errlen) {
  lexer lx = { src ? src : "", src ? len : 0, 0 };
  ptx_global *v = NULL, *grown;
  size_t cap = 0, cnt = 0;
  *n = 0;
  for (token t = lex(&lx); t.n; t = lex(&lx)) {
    int cnst = tok_is(t, ".const");
    if (!cnst && !tok_is(t, ".global")) continue;
    if (cnt == cap) {
      cap = cap ? 2 * cap : 8;
      if (cap > (size_t)INT_MAX || !(grown = realloc(v, cap * sizeof *v))) {
        free(v);
        cg_seterr(err, errlen, "out of memory");
        return NULL;
      }
      v = grown;
    }
    memset(&v[cnt], 0, sizeof v[cnt]);
    v[cnt].constant = cnst;
    if (parse_global(&lx, &v[cnt])) cnt++;
  }
  if (!v && !(v = calloc(1, sizeof *v))) {
    cg_seterr(err, errlen, "out of memory");
    return NULL;
  }
  *n = (int)cnt;
  return v;
}
