/* printf and assert in kernels: the device runtime's vprintf(format,
   arguments) and __assertfail(message, file, line, function, size), which
   the decoder turns into OP_PRINTF and OP_ASSERT. Each lane's text goes to
   its worker's records, tagged with its block and thread; once the launch
   is over they are given to the caller (sim_launch.print) in the order of
   the threads, as one launch's output. A launch writes at most
   SIM_PRINT_MAX bytes, as a GPU's printf buffer holds 1 MiB: the rest is
   dropped. */
#include "ptx_exec.h"

#include <stdio.h>
#include <stdlib.h>

enum { SIM_PRINT_MAX = 1 << 20, SIM_STR_MAX = 4096 };

/* Appends n bytes of text from a lane (block-and-thread key) to w's
   records; 0 when out of memory. */
static int emit(worker *w, uint64_t key, const char *text, size_t n,
                int err) {
  if (!n) return 1;
  if (w->out_total + n > SIM_PRINT_MAX) return 1; /* the buffer is full */
  if (w->nrecs == w->crecs) {
    size_t c = w->crecs ? 2 * w->crecs : 16;
    sim_rec *v = realloc(w->recs, c * sizeof *v);
    if (!v) return 0;
    w->recs = v;
    w->crecs = c;
  }
  if (w->nout + n > w->cout) {
    size_t c = w->cout ? w->cout : 256;
    while (c < w->nout + n) c *= 2;
    char *v = realloc(w->out, c);
    if (!v) return 0;
    w->out = v;
    w->cout = c;
  }
  memcpy(w->out + w->nout, text, n);
  w->recs[w->nrecs++] = (sim_rec){key, w->seq++, err, w->nout, n};
  w->nout += n;
  w->out_total += n;
  return 1;
}

/* The key that orders a lane's records: its block, then its thread. */
static uint64_t key_of(const worker *w, const warp *wp, int lane) {
  const unsigned *g = w->rc->l->grid;
  uint64_t block = ((uint64_t)w->bid[2] * g[1] + w->bid[1]) * g[0] + w->bid[0];
  return block << 32 | ((uint32_t)wp->index * 32 + (uint32_t)lane);
}

/* The NUL-terminated string at generic address p, at most cap - 1 bytes
   (cut there); 0 after a fault. NULL reads as "(null)". */
static int read_str(worker *w, warp *wp, int lane, const ins *in, uint64_t p,
                    char *buf, size_t cap) {
  if (!p) {
    snprintf(buf, cap, "(null)");
    return 1;
  }
  for (size_t i = 0; i + 1 < cap; i++) {
    if (!exec_read(w, wp, lane, in, p + i, &buf[i], 1)) return 0;
    if (!buf[i]) return 1;
  }
  buf[cap - 1] = '\0';
  return 1;
}

typedef struct text { char *s; size_t n, cap; } text;

static int put(text *t, const char *s, size_t n) {
  if (t->n + n + 1 > t->cap) {
    size_t c = t->cap ? t->cap : 256;
    while (c < t->n + n + 1) c *= 2;
    char *v = realloc(t->s, c);
    if (!v) return 0;
    t->s = v;
    t->cap = c;
  }
  memcpy(t->s + t->n, s, n);
  t->n += n;
  t->s[t->n] = '\0';
  return 1;
}

/* One conversion of a format: its text in spec (the directive rewritten
   for the host's printf), the argument's size and kind. */
typedef struct conv { char spec[32]; int size; char kind; } conv;

/* Parses the directive at f (after the '%'): its length, 0 when it is not
   one printf knows (the rest is printed as it is). */
static size_t parse_conv(const char *f, conv *c) {
  size_t i = 0, n = 0;
  c->spec[n++] = '%';
  while (f[i] && strchr("-+ #0", f[i]) && n < 10) c->spec[n++] = f[i++];
  while (f[i] >= '0' && f[i] <= '9' && n < 18) c->spec[n++] = f[i++];
  if (f[i] == '.') {
    c->spec[n++] = f[i++];
    while (f[i] >= '0' && f[i] <= '9' && n < 26) c->spec[n++] = f[i++];
  }
  int wide = 0;
  if (f[i] == 'h') i += f[i + 1] == 'h' ? 2 : 1; /* promoted to int */
  else if (f[i] == 'l') i += f[i + 1] == 'l' ? 2 : 1, wide = 1;
  else if (f[i] == 'z' || f[i] == 'j' || f[i] == 't') i++, wide = 1;
  else if (f[i] == 'L') i++;
  char k = f[i];
  if (!k || !strchr("diouxXcfFeEgGaAsp", k)) return 0;
  if (strchr("diouxX", k) && wide) c->spec[n++] = 'l', c->spec[n++] = 'l';
  c->spec[n++] = k;
  c->spec[n] = '\0';
  c->kind = k;
  c->size = strchr("fFeEgGaAsp", k) || wide ? 8 : 4;
  return i + 1;
}

/* Formats one lane's printf into t: the number of arguments read, or -1
   after a fault (the launch stops). */
static int format(worker *w, warp *wp, int lane, const ins *in, uint64_t fmt,
                  uint64_t args, text *t) {
  char f[SIM_STR_MAX], s[SIM_STR_MAX], one[SIM_STR_MAX + 64];
  if (!read_str(w, wp, lane, in, fmt, f, sizeof f)) return -1;
  uint64_t off = 0;
  int count = 0;
  for (const char *p = f; *p; ) {
    const char *pc = strchr(p, '%');
    if (!pc) {
      put(t, p, strlen(p));
      break;
    }
    put(t, p, (size_t)(pc - p));
    if (pc[1] == '%') {
      put(t, "%", 1);
      p = pc + 2;
      continue;
    }
    conv c;
    size_t len = parse_conv(pc + 1, &c);
    if (!len) {
      put(t, pc, strlen(pc));
      break;
    }
    off = (off + (uint64_t)c.size - 1) / (uint64_t)c.size * (uint64_t)c.size;
    uint64_t v = 0;
    if (!exec_read(w, wp, lane, in, args + off, &v, (size_t)c.size))
      return -1;
    off += (uint64_t)c.size;
    count++;
    int n;
    double dv;
    switch (c.kind) {
    case 'd': case 'i':
      n = c.size == 8 ? snprintf(one, sizeof one, c.spec, (long long)v)
                      : snprintf(one, sizeof one, c.spec, (int)(uint32_t)v);
      break;
    case 'o': case 'u': case 'x': case 'X':
      n = c.size == 8 ? snprintf(one, sizeof one, c.spec,
                                 (unsigned long long)v)
                      : snprintf(one, sizeof one, c.spec, (unsigned)v);
      break;
    case 'c':
      n = snprintf(one, sizeof one, c.spec, (int)(uint32_t)v);
      break;
    case 's':
      if (!read_str(w, wp, lane, in, v, s, sizeof s)) return -1;
      n = snprintf(one, sizeof one, c.spec, s);
      break;
    case 'p':
      n = snprintf(one, sizeof one, c.spec, (void *)(uintptr_t)v);
      break;
    default:
      memcpy(&dv, &v, 8);
      n = snprintf(one, sizeof one, c.spec, dv);
    }
    if (n > 0) put(t, one, (size_t)n < sizeof one ? (size_t)n : sizeof one - 1);
    p = pc + 1 + len;
  }
  return count;
}

int exec_printf(worker *w, warp *wp, const ins *in, uint32_t em) {
  size_t pfs = w->rc->m->pframe;
  for (uint32_t q = em; q; q &= q - 1) {
    int l = __builtin_ctz(q);
    const unsigned char *pf = wp->pf + (size_t)l * pfs;
    uint64_t fmt, args;
    memcpy(&fmt, pf + in->a, 8);
    memcpy(&args, pf + in->b, 8);
    text t = {NULL, 0, 0};
    int r = fmt ? format(w, wp, l, in, fmt, args, &t) : -1;
    if (r < 0 && w->fault) {
      free(t.s);
      return 1;
    }
    int ok = emit(w, key_of(w, wp, l), t.s, t.n, 0);
    free(t.s);
    if (!ok) r = -2; /* printf's internal error */
    if (in->c >= 0) {
      int32_t v = r;
      memcpy(wp->pf + (size_t)l * pfs + in->c, &v, 4);
    }
  }
  return 0;
}

/* The failed assertion's message, as the GPU prints it, for each lane that
   reached it; then the launch stops with SIM_ASSERT (the first assertion
   of a launch is told, as the first fault is). */
int exec_assert(worker *w, warp *wp, const ins *in, uint32_t em) {
  if (!em) return 0;
  size_t pfs = w->rc->m->pframe;
  char msg[SIM_STR_MAX], file[SIM_STR_MAX], fn[SIM_STR_MAX], line[SIM_STR_MAX * 3 + 160];
  pthread_mutex_lock(&w->rc->mu);
  int first = !w->rc->fault;
  pthread_mutex_unlock(&w->rc->mu);
  for (uint32_t q = first ? em : 0; q; q &= q - 1) {
    int l = __builtin_ctz(q);
    const unsigned char *pf = wp->pf + (size_t)l * pfs;
    uint64_t pm, pfile, pfn;
    uint32_t at;
    memcpy(&pm, pf + in->d[0], 8);
    memcpy(&pfile, pf + in->d[1], 8);
    memcpy(&at, pf + in->d[2], 4);
    memcpy(&pfn, pf + in->d[3], 8);
    if (!read_str(w, wp, l, in, pm, msg, sizeof msg) ||
        !read_str(w, wp, l, in, pfile, file, sizeof file) ||
        !read_str(w, wp, l, in, pfn, fn, sizeof fn))
      return 1;
    unsigned t[3];
    exec_thread_of(w, wp->index, l, t);
    int n = snprintf(line, sizeof line, "%s:%u: %s: block: [%u,%u,%u], "
                     "thread: [%u,%u,%u] Assertion `%s` failed.\n", file, at,
                     fn, w->bid[0], w->bid[1], w->bid[2], t[0], t[1], t[2],
                     msg);
    if (n > 0 && !emit(w, key_of(w, wp, l), line, strlen(line), 1)) break;
  }
  uint64_t pm;
  memcpy(&pm, wp->pf + (size_t)__builtin_ctz(em) * pfs + in->d[0], 8);
  if (!read_str(w, wp, __builtin_ctz(em), in, pm, msg, sizeof msg)) return 1;
  exec_fault(w, wp, __builtin_ctz(em), in, SIM_ASSERT, "assertion `%.100s` "
             "failed", msg);
  return 1;
}

static int by_key(const void *a, const void *b) {
  const sim_rec *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Hands the workers' records to the caller in the order of the threads. */
void exec_print_all(worker *ws, unsigned n, sim_launch *l) {
  size_t total = 0;
  for (unsigned i = 0; i < n; i++) total += ws[i].nrecs;
  if (!total || !l->print) return;
  typedef struct { sim_rec r; const char *base; } item;
  item *v = malloc(total * sizeof *v);
  if (!v) return;
  size_t k = 0;
  for (unsigned i = 0; i < n; i++)
    for (size_t j = 0; j < ws[i].nrecs; j++) {
      v[k].r = ws[i].recs[j]; /* a thread's records are one worker's */
      v[k++].base = ws[i].out;
    }
  qsort(v, total, sizeof *v, by_key);
  for (size_t j = 0; j < total; j++)
    l->print(l->ud, v[j].base + v[j].r.off, v[j].r.len, (int)v[j].r.err);
  free(v);
}
