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
#include "kernel/pdl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* [p, p + n) into out (room for 72), white space runs as one space and
   other control bytes as '?', cut with "..." past 68 bytes. */
static void printable(char *out, const char *p, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n && k < 68; i++) {
    unsigned char ch = (unsigned char)p[i];
    if (pdl_is_space(ch)) {
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
  int calls_trigger = pdl_first_walk(src, len, &f);
  cur c = {src, len, 0, 1};
  size_t at, k;
  int next = 0;
  for (int i = 0; i < n; i++) unread(&e[i].pdl, "its PTX body was not found");
  /* each entry is judged once, with the first body of its name: in order,
     else found by name among those after the last taken in order */
  while ((at = pdl_token(&c, &k)), k) {
    if (!pdl_tok(&c, at, k, ".entry")) continue;
    size_t nat, nn;
    nat = pdl_token(&c, &nn);
    ptx_entry *x = NULL;
    for (int i = next; !x && i < n; i++)
      if (pdl_tok(&c, nat, nn, e[i].name)) x = &e[i], next = i + 1;
    while ((at = pdl_token(&c, &k)), k && !pdl_tok(&c, at, k, "{") &&
           !pdl_tok(&c, at, k, ";")) {}
    if (!k || !pdl_tok(&c, at, k, "{")) continue;
    b.n = b.nl = 0;
    const char *bad = pdl_read_body(&c, &b, calls_trigger);
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
