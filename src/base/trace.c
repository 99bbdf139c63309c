/* The script's trace: every eager launch, copy, fill and graph replay of a
   state with its Lua line, timed by a pair of events on its stream, and
   written as one Chrome trace when the state closes (CUGRAPH_LUA_PROFILE
   names the file; cugraph-lua --profile sets it). And NVTX ranges named by
   the same call and line, eager and while capturing, when an NVTX tool is
   attached (NVTX_INJECTION64_PATH: Nsight Systems, Nsight Compute).

   Nothing here waits: the records whose events have completed are read as
   calls go by, and while more than CG_TRACE_PENDING are outstanding new
   calls go untimed (counted as dropped). The state's close waits for the
   rest and writes the file. */
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

struct cg_trace {
  char *path;           /* NULL: NVTX only */
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
  size_t len = strlen(path);
  char *p = malloc(len + sizeof tag);
  if (!p) return NULL;
  const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
  size_t stem = dot && dot != path && (!slash || dot > slash + 1)
                    ? (size_t)(dot - path) : len;
  snprintf(p, len + sizeof tag, "%.*s%s%s", (int)stem, path, tag, path + stem);
  return p;
}

static void trace_close(lua_State *L, cg_ctx *root);

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
  ctx->root->stream_clock++; /* its events go between kernels */
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
    CU(L, ctx, cuEventRecord, ref->ev, s);
  }
  if (t->n == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 256;
    trec *v = realloc(t->v, cap * sizeof *v);
    if (!v) {
      t->dropped++;
      return tok;
    }
    t->v = v;
    t->cap = cap;
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

/* One row per stream of each device, numbered in the order they first
   appear; "complete" events (ph X), times in µs. */
static int write_file(const cg_trace *t) {
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
  fprintf(f, "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 0, "
          "\"args\": {\"name\": \"cugraph-lua: %zu calls, %zu not timed\"}}"
          "\n]}\n", timed, t->dropped + (t->n - timed));
  free(rows);
  int ok = !ferror(f);
  if (fclose(f) != 0) ok = 0;
  if (ok) {
    fprintf(stderr, "cugraph-lua: profile of %zu calls written to %s\n",
            timed, t->path);
    summary(t);
  } else
    fprintf(stderr, "cugraph-lua: cannot write the profile %s\n", t->path);
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
  if (t->path) write_file(t);
  free(t->v);
  free(t->path);
  free(t);
  root->trace = NULL;
}
