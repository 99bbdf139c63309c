/* Element types and the C spellings of types, pure C (no CUDA, no Lua):
   what value conversion and kernel signatures share. Every reader is
   bounded by the string's NUL and iterative. */
#include "base/ctype.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *const cg_type_names[] = {
  "f32", "f64", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f16",
  "bf16", NULL
};
const unsigned char cg_type_size[] = { 4, 8, 1, 1, 2, 2, 4, 4, 8, 8, 2, 2 };

void cg_seterr(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  if (!err || errlen == 0) return;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

cg_param cg_value_param(int type, unsigned size, unsigned align) {
  cg_param p;
  memset(&p, 0, sizeof p);
  p.type = (unsigned char)type;
  p.elem = CG_P_ANY;
  p.size = size;
  p.align = align;
  return p;
}

cg_param cg_pointer_param(int elem, int is_const) {
  cg_param p = cg_value_param(CG_P_PTR, 8, 8);
  p.elem = (unsigned char)elem;
  p.is_const = (unsigned char)(is_const != 0);
  return p;
}

int cg_pointee(int t) { return t < CG_NTYPES ? t : CG_P_ANY; }

static int is_alpha(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static int is_ident(int c) {
  return is_alpha(c) || (c >= '0' && c <= '9') || c == '_';
}
static int is_space(int c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}

/* Words that name a type alone; type CG_P_ANY is void. */
static const struct {
  const char *name;
  unsigned char type, size;
} named_types[] = {
  {"void", CG_P_ANY, 0},     {"float", CG_F32, 4},   {"double", CG_F64, 8},
  {"bool", CG_U8, 1},      {"int8_t", CG_I8, 1},   {"uint8_t", CG_U8, 1},
  {"int16_t", CG_I16, 2},  {"uint16_t", CG_U16, 2},
  {"int32_t", CG_I32, 4},  {"uint32_t", CG_U32, 4},
  {"int64_t", CG_I64, 8},  {"uint64_t", CG_U64, 8},
  {"size_t", CG_U64, 8},   {"f32", CG_F32, 4},     {"f64", CG_F64, 8},
  {"i8", CG_I8, 1},        {"u8", CG_U8, 1},       {"i16", CG_I16, 2},
  {"u16", CG_U16, 2},      {"i32", CG_I32, 4},     {"u32", CG_U32, 4},
  {"i64", CG_I64, 8},      {"u64", CG_U64, 8},     {"f16", CG_F16, 2},
  {"bf16", CG_BF16, 2},    {"__half", CG_F16, 2},  {"half", CG_F16, 2},
  {"__nv_bfloat16", CG_BF16, 2}, {"nv_bfloat16", CG_BF16, 2},
  {"cudaGraphConditionalHandle", CG_U64, 8},
  {"CUgraphConditionalHandle", CG_U64, 8},
  {"cudaTextureObject_t", CG_U64, 8}, {"CUtexObject", CG_U64, 8},
  {"cudaSurfaceObject_t", CG_U64, 8}, {"CUsurfObject", CG_U64, 8},
};
#define NNAMED ((int)(sizeof named_types / sizeof named_types[0]))

/* The words of C's integer types, counted. */
enum { W_SIGNED, W_UNSIGNED, W_SHORT, W_LONG, W_INT, W_CHAR, W_NAMED, NW };
static const char *const spec_words[] = {"signed", "unsigned", "short",
                                         "long", "int", "char"};

static int word_is(const char *p, size_t n, const char *w) {
  return strlen(w) == n && memcmp(p, w, n) == 0;
}

/* Resolves the counted words (named: index in named_types) to a type and
   size; -1 for a combination C does not have. */
static int resolve(const int *w, int named, int *type, unsigned *size) {
  int sign = w[W_SIGNED] + w[W_UNSIGNED], u = w[W_UNSIGNED];
  if (w[W_NAMED]) {
    if (w[W_NAMED] > 1 || sign || w[W_SHORT] || w[W_LONG] || w[W_INT] ||
        w[W_CHAR])
      return -1;
    *type = named_types[named].type;
    *size = named_types[named].size;
    return 0;
  }
  if (sign > 1 || w[W_INT] > 1) return -1;
  if (w[W_CHAR]) {
    if (w[W_CHAR] > 1 || w[W_SHORT] || w[W_LONG] || w[W_INT]) return -1;
    *type = u ? CG_U8 : CG_I8;
  } else if (w[W_SHORT]) {
    if (w[W_SHORT] > 1 || w[W_LONG]) return -1;
    *type = u ? CG_U16 : CG_I16;
  } else if (w[W_LONG]) {
    if (w[W_LONG] > 2) return -1;
    *type = u ? CG_U64 : CG_I64; /* LP64: long is 64 bits */
  } else {
    if (!sign && !w[W_INT]) return -1;
    *type = u ? CG_U32 : CG_I32;
  }
  *size = cg_type_size[*type];
  return 0;
}

static int unknown_type(const char *w, size_t n, int k, char *err,
                        size_t errlen) {
  cg_seterr(err, errlen, "signature: unknown type '%.*s' in parameter %d",
         (int)(n < 64 ? n : 64), w, k);
  return -1;
}

/* Parses one parameter from *pp up to ',' or the end; k counts from 1.
   Returns 1 with *p set, 0 for an empty parameter, 2 for a lone "void",
   -1 with err. */
static int sig_param(const char **pp, int k, cg_param *p, char *err,
                     size_t errlen) {
  const char *s = *pp, *w, *tb = NULL, *te = NULL;
  int words[NW] = {0}, named = 0, nptr = 0, cnst = 0, pcnst = 0, name = 0;
  int i, j, type, any = 0;
  unsigned size;
  size_t n;
  for (;; s++) {
    while (is_space((unsigned char)*s)) s++;
    if (*s == '\0' || *s == ',') break;
    any = 1;
    if (*s == '*') {
      if (!tb || name) goto malformed;
      nptr++;
      pcnst = cnst; /* const so far qualifies what this pointer points to */
      cnst = 0;
      continue;
    }
    if (!is_alpha((unsigned char)*s) && *s != '_') goto malformed;
    for (w = s; is_ident((unsigned char)s[1]); s++) {}
    n = (size_t)(s + 1 - w);
    if (name) goto malformed;
    if (word_is(w, n, "const")) {
      cnst = 1;
      continue;
    }
    if (word_is(w, n, "restrict") || word_is(w, n, "__restrict__") ||
        word_is(w, n, "__restrict")) {
      if (!nptr) goto malformed;
      continue;
    }
    for (i = 0; i < W_NAMED && !word_is(w, n, spec_words[i]); i++) {}
    if (i == W_NAMED) {
      for (j = 0; j < NNAMED && !word_is(w, n, named_types[j].name); j++) {}
      if (j == NNAMED) {
        if (!tb) return unknown_type(w, n, k, err, errlen);
        name = 1; /* a parameter name ends the parameter */
        continue;
      }
      named = j;
    }
    if (nptr) goto malformed; /* a type word after '*' */
    words[i]++;
    if (!tb) tb = w;
    te = s + 1;
  }
  *pp = s;
  if (!any) return 0;
  if (!tb) goto malformed; /* "const" alone */
  if (resolve(words, named, &type, &size))
    return unknown_type(tb, (size_t)(te - tb), k, err, errlen);
  if (nptr) {
    *p = cg_pointer_param(nptr > 1 ? CG_P_ANY : cg_pointee(type), pcnst);
  } else if (type == CG_P_ANY) {
    if (!name) return 2; /* void by value: only as the whole list */
    cg_seterr(err, errlen, "signature: parameter %d is void", k);
    return -1;
  } else {
    *p = cg_value_param(type, size, size);
  }
  return 1;
malformed:
  cg_seterr(err, errlen, "signature: malformed parameter %d", k);
  return -1;
}

int cg_signature(const char *sig, cg_param *out, int max, char *err,
                  size_t errlen) {
  const char *s = sig ? sig : "";
  cg_param p;
  int k = 0, r;
  for (;;) {
    r = sig_param(&s, k + 1, &p, err, errlen);
    if (r < 0) return -1;
    if (r == 0 && (k > 0 || *s == ',')) {
      cg_seterr(err, errlen, "signature: malformed parameter %d", k + 1);
      return -1;
    }
    if (r == 2) { /* "void" is the whole of an empty list */
      if (k == 0 && *s == '\0') return 0;
      cg_seterr(err, errlen, "signature: parameter %d is void", k + 1);
      return -1;
    }
    if (r == 1) {
      if (k >= max || !out) {
        cg_seterr(err, errlen, "signature: more than %d parameters",
               max < 0 ? 0 : max);
        return -1;
      }
      out[k++] = p;
    }
    if (*s == '\0') return k;
    s++; /* ',' */
  }
}
