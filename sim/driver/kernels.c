/* Running a kernel: its host version, found by entry name (the built-in
   condition setters here, the spec kernels' twins in spec/support/twins.c),
   thread by thread; or, in the simulator, its PTX (sim/ptx). */
#include "double.h"
#include "queue.h"
#include "programmatic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* -- host versions --------------------------------------------------------- */

/* The host twin of cudaGraphSetConditional: sets the handle in the graph
   being launched; a handle it does not have is a fault. */
void dbl_set_conditional(dbl_kctx *c, uint64_t h, unsigned v) {
  if (dbl_set_handle(h, v)) c->fault = CUDA_ERROR_LAUNCH_FAILED;
}

#ifndef CUDA_SIM
/* The setters of src/kernel/setters.cu. */
static void k_cond_set(dbl_kctx *c) {
  uint64_t h;
  uint32_t v;
  dbl_arg(c, 0, &h, 8), dbl_arg(c, 1, &v, 4);
  dbl_set_conditional(c, h, v);
}

static void k_cond_when(dbl_kctx *c) {
  static const unsigned char size[] = {4, 8, 1, 1, 2, 2, 4, 4, 8, 8};
  uint64_t h, p, bits;
  uint32_t type, cmp;
  int lt, eq, gt;
  dbl_arg(c, 0, &h, 8), dbl_arg(c, 1, &p, 8), dbl_arg(c, 2, &type, 4);
  dbl_arg(c, 3, &cmp, 4), dbl_arg(c, 4, &bits, 8);
  unsigned char raw[8] = {0};
  if (type > 9 || !dbl_ld(c, p, raw, size[type])) return;
  if (type <= 1) {
    float f;
    double a, b;
    memcpy(&f, raw, 4);
    if (type == 0) a = f;
    else memcpy(&a, raw, 8);
    memcpy(&b, &bits, 8);
    lt = a < b, eq = a == b, gt = a > b;
  } else if (type % 2 == 0) {
    int64_t a = 0, b = (int64_t)bits;
    int8_t i8; int16_t i16; int32_t i32;
    if (type == 2) memcpy(&i8, raw, 1), a = i8;
    else if (type == 4) memcpy(&i16, raw, 2), a = i16;
    else if (type == 6) memcpy(&i32, raw, 4), a = i32;
    else memcpy(&a, raw, 8);
    lt = a < b, eq = a == b, gt = a > b;
  } else {
    uint64_t a = 0;
    memcpy(&a, raw, size[type]); /* little-endian host */
    lt = a < bits, eq = a == bits, gt = a > bits;
  }
  unsigned r = cmp == 0 ? lt : cmp == 1 ? lt | eq : cmp == 2 ? gt
             : cmp == 3 ? gt | eq : cmp == 4 ? eq : !eq;
  dbl_set_conditional(c, h, r);
}

static void k_cond_countdown(dbl_kctx *c) {
  uint64_t h, cell;
  uint32_t n, v;
  dbl_arg(c, 0, &h, 8), dbl_arg(c, 1, &cell, 8), dbl_arg(c, 2, &n, 4);
  if (!dbl_ld(c, cell, &v, 4)) return;
  if (v == 0) v = n;
  v -= 1;
  dbl_st(c, cell, &v, 4);
  dbl_set_conditional(c, h, v != 0);
}

/* g:profile's stamp: the global timer is the host's monotonic clock. */
static void k_stamp(dbl_kctx *c) {
  uint64_t clocks, sums, runs, last, t0, sum;
  int32_t to, from, rec;
  uint32_t n;
  struct timespec ts;
  dbl_arg(c, 0, &clocks, 8), dbl_arg(c, 1, &sums, 8);
  dbl_arg(c, 2, &runs, 8), dbl_arg(c, 3, &last, 8);
  dbl_arg(c, 4, &to, 4), dbl_arg(c, 5, &from, 4), dbl_arg(c, 6, &rec, 4);
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t t = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  if (rec >= 0) {
    uint64_t r = (uint64_t)rec;
    if (!dbl_ld(c, clocks + 8 * (uint64_t)from, &t0, 8) ||
        !dbl_ld(c, sums + 8 * r, &sum, 8) || !dbl_ld(c, runs + 4 * r, &n, 4))
      return;
    sum += t > t0 ? t - t0 : 0;
    n++;
    dbl_st(c, sums + 8 * r, &sum, 8);
    dbl_st(c, runs + 4 * r, &n, 4);
    dbl_st(c, last + 16 * r, &t0, 8);
    dbl_st(c, last + 16 * r + 8, &t, 8);
  } else if (rec == -2) {
    dbl_st(c, clocks, &t, 8);
  }
  dbl_st(c, clocks + 8 * (uint64_t)to, &t, 8);
}

static const dbl_kimpl setters[] = {
  {"cg_cond_set", {k_cond_set, NULL}, 2, {8, 4}},
  {"cg_cond_when", {k_cond_when, NULL}, 5, {8, 8, 4, 4, 8}},
  {"cg_cond_countdown", {k_cond_countdown, NULL}, 3, {8, 8, 4}},
  {"cg_stamp", {k_stamp, NULL}, 7, {8, 8, 8, 8, 4, 4, 4}},
};

static const dbl_kimpl *find_in(const dbl_kimpl *v, size_t n,
                                const char *name) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(v[i].name, name)) return &v[i];
  return NULL;
}
#endif

/* The host version of the entry called name: a setter, else a twin. */
const dbl_kimpl *dbl_find_kernel(const char *name) {
#ifdef CUDA_SIM
  return NULL; /* every kernel runs from its PTX */
#else
  const dbl_kimpl *k = find_in(setters, sizeof setters / sizeof *setters,
                               name);
  return k ? k : find_in(dbl_twins, dbl_ntwins, name);
#endif
}

static unsigned char shared_mem[SHARED_OPTIN];

/* Runs every thread of the grid, block by block; a fault makes the context
   sticky and stops the kernel, and so does a stop (dbl_work_check) before
   a block, returned. */
#ifdef CUDA_SIM
static CUresult run_sim(const op *o);
#endif
CUresult dbl_run_kernel(const op *o) {
#ifdef CUDA_SIM
  if (o->f->sim) return run_sim(o); /* always: launches need it */
#endif
  const dbl_kimpl *k = o->f->impl;
  if (!k->body[0]) return CUDA_SUCCESS;
  dbl_kctx c = {o->args, o->f->off, {0}, {0}, {0}, {0}, shared_mem,
                o->shared, CUDA_SUCCESS};
  memcpy(c.grid, o->grid, sizeof c.grid);
  memcpy(c.block, o->block, sizeof c.block);
  unsigned *b = c.bid, *t = c.tid;
  dbl_work *w = dbl_work_now();
  CUresult r;
  for (b[2] = 0; b[2] < c.grid[2]; b[2]++)
    for (b[1] = 0; b[1] < c.grid[1]; b[1]++)
      for (b[0] = 0; b[0] < c.grid[0]; b[0]++) {
        if ((r = dbl_work_check(w))) return r;
        memset(shared_mem, 0xCD, o->shared); /* shared memory is not zeroed */
        for (int phase = 0; phase < 2 && k->body[phase]; phase++)
          for (t[2] = 0; t[2] < c.block[2]; t[2]++)
            for (t[1] = 0; t[1] < c.block[1]; t[1]++)
              for (t[0] = 0; t[0] < c.block[0]; t[0]++) {
                k->body[phase](&c);
                if (c.fault) {
                  dbl_sticky = c.fault;
                  return CUDA_SUCCESS;
                }
              }
      }
  return CUDA_SUCCESS;
}

/* -- the simulator --------------------------------------------------------- */

#ifdef CUDA_SIM
static int sim_cond(void *ud, uint64_t h, unsigned v) {
  return dbl_set_handle(h, v);
}

/* CUDA_SIM_STATS=1: thread-instructions run and the seconds kernels took,
   on stderr at exit. */
static uint64_t sim_executed;
static double sim_seconds;

uint64_t dbl_sim_executed(void) { return sim_executed; }

static void sim_stats(void) {
  fprintf(stderr, "cuda sim: %llu thread-instructions in %.6f s of kernel "
          "time: %.1f M/s (interpreter: %s)\n", (unsigned long long)sim_executed,
          sim_seconds, sim_seconds > 0 ? (double)sim_executed / sim_seconds / 1e6
                                       : 0.0, sim_isa());
}

static int sim_stop(void *w) { return dbl_work_check(w) != 0; }

/* What kernels' printf and assert wrote since the last flush, in order:
   chunks of text for stdout or stderr. */
typedef struct chunk { int err; size_t off, len; } chunk;
static char *out;
static size_t nout, cout;
static chunk *chunks;
static size_t nchunks, cchunks;

static void sim_print(void *ud, const char *text, size_t n, int err) {
  if (nout + n > cout) {
    size_t c = cout ? cout : 4096;
    while (c < nout + n) c *= 2;
    char *v = realloc(out, c);
    if (!v) return;
    out = v;
    cout = c;
  }
  if (nchunks && chunks[nchunks - 1].err == err &&
      chunks[nchunks - 1].off + chunks[nchunks - 1].len == nout) {
    chunks[nchunks - 1].len += n;
  } else {
    if (nchunks == cchunks) {
      size_t c = cchunks ? 2 * cchunks : 16;
      chunk *v = realloc(chunks, c * sizeof *v);
      if (!v) return;
      chunks = v;
      cchunks = c;
    }
    chunks[nchunks++] = (chunk){err, nout, n};
  }
  memcpy(out + nout, text, n);
  nout += n;
}

void dbl_flush_output(void) {
  if (!nchunks) return;
  for (size_t i = 0; i < nchunks; i++)
    fwrite(out + chunks[i].off, 1, chunks[i].len,
           chunks[i].err ? stderr : stdout);
  fflush(stdout);
  fflush(stderr);
  free(out);
  free(chunks);
  out = NULL;
  chunks = NULL;
  nout = cout = nchunks = cchunks = 0;
}

/* Runs a kernel from its PTX; a fault makes the context sticky and is
   told on stderr, as a memory checker would, with the Lua lines of its
   launch (or its node's capture and its graph's launch), and to the
   thread whose call sees it first (cuSimTakeReport). A stop is returned.
   Its accesses are followed in strict mode (races, queue.c). */
static CUresult run_sim(const op *o) {
  static int stats = -1;
  if (stats < 0) {
    const char *e = getenv("CUDA_SIM_STATS");
    if ((stats = e && *e && strcmp(e, "0"))) atexit(sim_stats);
  }
  dbl_runner runner;
  int track = dbl_runner_now(&runner, o);
  dbl_pctx *pdl = track ? runner.pdl : NULL;
  sim_launch l = {.grid = {o->grid[0], o->grid[1], o->grid[2]},
                  .block = {o->block[0], o->block[1], o->block[2]},
                  .dynamic_shared = o->shared, .params = o->args,
                  .nparams = o->f->argbytes, .live = dbl_sim_live,
                  .cond = sim_cond, .ud = &runner, .tex = dbl_tex_fetch,
                  .surf = dbl_surf_access, .stop = sim_stop,
                  .stop_arg = dbl_work_now(), .print = sim_print,
                  .touch = track ? dbl_track_kernel : NULL,
                  .early = pdl && pdl->before.n ? dbl_pdl_early : NULL};
  char diag[600], full[1000];
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int code = sim_run(o->f->sim, &l, diag, sizeof diag);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  sim_executed += l.executed;
  sim_seconds += (double)(t1.tv_sec - t0.tv_sec)
                 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  if (pdl) { /* a programmatic launch's pre-wait race, what it waited */
    pdl->waited = l.waited;
    pdl->wait_first = l.wait_first;
    if (l.early_hit)
      dbl_pdl_report_early(pdl, l.early_hit, l.early_p, l.early_n,
                           l.early_write, l.early_at);
  }
  if (code == SIM_STOPPED) return CUDA_ERROR_TIMEOUT;
  if (code) {
    const char *graph = dbl_running_where();
    if (graph)
      snprintf(full, sizeof full, "%s; its node captured at %s, the graph "
               "launched at %s", diag, o->where ? o->where : "(no Lua line)",
               graph);
    else if (o->where)
      snprintf(full, sizeof full, "%s; launched at %s", diag, o->where);
    else
      snprintf(full, sizeof full, "%s", diag);
    if (code != SIM_ASSERT) { /* an assertion printed its own message */
      dbl_flush_output();
      fprintf(stderr, "cuda sim: %s\n", full);
    }
    dbl_tell(full);
    dbl_sticky = (CUresult)code;
  }
  return CUDA_SUCCESS;
}
#else
void dbl_flush_output(void) {}
#endif

/* -- occupancy ------------------------------------------------------------- */

int dbl_occupancy(CUfunction f, unsigned threads, size_t shared) {
  size_t stat = 0;
#ifdef CUDA_SIM
  if (f->sim) stat = sim_static_shared(f->sim);
#endif
  unsigned warps = (threads + 31) / 32, n = threads ? 64 / warps : 0;
  if (n > 32) n = 32;
  size_t need = shared + stat;
  if (need) {
    size_t fit = (228u << 10) / (need + 1024); /* 1 KiB reserved a block */
    if (fit < n) n = (unsigned)fit;
  }
  return (int)n;
}

CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(
    int *numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize) {
  ENTRY(cuOccupancyMaxActiveBlocksPerMultiprocessor);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!numBlocks || blockSize <= 0 || blockSize > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  if (!func) return CUDA_ERROR_INVALID_HANDLE;
  *numBlocks = dbl_occupancy(func, (unsigned)blockSize, dynamicSMemSize);
  return CUDA_SUCCESS;
}

/* The largest block of the highest occupancy (resident threads). */
CUresult CUDAAPI cuOccupancyMaxPotentialBlockSize(
    int *minGridSize, int *blockSize, CUfunction func,
    CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize,
    int blockSizeLimit) {
  ENTRY(cuOccupancyMaxPotentialBlockSize);
  CUresult r = dbl_enter();
  if (r) return r;
  if (!minGridSize || !blockSize || blockSizeLimit < 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (!func) return CUDA_ERROR_INVALID_HANDLE;
  int limit = blockSizeLimit && blockSizeLimit < 1024 ? blockSizeLimit : 1024;
  int best = 0, best_blocks = 0, best_threads = 0;
  for (int b = limit / 32 * 32; b >= 32; b -= 32) {
    size_t shared = blockSizeToDynamicSMemSize ? blockSizeToDynamicSMemSize(b)
                                               : dynamicSMemSize;
    int n = dbl_occupancy(func, (unsigned)b, shared);
    if (n * b > best_threads) best = b, best_blocks = n, best_threads = n * b;
  }
  *blockSize = best;
  *minGridSize = best_blocks * DBL_SMS;
  return CUDA_SUCCESS;
}
