/* PTX text to tokens: words and single punctuation, type names and
   literals; and the decoder's one failure message. */
#define _POSIX_C_SOURCE 200809L
#include "ptx_dec.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int dec_fail(dec *d, int line, const char *fmt, ...) {
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

int dec_grow(void **v, size_t *cap, size_t n, size_t size) {
  if (n < *cap) return 1;
  size_t c = *cap ? 2 * *cap : 16;
  void *p = realloc(*v, c * size);
  if (!p) return 0;
  *v = p;
  *cap = c;
  return 1;
}

/* -- lexing --------------------------------------------------------------- */

static int word_ch(int c) {
  return isalnum(c) || c == '_' || c == '$' || c == '%' || c == '.'
         || c == ':';
}

/* Splits comment-free text into words and single punctuation. A word may
   hold "::" (ld.global.L1::evict_last); a label's ':' stands alone. */
int dec_lex(dec *d, const char *s) {
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
    if (!dec_grow((void **)&d->t, &cap, d->nt, sizeof *d->t)) return 0;
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

int dec_expect(dec *d, const char *w) {
  tok *t = next(d);
  if (is(t, w)) return 1;
  return dec_fail(d, t ? t->line : line_now(d), "expected '%s', got '%.*s'", w,
                  t ? t->len : 0, t ? t->s : "");
}

/* -- types ---------------------------------------------------------------- */

int dec_parse_type(const char *s, int len, uint8_t *k, uint8_t *b) {
  static const struct { const char *n; uint8_t k, b; } types[] = {
    {"b8", K_B, 8}, {"b16", K_B, 16}, {"b32", K_B, 32}, {"b64", K_B, 64},
    {"u8", K_U, 8}, {"u16", K_U, 16}, {"u32", K_U, 32}, {"u64", K_U, 64},
    {"s8", K_S, 8}, {"s16", K_S, 16}, {"s32", K_S, 32}, {"s64", K_S, 64},
    {"f16", K_F, 16}, {"f32", K_F, 32}, {"f64", K_F, 64}, {"pred", K_PRED, 1},
    {"bf16", K_BF, 16}, {"b128", K_B, 128}, {"f16x2", K_H2, 32},
    {"bf16x2", K_BH2, 32},
  };
  for (size_t i = 0; i < sizeof types / sizeof *types; i++)
    if ((size_t)len == strlen(types[i].n) && !memcmp(types[i].n, s, (size_t)len)) {
      *k = types[i].k;
      *b = types[i].b;
      return 1;
    }
  return 0;
}

/* -- numbers -------------------------------------------------------------- */

/* An integer or float literal: 0f3F800000 (f32 bits), 0d... (f64 bits),
   0x.., 0.., decimal, a trailing U. *isf: 0 integer, 32 or 64 float bits. */
int dec_parse_number(const tok *t, int neg, uint64_t *v, int *isf) {
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
