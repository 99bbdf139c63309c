/* Programmatic dependent launch, decided from PTX. For each .entry, a walk
   over its body's control flow (branches, loops, guards, brx.idx) says
   whether its code may take either side of a programmatic edge:

   - consumer: on every path, griddepcontrol.wait runs (unguarded) before
     any instruction that may touch global memory (an access outside
     .shared, .local, .const and .param: generic addresses, textures and
     surfaces, asynchronous copies, atomics and calls count) and before
     the thread ends. The wait returns once the prerequisite grid has
     completed and its writes are visible; waiting before the end too
     keeps this grid's end after its producer's.
   - producer: no global write can follow the first
     griddepcontrol.launch_dependents of a block. A block triggers when
     its first thread does, so a write is late when it is reachable from
     the block-wide barrier (bar.sync of all threads, or the entry) last
     passed before a trigger: from there other threads may still write.
     A kernel that never triggers lets its dependents start at its end.

   Calls count as global writes (and as triggers when a function of the
   text issues one); a wait inside a function is not credited. Pure C,
   bounded by the text's length, iterative: fuzzed with ptx.c. */
#include "kernel/ptx.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
  I_WAIT = 1 << 0,    /* griddepcontrol.wait */
  I_TRIGGER = 1 << 1, /* griddepcontrol.launch_dependents (or such a call) */
  I_ACCESS = 1 << 2,  /* may touch global memory */
  I_WRITE = 1 << 3,   /* ... and may write it */
  I_BARRIER = 1 << 4, /* bar.sync of the whole block */
  I_END = 1 << 5,     /* ret, exit: the thread ends */
  I_STOP = 1 << 6,    /* trap: the grid fails */
  I_JUMP = 1 << 7,    /* bra */
  I_ANY = 1 << 8,     /* brx.idx: to any label of the body */
  I_GUARD = 1 << 9    /* @p: may not run */
};

/* One instruction: its flags, PTX line, the .loc in force (file 0: none),
   its text [at, at + len) and a jump's target (a label, then an index). */
typedef struct insn {
  unsigned flags, line, file, srcline;
  size_t at, len, tat, tlen, target;
} insn;

typedef struct label { size_t at, len, insn; } label;

typedef struct body {
  insn *v;
  size_t n, cap;
  label *l;
  size_t nl, cl;
} body;

/* A cursor over the text: pos <= len; line is s[pos]'s, from 1. */
typedef struct cur {
  const char *s;
  size_t len, pos;
  unsigned line;
} cur;

/* .file's names: number -> the text of its string, quotes left out. */
typedef struct files {
  struct fname { unsigned num; size_t at, len; } *v;
  size_t n, cap;
} files;

static int is_space(int c) {
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
    if (is_space((unsigned char)ch)) {
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

/* Reads the body whose '{' the cursor just passed, to its '}', into b.
   NULL, or why it could not be read. */
static const char *read_body(cur *c, body *b, int calls_trigger) {
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
    while (c->pos < c->len && !is_space((unsigned char)s[c->pos]) &&
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

/* [p, p + n) into out (room for 72), white space runs as one space and
   other control bytes as '?', cut with "..." past 68 bytes. */
static void printable(char *out, const char *p, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n && k < 68; i++) {
    unsigned char ch = (unsigned char)p[i];
    if (is_space(ch)) {
      if (k && out[k - 1] != ' ') out[k++] = ' ';
    } else {
      out[k++] = ch < 32 || ch == 127 ? '?' : (char)ch;
    }
  }
  while (k && out[k - 1] == ' ') k--;
  if (k == 68) memcpy(out + k, "...", 3), k += 3;
  out[k] = '\0';
}

static int label_cmp(const char *s, const label *a, const label *b) {
  size_t n = a->len < b->len ? a->len : b->len;
  int r = memcmp(s + a->at, s + b->at, n);
  return r ? r : (a->len > b->len) - (a->len < b->len);
}

/* Sorts the labels by name and gives every jump its target's instruction.
   NULL, or why not (in why). */
static const char *resolve(const char *s, body *b, char *why, size_t whylen) {
  label *l = b->l;
  size_t n = b->nl;
  label *tmp = malloc((n ? n : 1) * sizeof *tmp);
  if (!tmp) return "out of memory";
  for (size_t w = 1; w < n; w *= 2) { /* bottom-up merge sort: no recursion */
    for (size_t lo = 0; lo < n; lo += 2 * w) {
      size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      size_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi)
        tmp[k++] = label_cmp(s, &l[j], &l[i]) < 0 ? l[j++] : l[i++];
      while (i < mid) tmp[k++] = l[i++];
      while (j < hi) tmp[k++] = l[j++];
    }
    memcpy(l, tmp, n * sizeof *l);
  }
  free(tmp);
  for (size_t i = 0; i < b->n; i++) {
    insn *x = &b->v[i];
    if (!(x->flags & I_JUMP)) continue;
    label key = {x->tat, x->tlen, 0};
    size_t lo = 0, hi = n;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      if (label_cmp(s, &l[mid], &key) < 0) lo = mid + 1;
      else hi = mid;
    }
    if (lo == n || label_cmp(s, &l[lo], &key)) {
      char name[72];
      printable(name, s + x->tat, x->tlen);
      snprintf(why, whylen, "a branch to '%s', a label it does not have",
               name);
      return why;
    }
    x->target = l[lo].insn;
  }
  return NULL;
}

/* The successors of instruction i (b->n is the end), into out; with
   brx.idx also every label's instruction, which *any asks for. */
static int succ(const body *b, size_t i, size_t out[2], int *any) {
  const insn *x = &b->v[i];
  int k = 0, guarded = (x->flags & I_GUARD) != 0;
  *any = (x->flags & I_ANY) != 0;
  if (x->flags & I_JUMP) out[k++] = x->target;
  else if (x->flags & I_END) out[k++] = b->n;
  if (guarded || !(x->flags & (I_JUMP | I_END | I_STOP | I_ANY)))
    out[k++] = i + 1 < b->n ? i + 1 : b->n;
  return k;
}

/* Marks what is reachable from the instructions in stack[0 .. sp) (each
   marked already), following successors. */
static void reach(const body *b, unsigned char *mark, size_t *stack,
                  size_t sp) {
  while (sp) {
    size_t i = stack[--sp], out[2];
    if (i == b->n) continue;
    int any, k = succ(b, i, out, &any);
    for (int j = 0; j < k; j++)
      if (!mark[out[j]]) mark[out[j]] = 1, stack[sp++] = out[j];
    for (size_t j = 0; any && j < b->nl; j++)
      if (!mark[b->l[j].insn]) mark[b->l[j].insn] = 1, stack[sp++] = b->l[j].insn;
  }
}

static const char *file_name(const char *s, const files *f, unsigned num,
                             int *len) {
  for (size_t i = 0; i < f->n; i++)
    if (f->v[i].num == num) {
      size_t n = f->v[i].len, at = f->v[i].at;
      if (n > 68) at += n - 68, n = 68; /* the end of a long path */
      *len = (int)n;
      return s + at;
    }
  return NULL;
}

/* Appends to out "<instruction> (PTX line n[, file:line])". */
static void site(char *out, size_t outlen, const char *s, const files *f,
                 const insn *x) {
  char text[72], name[72], where[100] = "";
  printable(text, s + x->at, x->len);
  int n = 0;
  const char *file = x->file ? file_name(s, f, x->file, &n) : NULL;
  if (file && x->srcline) {
    printable(name, file, (size_t)n);
    snprintf(where, sizeof where, ", %s:%u", name, x->srcline);
  }
  size_t used = strlen(out);
  snprintf(out + used, outlen - used, "%s (PTX line %u%s)", text, x->line,
           where);
}

static void add(char *out, size_t outlen, const char *fmt, ...) {
  size_t used = strlen(out);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out + used, outlen - used, fmt, ap);
  va_end(ap);
}

/* The consumer's rule over b (work: n + 1 bytes and n + 1 indices). */
static void consumer(const char *s, const files *f, const body *b,
                     unsigned char *w, size_t *stack, ptx_pdl *p) {
  size_t n = b->n, sp = 0, out[2];
  memset(w, 1, n + 1); /* w[i]: every path to i has waited */
  w[0] = 0;
  stack[sp++] = 0;
  while (sp) { /* each flips to 0 once: pushed once */
    size_t i = stack[--sp];
    if (i == n) continue;
    const insn *x = &b->v[i];
    if ((x->flags & (I_WAIT | I_GUARD)) == I_WAIT) continue;
    int any, k = succ(b, i, out, &any);
    for (int j = 0; j < k; j++)
      if (w[out[j]]) w[out[j]] = 0, stack[sp++] = out[j];
    for (size_t j = 0; any && j < b->nl; j++)
      if (w[b->l[j].insn]) w[b->l[j].insn] = 0, stack[sp++] = b->l[j].insn;
  }
  int waits = 0;
  for (size_t i = 0; i < n; i++) waits |= (b->v[i].flags & I_WAIT) != 0;
  for (size_t i = 0; i < n; i++)
    if (!w[i] && (b->v[i].flags & I_ACCESS)) {
      site(p->consumer_why, sizeof p->consumer_why, s, f, &b->v[i]);
      add(p->consumer_why, sizeof p->consumer_why, " may %s global memory "
          "before griddepcontrol.wait%s",
          b->v[i].flags & I_WRITE ? "write" : "read",
          waits ? "" : " (it has none)");
      return;
    }
  if (w[n]) {
    p->consumer = 1;
    return;
  }
  for (size_t i = 0; i < n; i++) { /* the first way out that has not waited */
    const insn *x = &b->v[i];
    if (w[i] || (x->flags & (I_WAIT | I_GUARD)) == I_WAIT) continue;
    int any, k = succ(b, i, out, &any), ends = 0;
    for (int j = 0; j < k; j++) ends |= out[j] == n;
    if (ends) {
      site(p->consumer_why, sizeof p->consumer_why, s, f, x);
      add(p->consumer_why, sizeof p->consumer_why, " can end the thread "
          "before griddepcontrol.wait%s: its grid would complete before its "
          "producer", waits ? "" : " (it has none)");
      return;
    }
  }
  snprintf(p->consumer_why, sizeof p->consumer_why, "it ends before "
           "griddepcontrol.wait (its body is empty)");
}

/* The producer's rule over b (work as consumer's, preds: the predecessor
   lists, pstart[n + 2]). */
static void producer(const char *s, const files *f, const body *b,
                     unsigned char *mark, size_t *stack, const size_t *pstart,
                     const size_t *preds, ptx_pdl *p) {
  size_t n = b->n, sp = 0, out[2], first = n;
  /* mark[i]: a trigger can be reached from i with no barrier on the way */
  memset(mark, 0, n + 1);
  for (size_t i = 0; i < n; i++)
    if (b->v[i].flags & I_TRIGGER) {
      mark[i] = 1;
      stack[sp++] = i;
      if (first == n) first = i;
    }
  if (first == n) {
    p->producer = 1; /* no trigger: dependents start at its end */
    return;
  }
  while (sp) {
    size_t i = stack[--sp];
    for (size_t k = pstart[i]; k < pstart[i + 1]; k++) {
      size_t q = preds[k];
      if (!mark[q] && (b->v[q].flags & (I_BARRIER | I_GUARD)) != I_BARRIER)
        mark[q] = 1, stack[sp++] = q;
    }
  }
  /* the barriers last passed before a trigger, and the entry */
  unsigned char *late = calloc(n + 1, 1);
  if (!late) {
    snprintf(p->producer_why, sizeof p->producer_why, "out of memory while "
             "reading its PTX");
    return;
  }
  sp = 0;
  if (n && mark[0]) late[0] = 1, stack[sp++] = 0;
  for (size_t i = 0; i < n; i++) {
    if ((b->v[i].flags & (I_BARRIER | I_GUARD)) != I_BARRIER) continue;
    int any, k = succ(b, i, out, &any), last = 0;
    for (int j = 0; j < k; j++) last |= mark[out[j]];
    if (!last) continue;
    for (int j = 0; j < k; j++)
      if (!late[out[j]]) late[out[j]] = 1, stack[sp++] = out[j];
  }
  reach(b, late, stack, sp);
  size_t w = 0;
  while (w < n && !(late[w] && (b->v[w].flags & I_WRITE))) w++;
  if (w == n) {
    free(late);
    p->producer = 1;
    return;
  }
  /* after a trigger in its own thread, or only in another's */
  memset(late, 0, n + 1);
  sp = 0;
  for (size_t i = 0; i < n; i++) {
    int any, k = (b->v[i].flags & I_TRIGGER) ? succ(b, i, out, &any) : 0;
    for (int j = 0; j < k; j++)
      if (!late[out[j]]) late[out[j]] = 1, stack[sp++] = out[j];
    for (size_t j = 0; k && any && j < b->nl; j++)
      if (!late[b->l[j].insn]) late[b->l[j].insn] = 1, stack[sp++] = b->l[j].insn;
  }
  reach(b, late, stack, sp);
  const char *trigger = b->v[first].flags & I_ACCESS
                        ? "a call (of a function that may run griddepcontrol."
                          "launch_dependents)"
                        : "griddepcontrol.launch_dependents";
  site(p->producer_why, sizeof p->producer_why, s, f, &b->v[w]);
  if (late[w])
    add(p->producer_why, sizeof p->producer_why, " may write global memory "
        "after %s (PTX line %u)", trigger, b->v[first].line);
  else
    add(p->producer_why, sizeof p->producer_why, " may write global memory "
        "after another thread of its block ran %s (PTX line %u): no "
        "bar.sync of the whole block comes between", trigger,
        b->v[first].line);
  free(late);
}

/* Both rules over the body b of entry p. */
static void judge(const char *s, const files *f, body *b, ptx_pdl *p) {
  char why[120];
  const char *bad = resolve(s, b, why, sizeof why);
  size_t n = b->n, edges = 0, out[2];
  unsigned char *mark = NULL;
  size_t *stack = NULL, *pstart = NULL, *preds = NULL;
  for (size_t i = 0; !bad && i < n; i++) {
    int any;
    edges += (size_t)succ(b, i, out, &any);
    if (any) edges += b->nl;
    if (edges > ((size_t)1 << 28)) bad = "too many branch targets";
  }
  if (!bad) {
    mark = malloc(n + 1);
    stack = malloc((n + 1) * sizeof *stack);
    pstart = calloc(n + 2, sizeof *pstart);
    preds = malloc((edges ? edges : 1) * sizeof *preds);
    if (!mark || !stack || !pstart || !preds) bad = "out of memory";
  }
  if (!bad) { /* the predecessor lists, counted then filled */
    for (size_t i = 0; i < n; i++) {
      int any, k = succ(b, i, out, &any);
      for (int j = 0; j < k; j++) pstart[out[j] + 1]++;
      for (size_t j = 0; any && j < b->nl; j++) pstart[b->l[j].insn + 1]++;
    }
    for (size_t i = 0; i <= n; i++) pstart[i + 1] += pstart[i];
    memcpy(stack, pstart, (n + 1) * sizeof *stack); /* next free slot */
    for (size_t i = 0; i < n; i++) {
      int any, k = succ(b, i, out, &any);
      for (int j = 0; j < k; j++) preds[stack[out[j]]++] = i;
      for (size_t j = 0; any && j < b->nl; j++) preds[stack[b->l[j].insn]++] = i;
    }
    p->read = 1;
    consumer(s, f, b, mark, stack, p);
    producer(s, f, b, mark, stack, pstart, preds, p);
  } else {
    snprintf(p->consumer_why, sizeof p->consumer_why, "its PTX body could "
             "not be read: %s", bad);
    memcpy(p->producer_why, p->consumer_why, sizeof p->consumer_why);
  }
  free(mark);
  free(stack);
  free(pstart);
  free(preds);
}

/* The next token of the module-level walk: a word ([A-Za-z0-9_$%.]+), a
   string, or one other byte; at = len at the end. */
static size_t token(cur *c, size_t *n) {
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

static int tok(const cur *c, size_t at, size_t n, const char *w) {
  return strlen(w) == n && !memcmp(c->s + at, w, n);
}

/* The first walk: .file's names, and whether a function body issues
   griddepcontrol.launch_dependents (its calls may then trigger). */
static int first_walk(const char *src, size_t len, files *f) {
  cur c = {src, len, 0, 1};
  int depth = 0, func = 0, infunc = 0, trig = 0;
  size_t at, n;
  while ((at = token(&c, &n)), n) {
    if (tok(&c, at, n, ".func")) func = 1;
    else if (tok(&c, at, n, ";") && depth == 0) func = 0;
    else if (tok(&c, at, n, "{")) {
      if (depth++ == 0) infunc = func, func = 0;
    } else if (tok(&c, at, n, "}")) {
      if (depth > 0 && --depth == 0) infunc = 0;
    } else if (infunc && tok(&c, at, n, "griddepcontrol.launch_dependents")) {
      trig = 1;
    } else if (depth == 0 && tok(&c, at, n, ".file")) {
      size_t nat, nn, sat, sn;
      nat = token(&c, &nn);
      sat = token(&c, &sn);
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

/* Neither side holds, for the reason given. */
static void unread(ptx_pdl *p, const char *why) {
  memset(p, 0, sizeof *p);
  snprintf(p->consumer_why, sizeof p->consumer_why, "%s", why);
  memcpy(p->producer_why, p->consumer_why, sizeof p->consumer_why);
}

void ptx_pdl_scan(const char *src, size_t len, ptx_entry *e, int n) {
  files f = {NULL, 0, 0};
  body b = {NULL, 0, 0, NULL, 0, 0};
  if (!src) len = 0;
  int calls_trigger = first_walk(src, len, &f);
  cur c = {src, len, 0, 1};
  size_t at, k;
  int next = 0;
  for (int i = 0; i < n; i++) unread(&e[i].pdl, "its PTX body was not found");
  /* each entry is judged once, with the first body of its name: in order,
     else found by name among those after the last taken in order */
  while ((at = token(&c, &k)), k) {
    if (!tok(&c, at, k, ".entry")) continue;
    size_t nat, nn;
    nat = token(&c, &nn);
    ptx_entry *x = NULL;
    for (int i = next; !x && i < n; i++)
      if (tok(&c, nat, nn, e[i].name)) x = &e[i], next = i + 1;
    while ((at = token(&c, &k)), k && !tok(&c, at, k, "{") &&
           !tok(&c, at, k, ";")) {}
    if (!k || !tok(&c, at, k, "{")) continue;
    b.n = b.nl = 0;
    const char *bad = read_body(&c, &b, calls_trigger);
    if (!x) continue;
    if (bad) {
      char why[sizeof x->pdl.consumer_why];
      snprintf(why, sizeof why, "its PTX body could not be read: %s", bad);
      unread(&x->pdl, why);
      continue;
    }
    x->pdl.consumer_why[0] = x->pdl.producer_why[0] = '\0';
    judge(src, &f, &b, &x->pdl);
  }
  free(b.v);
  free(b.l);
  free(f.v);
}
