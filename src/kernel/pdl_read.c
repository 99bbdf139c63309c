/* Reading PTX for programmatic dependent launch (pdl.c): the text's
   tokens, each instruction of an .entry's body classified by what it may
   do (wait, trigger, touch or write global memory, end, jump), its
   labels, and the module's .file names. Pure C, bounded by the text's
   length, fuzzed with ptx.c. */
#include <stdlib.h>
#include <string.h>
#include "kernel/pdl.h"

int pdl_is_space(int c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}
static int is_ident(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '$' || c == '%';
}

static void *grow(void *v, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return v;
  size_t c = *cap ? *cap : 16;
  while (c < need) {
    if (c > ((size_t)-1 / 2) / size) return NULL;
    c *= 2;
  }
  void *g = realloc(v, c * size);
  if (g) *cap = c;
  return g;
}

/* Past white space and comments, counting lines. */
static void skip_space(cur *c) {
  const char *s = c->s;
  while (c->pos < c->len) {
    char ch = s[c->pos];
    if (pdl_is_space((unsigned char)ch)) {
      if (ch == '\n') c->line++;
      c->pos++;
    } else if (ch == '/' && c->pos + 1 < c->len && s[c->pos + 1] == '/') {
      while (c->pos < c->len && s[c->pos] != '\n') c->pos++;
    } else if (ch == '/' && c->pos + 1 < c->len && s[c->pos + 1] == '*') {
      for (c->pos += 2; c->pos < c->len &&
           !(s[c->pos] == '*' && c->pos + 1 < c->len && s[c->pos + 1] == '/');
           c->pos++)
        if (s[c->pos] == '\n') c->line++;
      c->pos = c->pos < c->len ? c->pos + 2 : c->len;
    } else {
      break;
    }
  }
}

/* Past the ';' that ends the statement at the cursor (strings and
   comments skipped): 0, or -1 when the text ends first. *bracket: a '['
   outside strings; *commas: commas outside brackets, braces and parens;
   [*last, *last + *lastlen): the last identifier. */
static int to_semicolon(cur *c, int *bracket, int *commas, size_t *last,
                        size_t *lastlen) {
  const char *s = c->s;
  int depth = 0;
  *bracket = *commas = 0;
  *lastlen = 0;
  for (;;) {
    skip_space(c);
    if (c->pos >= c->len) return -1;
    char ch = s[c->pos];
    if (ch == ';') {
      c->pos++;
      return 0;
    }
    if (ch == '"') {
      for (c->pos++; c->pos < c->len && s[c->pos] != '"' && s[c->pos] != '\n';
           c->pos++)
        if (s[c->pos] == '\\' && c->pos + 1 < c->len) c->pos++;
      if (c->pos < c->len && s[c->pos] == '"') c->pos++;
    } else if (is_ident((unsigned char)ch)) {
      size_t at = c->pos;
      while (c->pos < c->len && is_ident((unsigned char)s[c->pos])) c->pos++;
      *last = at;
      *lastlen = c->pos - at;
    } else {
      if (ch == '[') *bracket = 1;
      if (ch == '[' || ch == '{' || ch == '(') depth++;
      if ((ch == ']' || ch == '}' || ch == ')') && depth > 0) depth--;
      if (ch == ',' && depth == 0) (*commas)++;
      c->pos++;
    }
  }
}

/* The segments of an opcode (between dots, "::" inside one). */
static int has_seg(const char *op, size_t n, const char *w) {
  size_t k = strlen(w), i = 0;
  while (i < n) {
    size_t j = i;
    while (j < n && op[j] != '.') j++;
    if (j - i == k && !memcmp(op + i, w, k)) return 1;
    i = j + 1;
  }
  return 0;
}

static int seg_starts(const char *p, size_t n, const char *w) {
  size_t k = strlen(w);
  return n >= k && !memcmp(p, w, k);
}

/* Whether the opcode's base (before the first dot) is one of the words. */
static int base_in(const char *op, size_t n, const char *const *words) {
  size_t b = 0;
  while (b < n && op[b] != '.') b++;
  for (; *words; words++)
    if (strlen(*words) == b && !memcmp(op, *words, b)) return 1;
  return 0;
}

/* What an instruction does, from its opcode (with modifiers), whether its
   operands address memory ('['), their count, and whether a function of
   the text may trigger. */
static unsigned classify(const char *op, size_t n, int bracket, int commas,
                         int calls_trigger) {
  static const char *const ends[] = {"ret", "exit", NULL},
      *const bars[] = {"bar", "barrier", NULL},
      *const reads[] = {"ld", "ldu", "prefetch", "prefetchu", "tex", "tld4",
                        "suld", "txq", "suq", "ldmatrix", "fence", "membar",
                        "isspacep", "applypriority", NULL};
  if (base_in(op, n, (const char *const[]){"griddepcontrol", NULL}))
    return has_seg(op, n, "wait") ? I_WAIT
           : has_seg(op, n, "launch_dependents") ? I_TRIGGER : 0;
  if (base_in(op, n, ends)) return I_END;
  if (base_in(op, n, (const char *const[]){"trap", NULL})) return I_STOP;
  if (base_in(op, n, (const char *const[]){"bra", NULL})) return I_JUMP;
  if (base_in(op, n, (const char *const[]){"brx", NULL})) return I_ANY;
  if (base_in(op, n, (const char *const[]){"call", NULL}))
    return I_ACCESS | I_WRITE | (calls_trigger ? I_TRIGGER : 0);
  if (base_in(op, n, bars))
    return has_seg(op, n, "sync") && !has_seg(op, n, "warp") &&
           !has_seg(op, n, "cluster") && !has_seg(op, n, "red") &&
           !has_seg(op, n, "arrive") && commas == 0 ? I_BARRIER : 0;
  if (!bracket) return 0;
  int global = 0, other = 0, first = 0; /* the first space named: cp's dst */
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && op[j] != '.') j++;
    const char *p = op + i;
    size_t k = j - i;
    if (k == 6 && !memcmp(p, "global", 6)) {
      global = 1;
      if (!first) first = 'g';
    } else if (seg_starts(p, k, "shared") || seg_starts(p, k, "param") ||
               (k == 5 && !memcmp(p, "local", 5)) ||
               (k == 5 && !memcmp(p, "const", 5))) {
      other = 1;
      if (!first) first = 's';
    }
    i = j + 1;
  }
  if (other && !global) return 0; /* shared, local, const or param only */
  int read = base_in(op, n, reads) ||
             (base_in(op, n, (const char *const[]){"wmma", NULL}) &&
              has_seg(op, n, "load")) ||
             (base_in(op, n, (const char *const[]){"multimem", NULL}) &&
              has_seg(op, n, "ld_reduce")) ||
             (base_in(op, n, (const char *const[]){"cp", NULL}) &&
              (first == 's' || has_seg(op, n, "prefetch")));
  return read ? I_ACCESS : I_ACCESS | I_WRITE;
}

const char *pdl_read_body(cur *c, body *b, int calls_trigger) {
  const char *s = c->s;
  unsigned file = 0, srcline = 0;
  int depth = 1, bracket, commas;
  for (;;) {
    skip_space(c);
    if (c->pos >= c->len) return "the text ends inside it";
    char ch = s[c->pos];
    if (ch == '}') {
      c->pos++;
      if (--depth == 0) return NULL;
      continue;
    }
    if (ch == '{') {
      c->pos++;
      depth++;
      continue;
    }
    size_t at = c->pos, last = 0, lastlen = 0;
    if (ch == '.') { /* a directive: .loc says where; the rest are skipped */
      size_t e = at + 1;
      while (e < c->len && is_ident((unsigned char)s[e])) e++;
      if (e - at == 4 && !memcmp(s + at, ".loc", 4)) {
        unsigned long v[2] = {0, 0};
        size_t p = e;
        for (int k = 0; k < 2; k++) {
          while (p < c->len && (s[p] == ' ' || s[p] == '\t')) p++;
          while (p < c->len && s[p] >= '0' && s[p] <= '9' && v[k] < 100000000)
            v[k] = v[k] * 10 + (unsigned long)(s[p++] - '0');
        }
        file = (unsigned)v[0];
        srcline = (unsigned)v[1];
        while (p < c->len && s[p] != '\n') p++;
        c->pos = p;
        continue;
      }
      if (to_semicolon(c, &bracket, &commas, &last, &lastlen))
        return "the text ends inside a directive";
      continue;
    }
    size_t e = at;
    while (e < c->len && is_ident((unsigned char)s[e])) e++;
    size_t colon = e;
    while (colon < c->len && (s[colon] == ' ' || s[colon] == '\t')) colon++;
    if (e > at && colon < c->len && s[colon] == ':' &&
        !(colon + 1 < c->len && s[colon + 1] == ':')) { /* a label */
      label *l = grow(b->l, &b->cl, b->nl + 1, sizeof *b->l);
      if (!l) return "out of memory";
      b->l = l;
      l[b->nl++] = (label){at, e - at, b->n};
      c->pos = colon + 1;
      continue;
    }
    unsigned guard = 0;
    if (ch == '@') { /* @p or @!p */
      guard = I_GUARD;
      c->pos++;
      if (c->pos < c->len && s[c->pos] == '!') c->pos++;
      while (c->pos < c->len && is_ident((unsigned char)s[c->pos])) c->pos++;
      skip_space(c);
    }
    size_t op = c->pos;
    while (c->pos < c->len && !pdl_is_space((unsigned char)s[c->pos]) &&
           s[c->pos] != ';')
      c->pos++;
    size_t oplen = c->pos - op;
    unsigned line = c->line;
    if (to_semicolon(c, &bracket, &commas, &last, &lastlen))
      return "the text ends inside an instruction";
    if (!oplen) continue; /* an empty statement */
    insn *v = grow(b->v, &b->cap, b->n + 1, sizeof *b->v);
    if (!v) return "out of memory";
    b->v = v;
    size_t end = c->pos - 1; /* the ';' */
    v[b->n++] = (insn){
      classify(s + op, oplen, bracket, commas, calls_trigger) | guard,
      line, file, srcline, at, end - at, last, lastlen, 0};
  }
}

size_t pdl_token(cur *c, size_t *n) {
  skip_space(c);
  const char *s = c->s;
  size_t at = c->pos;
  if (at >= c->len) {
    *n = 0;
    return at;
  }
  size_t e = at + 1;
  if (is_ident((unsigned char)s[at]) || s[at] == '.') {
    while (e < c->len && (is_ident((unsigned char)s[e]) || s[e] == '.')) e++;
  } else if (s[at] == '"') {
    while (e < c->len && s[e] != '"' && s[e] != '\n')
      e += (s[e] == '\\' && e + 1 < c->len) ? 2 : 1;
    if (e < c->len && s[e] == '"') e++;
  }
  c->pos = e > c->len ? c->len : e;
  *n = c->pos - at;
  return at;
}

int pdl_tok(const cur *c, size_t at, size_t n, const char *w) {
  return strlen(w) == n && !memcmp(c->s + at, w, n);
}

int pdl_first_walk(const char *src, size_t len, files *f) {
  cur c = {src, len, 0, 1};
  int depth = 0, func = 0, infunc = 0, trig = 0;
  size_t at, n;
  while ((at = pdl_token(&c, &n)), n) {
    if (pdl_tok(&c, at, n, ".func")) func = 1;
    else if (pdl_tok(&c, at, n, ";") && depth == 0) func = 0;
    else if (pdl_tok(&c, at, n, "{")) {
      if (depth++ == 0) infunc = func, func = 0;
    } else if (pdl_tok(&c, at, n, "}")) {
      if (depth > 0 && --depth == 0) infunc = 0;
    } else if (infunc && pdl_tok(&c, at, n, "griddepcontrol.launch_dependents")) {
      trig = 1;
    } else if (depth == 0 && pdl_tok(&c, at, n, ".file")) {
      size_t nat, nn, sat, sn;
      nat = pdl_token(&c, &nn);
      sat = pdl_token(&c, &sn);
      unsigned long num = 0;
      for (size_t i = 0; i < nn && num < 1000000; i++)
        num = src[nat + i] >= '0' && src[nat + i] <= '9'
              ? num * 10 + (unsigned long)(src[nat + i] - '0') : 1000000;
      if (!nn || num >= 1000000 || sn < 2 || src[sat] != '"') continue;
      struct fname *v = grow(f->v, &f->cap, f->n + 1, sizeof *f->v);
      if (!v) continue; /* names are for messages only */
      f->v = v;
      v[f->n++] = (struct fname){(unsigned)num, sat + 1, sn - 2};
    }
  }
  return trig;
}
