/* The script's trace: every eager launch, copy, fill and graph replay of a
   state with its Lua line, timed by a pair of events on its stream, and
   written as one Chrome trace when the state closes (CUGRAPH_LUA_PROFILE
   names the file; cugraph-lua --profile sets it). And NVTX ranges named by
   the same call and line, eager and while capturing, when an NVTX tool is
   attached (NVTX_INJECTION64_PATH: Nsight Systems, Nsight Compute).

   Nothing here waits: the records whose events have completed are read as
   calls go by, and while more than CG_TRACE_PENDING are outstanding new
   calls go untimed (counted as dropped). The state's close waits for the
   rest and writes the file.

   The kernels of graph replays are named from CUPTI's kernel activity
   records, which the trace reads from the first graph it is handed
   (cg_trace_graph, at a graph's first traced launch or when C takes it)
   to its close: each run names its instantiated graph's CUPTI id and the
   node's position there, which the graph's table names by Lua line and
   kernel. The tables are also written beside the trace
   (<stem>-nodes.tsv) for a join with other tools' records of the same
   process (Nsight Systems). */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#pragma GCC diagnostic push /* the header casts dlsym's result */
#pragma GCC diagnostic ignored "-Wpedantic"
#include <nvtx3/nvToolsExt.h>
#pragma GCC diagnostic pop
#include "base/base.h"
#include "base/cupti.h"
#include "base/world.h"

enum { CG_TRACE_PENDING = 1 << 16, CG_TRACE_MAX = 1 << 22, CG_TRACE_REFS = 16 };

typedef struct trec {
  cg_ctx *ctx;
  CUstream s;
  CUevent e0, e1;       /* NULL once read */
  int ended;            /* e1 recorded after the call */
  double ts, dur;       /* µs after the trace began; dur < 0: not timed */
  unsigned long long ins; /* on the simulator: thread-instructions run */
  const char *what;     /* a literal */
  char name[48], where[80];
} trec;

/* An instantiated graph's names, from stamp (CUPTI's clock) on */
typedef struct treg {
  uint32_t id;          /* CUPTI's id of the exec; 0: not known yet */
  unsigned graph;
  uint64_t stamp;
  size_t n;
  cg_trace_node *v;     /* by position */
} treg;

struct cg_trace {
  char *path;           /* NULL: NVTX only */
  int kernels;          /* 1: reading CUPTI's records; -1: not (why) */
  char why[200];        /* why kernels go unnamed, "" for none */
  cg_cupti_reader rd;
  uint64_t cupti0;      /* CUPTI's clock at host0, µs of the trace's */
  double host0;
  treg *regs;
  size_t nregs, cregs;
  int nvtx;
  int open;             /* an NVTX range of cg_trace_begin_ not popped yet */
  trec *v;
  size_t n, cap, read;  /* records [read, n) may still be outstanding */
  size_t dropped;
  double t0;            /* host µs when the trace began */
  /* per device: an event recorded with the first call, and the host's
     time then, which the device's times count from */
  struct tref { cg_ctx *ctx; CUevent ev; double host; } ref[CG_TRACE_REFS];
  int nref;
};

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static void release_event(lua_State *L, cg_ctx *ctx, CUevent e) {
  cg_handle h;
  h.p = e;
  if (e) cg_release(L, ctx, CG_H_EVENT, h);
}

/* The length of path without its file's extension. */
static size_t stem_of(const char *path) {
  const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
  return dot && dot != path && (!slash || dot > slash + 1)
             ? (size_t)(dot - path) : strlen(path);
}

/* The path a state's trace goes to: path for a process's first state, with
   "-k" before its extension for the k-th state opened after it, and
   "-rank<r>" before that in a job of several ranks (cuda.world). */
static char *claim_path(const char *path) {
  static atomic_uint states;
  unsigned k = atomic_fetch_add(&states, 1);
  cg_world w;
  char err[8], tag[48] = "";
  if (cg_world_read(&w, 1, err, sizeof err) == 0 && w.size > 1)
    snprintf(tag, sizeof tag, "-rank%d", w.rank);
  if (k) snprintf(tag + strlen(tag), sizeof tag - strlen(tag), "-%u", k);
  size_t len = strlen(path), stem = stem_of(path);
  char *p = malloc(len + sizeof tag);
  if (!p) return NULL;
  snprintf(p, len + sizeof tag, "%.*s%s%s", (int)stem, path, tag, path + stem);
  return p;
}

static void trace_close(lua_State *L, cg_ctx *root);

/* Room for one more of *n elements of size at *v (*cap of them): 0 when
   out of host memory. */
static int grow(void *v, size_t n, size_t *cap, size_t size, size_t first) {
  if (n < *cap) return 1;
  size_t c = *cap ? 2 * *cap : first;
  void *p = realloc(*(void **)v, c * size);
  if (!p) return 0;
  *(void **)v = p;
  *cap = c;
  return 1;
}

/* The first graph handed over starts the reading of kernel records. */
static void start_kernels(cg_trace *t) {
  const char *e = cg_cupti_start(&t->rd);
  if (!e && cg_cupti.cuptiGetTimestamp(&t->cupti0) != CUPTI_SUCCESS)
    e = "cuptiGetTimestamp failed";
  t->host0 = now_us();
  t->kernels = e ? -1 : 1;
  if (e) {
    snprintf(t->why, sizeof t->why, "%s", e);
    cg_cupti_stop(&t->rd);
  }
}

void cg_trace_graph(cg_ctx *ctx, CUgraphExec exec, unsigned graph,
                    const cg_trace_node *v, size_t n, const char *why) {
  cg_trace *t = ctx->root->trace;
  if (!t || !t->path) return;
  if (!t->kernels) start_kernels(t);
  if (!v) {
    if (!*t->why)
      snprintf(t->why, sizeof t->why, "graph #%u: %s", graph, why);
    return;
  }
  if (t->kernels < 0) return;
  if (!grow(&t->regs, t->nregs, &t->cregs, sizeof *t->regs, 16)) return;
  treg *r = &t->regs[t->nregs];
  memset(r, 0, sizeof *r);
  r->graph = graph;
  r->n = n;
  if (!(r->v = malloc((n ? n : 1) * sizeof *r->v))) return;
  memcpy(r->v, v, n * sizeof *v);
  if (!cg_cupti.cuptiGetGraphExecId ||
      cg_cupti.cuptiGetGraphExecId(exec, &r->id) != CUPTI_SUCCESS)
    r->id = 0; /* bound to the first new id after stamp (bind) */
  cg_cupti.cuptiGetTimestamp(&r->stamp);
  t->nregs++;
}

/* Pops the NVTX range cg_trace_begin_ pushed, if it is still open (its
   call raised before cg_trace_end_). */
static void pop_open(cg_trace *t) {
  if (t->open) nvtxRangePop();
  t->open = 0;
}

void cg_trace_open(cg_ctx *root) {
  const char *path = getenv("CUGRAPH_LUA_PROFILE");
  const char *tool = getenv("NVTX_INJECTION64_PATH");
  if ((!path || !*path) && (!tool || !*tool)) return;
  cg_trace *t = calloc(1, sizeof *t);
  if (!t) return;
  t->path = path && *path ? claim_path(path) : NULL;
  t->nvtx = tool && *tool;
  t->t0 = now_us();
  root->trace = t;
  cg_at_close(root, trace_close);
}

/* file:line of the nearest Lua function calling in, into buf */
static void where(lua_State *L, char *buf, size_t size) {
  lua_Debug ar;
  buf[0] = '\0';
  for (int level = 1; level < 5 && lua_getstack(L, level, &ar); level++)
    if (lua_getinfo(L, "Sl", &ar) && ar.currentline > 0) {
      snprintf(buf, size, "%s:%d", ar.short_src, ar.currentline);
      return;
    }
}

/* Reads the records from t->read on whose events have completed; with
   wait, waits for them (the state closes). Calls do not nest: a record not
   ended is of a call that raised before its end, and stays untimed, as do
   those of a device that hangs. */
static void read_done(lua_State *L, cg_trace *t, int wait) {
  for (; t->read < t->n; t->read++) {
    trec *r = &t->v[t->read];
    if (r->e1 && r->ended && cg_make_current(r->ctx->cu) == CUDA_SUCCESS) {
      CUresult q = cg_drv.cuEventQuery(r->e1);
      if (q == CUDA_ERROR_NOT_READY && wait && !r->ctx->hung &&
          !r->ctx->poison)
        q = cg_drv.cuEventSynchronize(r->e1);
      if (q == CUDA_ERROR_NOT_READY) return;
      struct tref *ref = NULL;
      for (int i = 0; i < t->nref; i++)
        if (t->ref[i].ctx == r->ctx) ref = &t->ref[i];
      float a = 0, d = 0;
      if (q == CUDA_SUCCESS && ref &&
          cg_drv.cuEventElapsedTime(&a, ref->ev, r->e0) == CUDA_SUCCESS &&
          cg_drv.cuEventElapsedTime(&d, r->e0, r->e1) == CUDA_SUCCESS) {
        r->ts = ref->host - t->t0 + 1e3 * (double)a;
        r->dur = 1e3 * (double)d;
        unsigned long long c0 = 0, c1 = 0;
        if (cg_drv.cuSimEventInstructions &&
            cg_drv.cuSimEventInstructions(r->e0, &c0) == CUDA_SUCCESS &&
            cg_drv.cuSimEventInstructions(r->e1, &c1) == CUDA_SUCCESS)
          r->ins = c1 - c0;
      }
    }
    release_event(L, r->ctx, r->e0);
    release_event(L, r->ctx, r->e1);
    r->e0 = r->e1 = NULL;
  }
}

int cg_trace_begin_(lua_State *L, cg_ctx *ctx, CUstream s, const char *what,
                    const char *name) {
  cg_trace *t = ctx->root->trace;
  char at[80];
  where(L, at, sizeof at);
  int tok = -1;
  pop_open(t); /* the last call raised before its end */
  if (t->nvtx) {
    char label[160];
    size_t w = strlen(what); /* "kernel step", "graph #2", "fill" */
    int both = name && strncmp(name, what, w) != 0;
    snprintf(label, sizeof label, "%s%s%s (%s)", both ? what : "",
             both ? " " : "", name ? name : what, at);
    nvtxRangePushA(label);
    t->open = 1;
    tok = -2;
  }
  if (!t->path || ctx->capture) return tok; /* a capture records no events */
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  if (cg_drv.cuStreamIsCapturing && cg_drv.cuStreamIsCapturing(s, &cs) == 0 &&
      cs != CU_STREAM_CAPTURE_STATUS_NONE)
    return tok; /* captured by another state */
  read_done(L, t, 0);
  cg_current(L, ctx); /* read_done made each record's device current */
  if (t->n - t->read >= CG_TRACE_PENDING || t->n >= CG_TRACE_MAX) {
    t->dropped++;
    return tok;
  }
  struct tref *ref = NULL;
  for (int i = 0; i < t->nref; i++)
    if (t->ref[i].ctx == ctx) ref = &t->ref[i];
  if (!ref) {
    if (t->nref == CG_TRACE_REFS) {
      t->dropped++;
      return tok;
    }
    ref = &t->ref[t->nref];
    CU(L, ctx, cuEventCreate, &ref->ev, CU_EVENT_DEFAULT);
    ref->ctx = ctx;
    t->nref++;
    ref->host = now_us();
    ctx->root->stream_clock++; /* an event between kernels */
    CU(L, ctx, cuEventRecord, ref->ev, s);
  }
  if (!grow(&t->v, t->n, &t->cap, sizeof *t->v, 256)) {
    t->dropped++;
    return tok;
  }
  trec *r = &t->v[t->n];
  memset(r, 0, sizeof *r);
  r->ctx = ctx;
  r->s = s;
  r->dur = -1;
  r->what = what;
  snprintf(r->name, sizeof r->name, "%s", name ? name : what);
  memcpy(r->where, at, sizeof r->where);
  CU(L, ctx, cuEventCreate, &r->e0, CU_EVENT_DEFAULT);
  t->n++; /* from here its events are the trace's to release */
  CU(L, ctx, cuEventCreate, &r->e1, CU_EVENT_DEFAULT);
  ctx->root->stream_clock++; /* its events go between kernels; an NVTX
                                 range alone leaves them adjacent */
  CU(L, ctx, cuEventRecord, r->e0, s);
  return (int)(t->n - 1);
}

void cg_trace_end_(lua_State *L, cg_ctx *ctx, int tok) {
  cg_trace *t = ctx->root->trace;
  pop_open(t);
  if (tok < 0) return;
  trec *r = &t->v[tok];
  if (!r->e1) return; /* read as untimed already */
  CU(L, ctx, cuEventRecord, r->e1, r->s);
  r->ended = 1;
}

void cg_trace_raised(cg_ctx *ctx) {
  if (ctx->root->trace) pop_open(ctx->root->trace);
}

void cg_trace_push(cg_ctx *ctx, const char *name) {
  const cg_trace *t = ctx->root->trace;
  if (t && t->nvtx) nvtxRangePushA(name);
}

void cg_trace_pop(cg_ctx *ctx) {
  const cg_trace *t = ctx->root->trace;
  if (t && t->nvtx) nvtxRangePop();
}

void cg_json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

/* The calls by Lua line and name, the most time first, on stderr: the
   first CG_TRACE_LINES of them (the first 256 distinct are counted). */
enum { CG_TRACE_LINES = 8, CG_TRACE_GROUPS = 256 };
typedef struct tgroup { const trec *r; size_t calls; double us; } tgroup;

static int by_time(const void *a, const void *b) {
  double x = ((const tgroup *)a)->us, y = ((const tgroup *)b)->us;
  return (x < y) - (x > y);
}

static void summary(const cg_trace *t) {
  tgroup g[CG_TRACE_GROUPS];
  size_t ng = 0;
  for (size_t i = 0; i < t->n; i++) {
    const trec *r = &t->v[i];
    if (r->dur < 0) continue;
    size_t k = 0;
    while (k < ng && (strcmp(g[k].r->where, r->where) ||
                      strcmp(g[k].r->name, r->name)))
      k++;
    if (k == ng) {
      if (ng == CG_TRACE_GROUPS) continue;
      g[ng++] = (tgroup){ r, 0, 0 };
    }
    g[k].calls++;
    g[k].us += r->dur;
  }
  qsort(g, ng, sizeof *g, by_time);
  if (ng) fprintf(stderr, "%10s %12s %10s  %s\n", "calls", "total us", "mean us",
                  "line (the most time first)");
  for (size_t k = 0; k < ng && k < CG_TRACE_LINES; k++)
    fprintf(stderr, "%10zu %12.1f %10.2f  %s  %s\n", g[k].calls, g[k].us,
            g[k].us / (double)g[k].calls, g[k].r->where, g[k].r->name);
}

/* -- the kernels of graph replays ------------------------------------------ */

typedef struct kruns {
  const cg_kernel_run *v;
  size_t n, dropped;
  const treg **of;      /* each run's table, or NULL: no traced graph's */
  size_t named;
} kruns;

static int by_id(const void *a, const void *b) {
  const treg *x = a, *y = b;
  if (x->id != y->id) return (x->id > y->id) - (x->id < y->id);
  return (x->stamp > y->stamp) - (x->stamp < y->stamp);
}

/* Without cuptiGetGraphExecId: each exec takes the id of the first run
   after its stamp whose id no table has, its first replay's. */
static void bind(cg_trace *t, const kruns *k) {
  for (size_t i = 0; i < t->nregs; i++) {
    treg *r = &t->regs[i];
    if (r->id) continue;
    uint64_t first = 0;
    for (size_t j = 0; j < k->n; j++) {
      uint32_t x = (uint32_t)(k->v[j].node >> 32);
      if (!x || k->v[j].start < r->stamp || (r->id && k->v[j].start >= first))
        continue;
      int known = 0;
      for (size_t q = 0; q < t->nregs && !known; q++)
        known = t->regs[q].id == x;
      if (!known) r->id = x, first = k->v[j].start;
    }
  }
}

/* Each run's table: the latest of its exec's handed over before it ran
   (the first, where the clocks disagree). */
static void match(cg_trace *t, kruns *k) {
  bind(t, k);
  qsort(t->regs, t->nregs, sizeof *t->regs, by_id);
  for (size_t j = 0; j < k->n; j++) {
    uint32_t id = (uint32_t)(k->v[j].node >> 32);
    size_t lo = 0, hi = t->nregs, pos = k->v[j].node & 0xffffffffu;
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (t->regs[mid].id < id) lo = mid + 1;
      else hi = mid;
    }
    const treg *r = NULL;
    for (size_t q = lo; q < t->nregs && t->regs[q].id == id; q++)
      if (!r || t->regs[q].stamp <= k->v[j].start) r = &t->regs[q];
    k->of[j] = id && r && pos < r->n ? r : NULL;
    k->named += k->of[j] != NULL;
  }
}

static double run_us(const cg_trace *t, uint64_t ns) {
  return t->host0 - t->t0 + (double)(int64_t)(ns - t->cupti0) / 1e3;
}

/* The kernel runs of traced graphs: a row per device and stream after
   the calls' rows (from 1000), each run named by its kernel with its Lua
   line, graph and node. */
static void write_kernels(FILE *f, const cg_trace *t, const kruns *k) {
  enum { ROWS = 256 };
  uint32_t dev[ROWS], sid[ROWS];
  size_t nrows = 0;
  for (size_t j = 0; j < k->n; j++) {
    const treg *r = k->of[j];
    if (!r) continue;
    const cg_kernel_run *x = &k->v[j];
    const cg_trace_node *nd = &r->v[x->node & 0xffffffffu];
    size_t row = 0;
    while (row < nrows && (dev[row] != x->device || sid[row] != x->stream))
      row++;
    if (row == nrows && nrows < ROWS) {
      dev[nrows] = x->device;
      sid[nrows++] = x->stream;
      fprintf(f, "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %u, "
              "\"tid\": %zu, \"args\": {\"name\": \"graph kernels, stream "
              "%u\"}},\n", x->device, 1000 + row, x->stream);
    }
    fputs("{\"ph\": \"X\", \"name\": ", f);
    cg_json_string(f, *nd->name ? nd->name : "kernel");
    fprintf(f, ", \"cat\": \"graph kernel\", \"pid\": %u, \"tid\": %zu, "
            "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"line\": ", x->device,
            1000 + row, run_us(t, x->start),
            (double)(x->end - x->start) / 1e3);
    cg_json_string(f, nd->where);
    fprintf(f, ", \"graph\": \"#%u\", \"node\": %u}},\n", r->graph, nd->rec);
  }
}

/* Why kernels are not named (or some are not), for the trace's metadata */
static void kernels_note(char *buf, size_t size, const cg_trace *t,
                         const kruns *k) {
  if (t->kernels < 0 || (!t->kernels && *t->why))
    snprintf(buf, size, "graph kernels not named: %s", t->why);
  else if (!t->kernels)
    snprintf(buf, size, "no graph was replayed");
  else
    snprintf(buf, size, "%zu graph kernel runs named, %zu of other graphs, "
             "%zu dropped (over %d records)%s%s", k->named, k->n - k->named,
             k->dropped, CG_CUPTI_MAX, *t->why ? "; " : "", t->why);
}

/* <stem>-nodes.tsv beside the trace: each traced exec's nodes by CUPTI's
   ids. */
static void write_nodes(const cg_trace *t) {
  if (!t->nregs) return;
  size_t len = strlen(t->path);
  char *p = malloc(len + 16);
  if (!p) return;
  snprintf(p, len + 16, "%.*s-nodes.tsv", (int)stem_of(t->path), t->path);
  FILE *f = fopen(p, "w");
  if (f) {
    fputs("graphNodeId\tgraphExecId\tposition\tgraph\tnode\tline\tkernel\n",
          f);
    for (size_t i = 0; i < t->nregs; i++) {
      const treg *r = &t->regs[i];
      for (size_t q = 0; r->id && q < r->n; q++)
        fprintf(f, "%llu\t%u\t%zu\t#%u\t%u\t%s\t%s\n",
                (unsigned long long)r->id << 32 | q, r->id, q, r->graph,
                r->v[q].rec, r->v[q].where, r->v[q].name);
    }
    if (fclose(f) != 0)
      fprintf(stderr, "cugraph-lua: cannot write the table %s\n", p);
  } else {
    fprintf(stderr, "cugraph-lua: cannot write the table %s\n", p);
  }
  free(p);
}

/* The kernel runs by Lua line and kernel, the most time first, on
   stderr (the first CG_TRACE_LINES; the first 256 distinct counted). */
typedef struct kgroup { const cg_trace_node *nd; size_t runs; double us; } kgroup;

static int kby_time(const void *a, const void *b) {
  double x = ((const kgroup *)a)->us, y = ((const kgroup *)b)->us;
  return (x < y) - (x > y);
}

static void ksummary(const kruns *k) {
  kgroup g[256];
  size_t ng = 0;
  for (size_t j = 0; j < k->n; j++) {
    if (!k->of[j]) continue;
    const cg_trace_node *nd = &k->of[j]->v[k->v[j].node & 0xffffffffu];
    size_t q = 0;
    while (q < ng && (strcmp(g[q].nd->where, nd->where) ||
                      strcmp(g[q].nd->name, nd->name)))
      q++;
    if (q == ng) {
      if (ng == sizeof g / sizeof *g) continue;
      g[ng++] = (kgroup){ nd, 0, 0 };
    }
    g[q].runs++;
    g[q].us += (double)(k->v[j].end - k->v[j].start) / 1e3;
  }
  qsort(g, ng, sizeof *g, kby_time);
  if (ng) fprintf(stderr, "%10s %12s %10s  %s\n", "kernel runs", "total us",
                  "mean us", "graph kernels by line (the most time first)");
  for (size_t q = 0; q < ng && q < CG_TRACE_LINES; q++)
    fprintf(stderr, "%10zu %12.1f %10.2f  %s  %s\n", g[q].runs, g[q].us,
            g[q].us / (double)g[q].runs, g[q].nd->where, g[q].nd->name);
}

/* One row per stream of each device, numbered in the order they first
   appear; "complete" events (ph X), times in µs. */
static int write_file(const cg_trace *t, const kruns *k) {
  FILE *f = fopen(t->path, "w");
  if (!f) {
    fprintf(stderr, "cugraph-lua: cannot write the profile %s\n", t->path);
    return 0;
  }
  CUstream *rows = calloc(t->n ? t->n : 1, sizeof *rows);
  size_t nrows = 0, timed = 0;
  fputs("{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n", f);
  for (size_t i = 0; i < t->n; i++) {
    const trec *r = &t->v[i];
    if (r->dur < 0) continue;
    size_t row = 0;
    while (rows && row < nrows && rows[row] != r->s) row++;
    if (rows && row == nrows) {
      rows[nrows++] = r->s;
      fprintf(f, "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, "
              "\"tid\": %zu, \"args\": {\"name\": \"%s %zu\"}},\n",
              r->ctx->ordinal, row,
              r->s == r->ctx->stream ? "default stream" : "stream", row);
    }
    fputs("{\"ph\": \"X\", \"name\": ", f);
    cg_json_string(f, r->name);
    fprintf(f, ", \"cat\": \"%s\", \"pid\": %d, \"tid\": %zu, "
            "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"line\": ",
            r->what, r->ctx->ordinal, row, r->ts, r->dur);
    cg_json_string(f, r->where);
    if (cg_drv.cuSimEventInstructions)
      fprintf(f, ", \"instructions\": %llu", r->ins);
    fputs("}},\n", f);
    timed++;
  }
  write_kernels(f, t, k);
  char note[400];
  kernels_note(note, sizeof note, t, k);
  fprintf(f, "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 0, "
          "\"args\": {\"name\": \"cugraph-lua: %zu calls, %zu not timed\"}}"
          "\n], \"otherData\": {\"kernels\": ", timed,
          t->dropped + (t->n - timed));
  cg_json_string(f, note);
  fprintf(f, ", \"kernel_runs\": %zu, \"kernel_runs_dropped\": %zu}}\n",
          k->named, k->dropped);
  free(rows);
  int ok = !ferror(f);
  if (fclose(f) != 0) ok = 0;
  if (ok) {
    fprintf(stderr, "cugraph-lua: profile of %zu calls written to %s\n",
            timed, t->path);
    if (t->kernels)
      fprintf(stderr, "cugraph-lua: %s\n", note);
    summary(t);
    ksummary(k);
  } else
    fprintf(stderr, "cugraph-lua: cannot write the profile %s\n", t->path);
  write_nodes(t);
  return ok;
}

/* The state closes: the outstanding records are waited for, the file
   written, the events released. */
static void trace_close(lua_State *L, cg_ctx *root) {
  cg_trace *t = root->trace;
  if (!t) return;
  pop_open(t); /* the state's last call raised */
  read_done(L, t, 1);
  for (int i = 0; i < t->nref; i++) release_event(L, t->ref[i].ctx, t->ref[i].ev);
  kruns k = { 0 };
  if (t->kernels > 0) {
    const char *e = cg_cupti_take(&t->rd, &k.v, &k.n, &k.dropped);
    k.of = e ? NULL : calloc(k.n ? k.n : 1, sizeof *k.of);
    if (!k.of) {
      snprintf(t->why, sizeof t->why, "%s", e ? e : "out of host memory");
      k.n = 0;
    }
    match(t, &k);
  }
  if (t->path) write_file(t, &k);
  free(k.of);
  cg_cupti_stop(&t->rd);
  for (size_t i = 0; i < t->nregs; i++) free(t->regs[i].v);
  free(t->regs);
  free(t->v);
  free(t->path);
  free(t);
  root->trace = NULL;
}
