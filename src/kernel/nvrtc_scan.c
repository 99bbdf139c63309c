/* The names whose C types core.compile asks NVRTC for in the compile
   itself: extern "C" kernels (PTX spells their parameters without C types)
   and device variables of the global namespace, read from the source's
   text before it is compiled. A guess: the preprocessor does not run here
   (its directives are skipped, macros not expanded, #if not decided), so a
   name may be missed (core.compile asks for it in a second, front-end
   compile, as it asks for every name without this) or be wrong (one inside
   #if 0: the compile is made again without the guesses). */
#include <string.h>
#include "kernel/nvrtc.h"

enum { MAXNAME = 255, MAXDEPTH = 64 };

typedef struct lexer {
  const char *p, *end;
  int bol;           /* at the start of a line (only blanks before) */
} lexer;

typedef enum { T_END, T_IDENT, T_STRING, T_PUNCT } tkind;

typedef struct token {
  tkind kind;
  const char *s;
  size_t n;
} token;

static int ident_char(char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9');
}

/* Skips a directive's line and its continuations. */
static void skip_directive(lexer *x) {
  while (x->p < x->end && *x->p != '\n') {
    if (*x->p == '\\' && x->p + 1 < x->end && x->p[1] == '\n') x->p++;
    x->p++;
  }
}

/* Skips a literal opened by q ('"' or '\''), escapes included. */
static void skip_literal(lexer *x, char q) {
  for (x->p++; x->p < x->end && *x->p != q && *x->p != '\n'; x->p++)
    if (*x->p == '\\' && x->p + 1 < x->end) x->p++;
  if (x->p < x->end && *x->p == q) x->p++;
}

static token next(lexer *x) {
  for (;;) {
    while (x->p < x->end && (*x->p == ' ' || *x->p == '\t' || *x->p == '\r' ||
                             *x->p == '\n' || *x->p == '\f' || *x->p == '\v')) {
      if (*x->p == '\n') x->bol = 1;
      x->p++;
    }
    if (x->p >= x->end) return (token){ T_END, x->p, 0 };
    if (x->p[0] == '/' && x->p + 1 < x->end && x->p[1] == '/') {
      while (x->p < x->end && *x->p != '\n') x->p++;
      continue;
    }
    if (x->p[0] == '/' && x->p + 1 < x->end && x->p[1] == '*') {
      const char *e = x->p + 2;
      while (e + 1 < x->end && !(e[0] == '*' && e[1] == '/')) e++;
      x->p = e + 1 < x->end ? e + 2 : x->end;
      continue;
    }
    if (*x->p == '#' && x->bol) {
      skip_directive(x);
      continue;
    }
    break;
  }
  x->bol = 0;
  token t = { T_PUNCT, x->p, 1 };
  if (ident_char(*x->p)) {
    t.kind = T_IDENT;
    while (x->p < x->end && ident_char(*x->p)) x->p++;
    t.n = (size_t)(x->p - t.s);
  } else if (*x->p == '"' || *x->p == '\'') {
    t.kind = *x->p == '"' ? T_STRING : T_PUNCT;
    skip_literal(x, *x->p);
    t.n = (size_t)(x->p - t.s);
  } else {
    x->p++;
  }
  return t;
}

static int is(token t, const char *word) {
  return t.kind == T_IDENT && t.n == strlen(word) && !memcmp(t.s, word, t.n);
}
static int punct(token t, char c) { return t.kind == T_PUNCT && *t.s == c; }

/* Skips a parenthesized group whose '(' is next; 0 at the end. */
static int skip_group(lexer *x) {
  token t = next(x);
  if (!punct(t, '(')) return t.kind != T_END;
  for (int depth = 1; depth > 0;) {
    t = next(x);
    if (t.kind == T_END) return 0;
    if (punct(t, '(')) depth++;
    else if (punct(t, ')')) depth--;
  }
  return 1;
}

/* Appends name (prefixed by at, 0 for none) to out unless it is there. */
static int add(char *out, size_t *used, int count, char at, token name) {
  if (name.kind != T_IDENT || name.n > MAXNAME) return count;
  const char *q = out;
  for (int i = 0; i < count; i++, q += strlen(q) + 1)
    if ((at ? *q == at && strlen(q + 1) == name.n && !memcmp(q + 1, name.s, name.n)
            : *q != '@' && strlen(q) == name.n && !memcmp(q, name.s, name.n)))
      return count;
  char *w = out + *used;
  if (at) *w++ = at;
  memcpy(w, name.s, name.n);
  w[name.n] = '\0';
  *used += name.n + 1 + (at != 0);
  return count + 1;
}

/* After __global__: the kernel's name, the last identifier before its
   parameters, attributes with arguments skipped. A '{' or ';' first, or
   the end, gives none. */
static token kernel_name(lexer *x, token *stop) {
  token last = { T_END, NULL, 0 };
  for (;;) {
    token t = next(x);
    if (is(t, "__launch_bounds__") || is(t, "__cluster_dims__") ||
        is(t, "__maxnreg__") || is(t, "__attribute__") || is(t, "__declspec")) {
      if (!skip_group(x)) break;
      continue;
    }
    if (t.kind == T_IDENT) { last = t; continue; }
    if (punct(t, '(')) return last;
    if (t.kind == T_END || punct(t, '{') || punct(t, ';')) { *stop = t; break; }
  }
  return (token){ T_END, NULL, 0 };
}

/* After __device__, __constant__ or __managed__: a variable's name, the
   last identifier before '=', '[', ';', ',' or '{', or none for a
   function (a '(' first). stop: the token that ended the search. */
static token variable_name(lexer *x, token *stop) {
  token last = { T_END, NULL, 0 };
  for (;;) {
    token t = next(x);
    if (t.kind == T_IDENT) {
      if (!is(t, "__device__") && !is(t, "__constant__") &&
          !is(t, "__managed__"))
        last = t;
      continue;
    }
    *stop = t;
    if (t.kind == T_END || punct(t, '(')) break;
    if (punct(t, '=') || punct(t, '[') || punct(t, ';') || punct(t, ',') ||
        punct(t, '{'))
      return last;
  }
  return (token){ T_END, NULL, 0 };
}

int cg_nvrtc_guess(const char *src, size_t len, char *out) {
  lexer x = { src, src + len, 1 };
  unsigned char stack[MAXDEPTH]; /* 1: an extern "C" block */
  int depth = 0, other = 0;      /* open braces; those not extern "C" */
  int count = 0, externc = 0, templ = 0, pending_c = 0;
  size_t used = 0;
  token t = next(&x);
  while (t.kind != T_END) {
    token stop = { T_END, NULL, 0 };
    int have_stop = 0;
    if (is(t, "extern")) {
      token s = next(&x);
      if (s.kind == T_STRING && s.n == 3 && s.s[1] == 'C') {
        pending_c = externc = 1;
        t = next(&x);
        continue;
      }
      t = s;
      continue;
    }
    if (is(t, "template")) templ = 1;
    if (!other && !templ && is(t, "__global__")) {
      token name = kernel_name(&x, &stop);
      have_stop = stop.kind != T_END || !name.s;
      if (name.s && (externc || depth > 0)) count = add(out, &used, count, 0, name);
      if (name.s) { /* past the parameters: the declaration goes on */
        pending_c = 0;
        t = next(&x);
        continue;
      }
    } else if (!other && !templ &&
               (is(t, "__device__") || is(t, "__constant__") ||
                is(t, "__managed__"))) {
      token name = variable_name(&x, &stop);
      have_stop = 1;
      if (name.s) count = add(out, &used, count, '@', name);
    }
    if (have_stop) t = stop;
    if (punct(t, '{')) {
      int c = pending_c;
      if (depth < MAXDEPTH) stack[depth] = (unsigned char)c;
      depth++;
      if (!c) other++;
      pending_c = externc = templ = 0;
    } else if (punct(t, '}')) {
      if (depth > 0) {
        depth--;
        if (depth >= MAXDEPTH || !stack[depth]) other--;
      }
      pending_c = externc = templ = 0;
    } else if (punct(t, ';')) {
      pending_c = externc = templ = 0;
    } else if (t.kind != T_END && !is(t, "extern")) {
      pending_c = 0; /* extern "C" { only when the brace comes next */
    }
    if (t.kind == T_END) break;
    t = next(&x);
  }
  return count;
}
