/* Itanium C++ mangled names: the parameter types of a kernel's mangled
   name. Bounded by the name's length and iterative, like the PTX reader:
   no input reads outside its buffer or recurses without bound. */
#include "kernel/ptx.h"

#include <stdio.h>
#include <string.h>

static int is_digit(int c) { return c >= '0' && c <= '9'; }
static int is_ident(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) ||
         c == '_';
}

/* ---- Itanium C++ mangled names ----------------------------------------- */

/* A demangled type. Builtins are never substitution candidates; qualified
   types, pointers and class names are, in the order they complete. */
enum { M_VOID, M_VAL, M_PTR, M_CLASS };

typedef struct mtype {
  unsigned char kind;   /* M_* */
  unsigned char type;   /* M_VAL: PTX_*; M_PTR: elem */
  unsigned char size;   /* M_VAL */
  unsigned char cnst;   /* const-qualified itself */
  unsigned char pconst; /* M_PTR: pointee const */
} mtype;

#define MAX_SUBS 256
#define MAX_TARGS 32

/* A cursor over the len bytes of a NUL-terminated name: pos <= len. The
   template arguments of the function's name are what T_, T0_, ... name. */
typedef struct demangler {
  const char *s;
  size_t len, pos;
  int nsubs, ntargs;
  mtype subs[MAX_SUBS];
  mtype targs[MAX_TARGS];
} demangler;

static int dm_peek(const demangler *d) {
  return d->pos < d->len ? (unsigned char)d->s[d->pos] : 0;
}

static int dm_sub(demangler *d, mtype t) {
  if (d->nsubs == MAX_SUBS) return -1;
  d->subs[d->nsubs++] = t;
  return 0;
}

static mtype mval(int type, int size) {
  mtype t;
  memset(&t, 0, sizeof t);
  t.kind = M_VAL;
  t.type = (unsigned char)type;
  t.size = (unsigned char)size;
  return t;
}

/* <source-name> ::= <length> <identifier>; sets *p, *n to the identifier. */
static int source_name(demangler *d, const char **p, size_t *n) {
  size_t len = 0, i;
  if (dm_peek(d) == '0') return -1;
  while (is_digit(dm_peek(d))) {
    len = len * 10 + (size_t)(d->s[d->pos++] - '0');
    if (len > d->len) return -1;
  }
  if (len == 0 || len > d->len - d->pos) return -1;
  for (i = 0; i < len; i++)
    if (!is_ident((unsigned char)d->s[d->pos + i]) && d->s[d->pos + i] != '$')
      return -1;
  *p = d->s + d->pos;
  *n = len;
  d->pos += len;
  return 0;
}

/* S_ is entry 0, S<base-36 seq-id>_ is entry seq-id + 1. */
static int substitution(demangler *d, mtype *t) {
  size_t id = 0;
  int c;
  d->pos++; /* 'S' */
  if (dm_peek(d) != '_') {
    for (;;) {
      c = dm_peek(d);
      if (is_digit(c)) id = id * 36 + (size_t)(c - '0');
      else if (c >= 'A' && c <= 'Z') id = id * 36 + (size_t)(c - 'A' + 10);
      else break;
      if (id > MAX_SUBS) return -1;
      d->pos++;
    }
    if (id == 0 && d->s[d->pos - 1] != '0') return -1; /* St, Sa, ...: std */
    id++;
  }
  if (dm_peek(d) != '_' || id >= (size_t)d->nsubs) return -1;
  d->pos++;
  *t = d->subs[id];
  return 0;
}

/* <template-param>: T_ is argument 0, T<n>_ argument n + 1. */
static int template_param(demangler *d, mtype *t) {
  size_t id = 0;
  d->pos++; /* 'T' */
  if (dm_peek(d) != '_') {
    while (is_digit(dm_peek(d))) {
      id = id * 10 + (size_t)(d->s[d->pos++] - '0');
      if (id > MAX_TARGS) return -1;
    }
    id++;
  }
  if (dm_peek(d) != '_' || id >= (size_t)d->ntargs) return -1;
  d->pos++;
  *t = d->targs[id];
  return 0;
}

/* <type>: a run of P and r/V/K (each qualifier run in that order) around a
   builtin, DF16_, a class name, a template parameter or a substitution.
   The run is folded from the inside out afterwards, so nothing recurses. */
static int parse_type(demangler *d, mtype *t) {
  static const char builtin[] = "bcahstijlmxyfd";
  static const unsigned char btype[] = {
    CG_U8, CG_I8, CG_I8, CG_U8, CG_I16, CG_U16, CG_I32, CG_U32,
    CG_I64, CG_U64, CG_I64, CG_U64, CG_F32, CG_F64};
  size_t start = d->pos, i, n;
  const char *p, *q;
  int c, rank = 0, r;
  for (;;) { /* rank: 1 r, 2 V, 3 K within one qualifier run */
    c = dm_peek(d);
    if (c == 'P') rank = 0;
    else if ((r = c == 'r' ? 1 : c == 'V' ? 2 : c == 'K' ? 3 : 0) > rank)
      rank = r;
    else break;
    d->pos++;
  }
  if (c == 'r' || c == 'V' || c == 'K') return -1; /* out of order */
  n = d->pos;
  if (c == 'v') {
    memset(t, 0, sizeof *t);
    t->kind = M_VOID;
    d->pos++;
  } else if (c && (q = strchr(builtin, c)) != NULL) {
    i = (size_t)(q - builtin);
    *t = mval(btype[i], cg_type_size[btype[i]]);
    d->pos++;
  } else if (c == 'D') {
    /* _Float16 (DF16_; older compilers: Dh) is f16, std::bfloat16_t
       (DF16b) bf16 */
    if (d->len - d->pos >= 5 && memcmp(d->s + d->pos, "DF16_", 5) == 0) {
      *t = mval(CG_F16, 2);
      d->pos += 5;
    } else if (d->len - d->pos >= 5 &&
               memcmp(d->s + d->pos, "DF16b", 5) == 0) {
      *t = mval(CG_BF16, 2);
      d->pos += 5;
    } else if (d->len - d->pos >= 2 && d->s[d->pos + 1] == 'h') {
      *t = mval(CG_F16, 2);
      d->pos += 2;
    } else {
      return -1;
    }
  } else if (is_digit(c)) {
    if (source_name(d, &p, &i)) return -1;
    /* cuda_fp16.h and cuda_bf16.h: struct __half, struct __nv_bfloat16 */
    if (i == 6 && memcmp(p, "__half", 6) == 0) {
      *t = mval(CG_F16, 2);
    } else if (i == 13 && memcmp(p, "__nv_bfloat16", 13) == 0) {
      *t = mval(CG_BF16, 2);
    } else {
      memset(t, 0, sizeof *t);
      t->kind = M_CLASS;
    }
    if (dm_sub(d, *t)) return -1;
  } else if (c == 'S') {
    if (substitution(d, t)) return -1;
  } else if (c == 'T') {
    if (template_param(d, t) || dm_sub(d, *t)) return -1;
  } else {
    return -1;
  }
  while (n > start) {
    if (d->s[n - 1] == 'P') {
      t->pconst = t->cnst;
      t->type = (unsigned char)(t->kind == M_VAL ? cg_pointee(t->type) : CG_P_ANY);
      t->kind = M_PTR;
      t->size = 8;
      t->cnst = 0;
      n--;
    } else {
      for (; n > start && d->s[n - 1] != 'P'; n--)
        if (d->s[n - 1] == 'K') t->cnst = 1;
    }
    if (dm_sub(d, *t)) return -1;
  }
  return 0;
}

/* <template-args> of the function's name: I <arg>+ E, each a type (as in
   parameters) or a literal L <builtin> <number> E, which no type names. */
static int template_args(demangler *d) {
  mtype t;
  d->pos++; /* 'I' */
  d->ntargs = 0;
  while (dm_peek(d) != 'E') {
    if (d->ntargs == MAX_TARGS) return -1;
    if (dm_peek(d) == 'L') { /* L <type> [n] <digits> E */
      d->pos++;
      if (!is_ident(dm_peek(d))) return -1;
      d->pos++;
      if (dm_peek(d) == 'n') d->pos++;
      if (!is_digit(dm_peek(d))) return -1;
      while (is_digit(dm_peek(d))) d->pos++;
      if (dm_peek(d) != 'E') return -1;
      d->pos++;
      memset(&t, 0, sizeof t);
      t.kind = M_CLASS;
    } else if (parse_type(d, &t)) {
      return -1; /* packs (J), expressions (X) and the rest: not modelled */
    }
    d->targs[d->ntargs++] = t;
  }
  d->pos++;
  return d->ntargs ? 0 : -1;
}

/* <name>: a source-name (optionally L, internal linkage) or N <source-name>+
   E, either maybe with template arguments; namespaces are dropped, but
   every proper prefix is a candidate, and the template's name. Sets
   *templ when the name has template arguments (its return type follows). */
static int parse_name(demangler *d, char *base, size_t baselen, int *templ) {
  const char *p = NULL;
  size_t n = 0;
  mtype ns;
  int k;
  memset(&ns, 0, sizeof ns);
  ns.kind = M_CLASS;
  *templ = 0;
  if (dm_peek(d) == 'L') d->pos++;
  if (dm_peek(d) != 'N') {
    if (source_name(d, &p, &n)) return -1;
    if (dm_peek(d) == 'I') {
      if (dm_sub(d, ns) || template_args(d)) return -1;
      *templ = 1;
    }
  } else {
    d->pos++;
    for (k = 0; dm_peek(d) != 'E'; k++) {
      if (k > 0 && dm_sub(d, ns)) return -1;
      if (*templ) return -1; /* a member of a class template: not modelled */
      if (source_name(d, &p, &n)) return -1;
      if (dm_peek(d) == 'I') {
        if (dm_sub(d, ns) || template_args(d)) return -1;
        *templ = 1;
      }
    }
    if (k == 0) return -1;
    d->pos++;
  }
  if (!base) return 0;
  if (n >= baselen) return -1;
  memcpy(base, p, n);
  base[n] = '\0';
  return 0;
}

int ptx_demangle(const char *mangled, char *base, size_t baselen,
                 cg_param *out, int max) {
  demangler d;
  mtype t;
  int k = 0;
  if (!mangled) return -1;
  d.s = mangled;
  d.len = strlen(mangled);
  d.pos = 0;
  d.nsubs = 0;
  d.ntargs = 0;
  if (d.len < 2 || mangled[0] != '_' || mangled[1] != 'Z') return -1;
  d.pos = 2;
  int templ;
  if (parse_name(&d, base, baselen, &templ)) return -1;
  if (templ && (d.pos == d.len || parse_type(&d, &t) || t.kind != M_VOID))
    return -1; /* a template function's return type: kernels return void */
  if (d.pos + 1 == d.len && mangled[d.pos] == 'v') return 0; /* f(void) */
  if (d.pos == d.len) return -1; /* a variable, not a function */
  while (d.pos < d.len) {
    if (parse_type(&d, &t) || k >= max || !out) return -1;
    if (t.kind == M_PTR)
      out[k++] = cg_pointer_param(t.type, t.pconst);
    else if (t.kind == M_VAL)
      out[k++] = cg_value_param(t.type, t.size, t.size);
    else
      return -1; /* void among others, or a class by value */
  }
  return k;
}

