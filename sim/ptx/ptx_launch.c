/* Launches: blocks handed to host threads, each running its warps in turn
   up to a barrier; the launch's first fault and its diagnostic. */
#define _GNU_SOURCE
#include "ptx_exec.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* -- faults --------------------------------------------------------------- */

void exec_thread_of(const worker *w, int warp_index, int lane, unsigned t[3]) {
  const unsigned *b = w->rc->l->block;
  unsigned i = (unsigned)warp_index * 32 + (unsigned)lane;
  t[0] = i % b[0];
  t[1] = i / b[0] % b[1];
  t[2] = i / (b[0] * b[1]);
}

/* "file:line, " of in's source line, where the PTX has one (.loc): the
   file named as NVRTC wrote it (a script's own name, from the #line that
   cuda.compile puts before its source), relative to the working folder
   when under it; else "". */
static void source_of(const sim_module *m, const ins *in, char *buf,
                      size_t n) {
  buf[0] = '\0';
  const loc *at = m->locs ? &m->locs[in - m->code] : NULL;
  if (!at || at->line <= 0) return;
  const char *f = at->file >= 0 && (size_t)at->file < m->nfiles &&
                  m->files[at->file] ? m->files[at->file] : "?";
  char cwd[512];
  size_t k = getcwd(cwd, sizeof cwd) ? strlen(cwd) : 0;
  if (k && !strncmp(f, cwd, k) && f[k] == '/') f += k + 1;
  snprintf(buf, n, "%s:%d, ", f, at->line);
}

/* Records the launch's first fault with its diagnostic. */
void exec_fault(worker *w, const warp *wp, int lane, const ins *in,
                int code, const char *fmt, ...) {
  run_ctx *rc = w->rc;
  w->fault = code;
  pthread_mutex_lock(&rc->mu);
  if (!rc->fault) {
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    unsigned t[3];
    char src[300];
    exec_thread_of(w, wp->index, lane, t);
    source_of(rc->m, in, src, sizeof src);
    snprintf(rc->diag, rc->ndiag, "kernel %s: %s (%sPTX line %d), thread "
             "(%u,%u,%u) of block (%u,%u,%u)", rc->k->name, what, src,
             in->line, t[0], t[1], t[2], w->bid[0], w->bid[1], w->bid[2]);
    __atomic_store_n(&rc->fault, code, __ATOMIC_SEQ_CST);
  }
  pthread_mutex_unlock(&rc->mu);
}

/* -- programmatic launches ------------------------------------------------ */

void exec_griddep(worker *w, warp *wp, const ins *in, uint32_t em) {
  if (in->cmp == GD_LAUNCH) {
    w->triggered = 1;
    return;
  }
  wp->waited |= em;
  w->waited = 1;
  if (!w->triggered) w->wait_first = 1;
}

void exec_early(worker *w, const warp *wp, int lane, const ins *in,
                uint64_t p, unsigned n, int write) {
  run_ctx *rc = w->rc;
  sim_launch *l = rc->l;
  if (w->early_told) return; /* the block's first is recorded */
  unsigned hit = l->early(l->ud, p, n, write);
  if (!hit) return;
  const unsigned *g = l->grid;
  uint64_t b = ((uint64_t)w->bid[2] * g[1] + w->bid[1]) * g[0] + w->bid[0];
  w->early_told = 1;
  pthread_mutex_lock(&rc->mu);
  if (b < rc->early_block) { /* the lowest block's, whichever worker ran it */
    unsigned t[3];
    char src[200];
    exec_thread_of(w, wp->index, lane, t);
    source_of(rc->m, in, src, sizeof src);
    rc->early_block = b;
    l->early_hit = hit;
    l->early_p = p;
    l->early_n = n;
    l->early_write = write;
    snprintf(l->early_at, sizeof l->early_at, "(%u,%u,%u) of block "
             "(%u,%u,%u) (%sPTX line %d)", t[0], t[1], t[2], w->bid[0],
             w->bid[1], w->bid[2], src, in->line);
  }
  pthread_mutex_unlock(&rc->mu);
}

/* -- blocks and launches -------------------------------------------------- */

/* The kernel's user shared memory as %total_smem_size counts it, in
   allocation units. */
static uint64_t total_smem(const run_ctx *rc) {
  size_t n = rc->k->smem + rc->l->dynamic_shared;
  return (n + SMEM_UNIT - 1) / SMEM_UNIT * SMEM_UNIT;
}

/* %globaltimer: nanoseconds of the host's real-time clock. */
static uint64_t global_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* A block runs as a cluster of one (a launch without clusters), on the
   multiprocessor its worker stands for; %clock counts the worker's
   thread-instructions. */
uint64_t exec_sreg(const worker *w, int s, uint64_t clock) {
  const unsigned *grid = w->rc->l->grid;
  switch (s) {
  case S_CLOCK: return (uint32_t)clock;
  case S_CLOCK_HI: return clock >> 32;
  case S_CLOCK64: return clock;
  case S_GLOBALTIMER: return global_ns();
  case S_GLOBALTIMER_LO: return (uint32_t)global_ns();
  case S_GLOBALTIMER_HI: return global_ns() >> 32;
  case S_TOTAL_SMEM: return total_smem(w->rc);
  case S_AGGR_SMEM: return total_smem(w->rc) + SMEM_RESERVED;
  case S_RESERVED_END: case S_RESERVED_CAP: return SMEM_RESERVED;
  case S_RESERVED_1: return SMEM_CG_SCRATCH;
  case S_CLUSTERID_X: case S_CLUSTERID_Y: case S_CLUSTERID_Z:
    return w->bid[s - S_CLUSTERID_X];
  case S_NCLUSTERID_X: case S_NCLUSTERID_Y: case S_NCLUSTERID_Z:
    return grid[s - S_NCLUSTERID_X];
  case S_CLUSTER_NCTAID_X: case S_CLUSTER_NCTAID_Y: case S_CLUSTER_NCTAID_Z:
  case S_CLUSTER_NCTARANK:
    return 1;
  default: /* the reserved region's start and first offset, a cluster's
              first CTA */
    return 0;
  }
}

/* The special registers before S_READ of warp index of w's blocks, but
   the block's own (S_CTAID_*), to r; the warp's lanes that run. */
static uint32_t specials(const worker *w, uint64_t *r, unsigned index) {
  const sim_launch *l = w->rc->l;
  unsigned nt = l->block[0] * l->block[1] * l->block[2];
  uint32_t live = 0;
  for (int j = 0; j < 32; j++) {
    unsigned t = index * 32 + (unsigned)j;
    if (t < nt) live |= 1u << j;
    r[S_TID_X * 32 + j] = t % l->block[0];
    r[S_TID_Y * 32 + j] = t / l->block[0] % l->block[1];
    r[S_TID_Z * 32 + j] = t / (l->block[0] * l->block[1]);
    r[S_NTID_X * 32 + j] = l->block[0];
    r[S_NTID_Y * 32 + j] = l->block[1];
    r[S_NTID_Z * 32 + j] = l->block[2];
    r[S_NCTAID_X * 32 + j] = l->grid[0];
    r[S_NCTAID_Y * 32 + j] = l->grid[1];
    r[S_NCTAID_Z * 32 + j] = l->grid[2];
    r[S_LANEID * 32 + j] = (unsigned)j;
    r[S_WARPID * 32 + j] = index;
    r[S_NWARPID * 32 + j] = SIM_WARPS;
    r[S_SMID * 32 + j] = w->id % SIM_SMS;
    r[S_NSMID * 32 + j] = SIM_SMS;
    r[S_GRIDID * 32 + j] = 1;
    r[S_LANEMASK_EQ * 32 + j] = 1u << j;
    r[S_LANEMASK_LE * 32 + j] = (uint32_t)((2ull << j) - 1);
    r[S_LANEMASK_LT * 32 + j] = (1u << j) - 1;
    r[S_LANEMASK_GE * 32 + j] = ~((1u << j) - 1);
    r[S_LANEMASK_GT * 32 + j] = (uint32_t)~((2ull << j) - 1);
    r[S_DYN_SMEM * 32 + j] = l->dynamic_shared;
    r[S_ZERO * 32 + j] = 0;
  }
  return live;
}

/* A warp's registers start as the worker's copy of what every block's
   warp index holds (init_worker), its block's ids written in (the
   program may have written any register: all are set again). */
static void start_warp(worker *w, warp *wp, unsigned index) {
  const sim_module *m = w->rc->m;
  size_t n = (size_t)S_READ * 32;
  memcpy(wp->r, w->first + index * n, n * sizeof *wp->r);
  memcpy(wp->r + (size_t)m->const_base * 32, w->consts,
         (size_t)m->nconst * 32 * sizeof *wp->r);
  for (int k = 0; k < 3; k++) {
    uint64_t *s = wp->r + (size_t)(S_CTAID_X + k) * 32, v = w->bid[k];
    for (int j = 0; j < 32; j++) s[j] = v;
  }
  uint32_t live = w->live[index];
  wp->index = (int)index;
  wp->wait = 0;
  wp->carry = 0;
  memset(wp->km, 0, sizeof wp->km); /* the masks of no lane */
  wp->kmask[0] = 0;
  for (int i = 0; i < SIM_SPANS; i++) wp->spans[i].slot = -1;
  wp->waited = 0;
  wp->exited = ~live;
  wp->done = !live;
  wp->top.pc = w->rc->k->start;
  wp->top.other = INT_MAX;
  wp->top.live = wp->top.mask = live;
  wp->top.park = 0;
  wp->top.release = 0;
}

/* No bar.red has arrived at the barrier. */
static void no_red(worker *w) {
  w->red = 0;
  w->red_count = 0;
  w->red_none = w->red_all = 1;
}

/* The barrier opens: lanes that waited at a bar.red get its result. */
static void open_barrier(worker *w) {
  const ins *code = w->rc->m->code;
  for (unsigned i = 0; i < w->nwarps; i++) {
    warp *wp = &w->warps[i];
    /* a warp whose lanes all came as one group goes on as that group */
    int held = (wp->top.mask & wp->wait) != 0;
    for (uint32_t q = w->red ? wp->wait : 0; q; q &= q - 1) {
      int l = __builtin_ctz(q);
      const ins *in = &code[(held ? wp->top.pc : wp->top.pcs[l]) - 1];
      if (in->op != OP_BAR || in->cmp != BAR_RED) continue;
      if (in->bop == BR_POPC) {
        wp->r[(size_t)in->d[0] * 32 + l] = w->red_count;
      } else {
        int v = in->bop == BR_AND ? w->red_all : !w->red_none;
        wp->p[in->d[0]] = (wp->p[in->d[0]] & ~(1u << l)) | (uint32_t)v << l;
      }
    }
    wp->wait = 0;
    if (!held) wp->top.mask = 0;
  }
  no_red(w);
}

static int run_block(worker *w) {
  for (unsigned i = 0; i < w->nwarps; i++) start_warp(w, &w->warps[i], i);
  no_red(w);
  for (;;) {
    int waiting = 0, yielded = 0;
    for (unsigned i = 0; i < w->nwarps; i++) {
      warp *wp = &w->warps[i];
      if (wp->done) continue;
      int r = w->rc->run(w, wp, &wp->top, 0);
      if (r == RUN_FAULT) return 1;
      if (r == RUN_DONE) wp->done = 1;
      else if (r == RUN_YIELD) yielded = 1;
      else waiting = 1;
      if (__atomic_load_n(&w->rc->fault, __ATOMIC_RELAXED)) return 1;
    }
    if (yielded) continue; /* a barrier opens once no warp is running */
    if (!waiting) return 0;
    open_barrier(w); /* every lane left waits */
  }
}

static void *work(void *arg) {
  worker *w = arg;
  run_ctx *rc = w->rc;
  const unsigned *g = rc->l->grid;
  for (;;) {
    if (__atomic_load_n(&rc->fault, __ATOMIC_RELAXED)) break;
    uint64_t b = __atomic_fetch_add(&rc->next, 1, __ATOMIC_RELAXED);
    if (b >= rc->nblocks || exec_stopped(rc)) break;
    w->bid[0] = (unsigned)(b % g[0]);
    w->bid[1] = (unsigned)(b / g[0] % g[1]);
    w->bid[2] = (unsigned)(b / ((uint64_t)g[0] * g[1]));
    /* the reserved region too where a kernel reads where it is (no other
       can reach it) */
    size_t from = rc->m->reserved_smem ? 0 : SMEM_RESERVED;
    memset(w->shared + from, 0, rc->nshared - from);
    w->triggered = w->early_told = 0;
    if (run_block(w)) break;
  }
  return NULL;
}

void exec_touch_flush(worker *w, unsigned i) {
  const sim_launch *l = w->rc->l;
  for (int k = 0; k < 2; k++) {
    if (w->touch && w->tlo[k][i] < w->thi[k][i]) {
      pthread_mutex_lock(&w->rc->mu);
      l->touch(l->ud, w->lo[i], w->tlo[k][i], w->thi[k][i], k);
      pthread_mutex_unlock(&w->rc->mu);
    }
    w->tlo[k][i] = UINT64_MAX;
    w->thi[k][i] = 0;
  }
}

static void free_worker(worker *w) {
  for (unsigned i = 0; i < SIM_RANGES; i++) exec_touch_flush(w, i);
  free(w->out);
  free(w->recs);
  free(w->warps);
  free(w->regs_mem);
  free(w->preds);
  free(w->shared);
  free(w->local);
  free(w->pf);
  free(w->first);
  free(w->consts);
  free(w->live);
}

static int init_worker(worker *w, run_ctx *rc, unsigned id) {
  memset(w, 0, sizeof *w);
  w->rc = rc;
  w->id = id;
  w->touch = rc->l->touch != NULL;
  w->early = rc->l->early != NULL;
  for (unsigned i = 0; i < SIM_RANGES; i++) /* nothing touched */
    for (int k = 0; k < 2; k++) w->tlo[k][i] = UINT64_MAX;
  const sim_module *m = rc->m;
  unsigned nt = rc->l->block[0] * rc->l->block[1] * rc->l->block[2];
  w->nwarps = (nt + 31) / 32;
  size_t slots = (size_t)m->nslots * 32;
  w->warps = calloc(w->nwarps, sizeof *w->warps);
  /* a slot's 32 lanes on whole cache lines (256 bytes a slot) */
  w->regs_mem = calloc(slots * w->nwarps + 8, sizeof *w->regs);
  w->regs = (uint64_t *)(((uintptr_t)w->regs_mem + 63) & ~(uintptr_t)63);
  w->preds = calloc((size_t)(m->npreds + 1) * w->nwarps, sizeof *w->preds);
  w->shared = malloc(rc->nshared ? rc->nshared : 1);
  w->local = calloc((size_t)w->nwarps * 32, m->local_size);
  w->pf = calloc((size_t)w->nwarps * 32, m->pframe);
  w->first = malloc((size_t)w->nwarps * S_READ * 32 * sizeof *w->first);
  w->consts = malloc(((size_t)m->nconst + 1) * 32 * sizeof *w->consts);
  w->live = malloc(w->nwarps * sizeof *w->live);
  if (!w->warps || !w->regs_mem || !w->preds || !w->shared || !w->local ||
      !w->pf || !w->first || !w->consts || !w->live) {
    free_worker(w);
    return 0;
  }
  for (unsigned i = 0; i < w->nwarps; i++)
    w->live[i] = specials(w, w->first + (size_t)i * S_READ * 32, i);
  for (int i = 0; i < m->nconst; i++)
    for (int j = 0; j < 32; j++) w->consts[(size_t)i * 32 + j] = m->consts[i];
  for (unsigned i = 0; i < w->nwarps; i++) {
    warp *wp = &w->warps[i];
    wp->r = w->regs + slots * i;
    wp->p = w->preds + (size_t)(m->npreds + 1) * i;
    wp->local = w->local + (size_t)i * 32 * m->local_size;
    wp->pf = w->pf + (size_t)i * 32 * m->pframe;
  }
  return 1;
}

static unsigned host_threads(const sim_launch *l, uint64_t nblocks) {
  unsigned n = l->threads;
  const char *e = getenv("CUDA_SIM_THREADS");
  if (!n && e && *e) n = (unsigned)strtoul(e, NULL, 10);
  if (!n) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    n = c > 0 ? (unsigned)c : 1;
  }
  if (n > 256) n = 256;
  if (n > nblocks) n = (unsigned)nblocks;
  return n ? n : 1;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int exec_late(const run_ctx *rc) {
  return rc->timeout > 0 && now() > rc->deadline;
}

int exec_stopped(run_ctx *rc) {
  const sim_launch *l = rc->l;
  if (!l->stop || !l->stop(l->stop_arg)) return 0;
  pthread_mutex_lock(&rc->mu);
  if (!rc->fault) /* a fault before it stands */
    __atomic_store_n(&rc->fault, SIM_STOPPED, __ATOMIC_SEQ_CST);
  pthread_mutex_unlock(&rc->mu);
  return 1;
}

/* CUDA_SIM_TIMEOUT: seconds a launch may run (default 600; 0: for ever). */
static double launch_timeout(void) {
  const char *e = getenv("CUDA_SIM_TIMEOUT");
  char *end;
  double v = e && *e ? strtod(e, &end) : 600;
  return e && *e && (*end || !(v >= 0)) ? 600 : v;
}

/* The interpreter's variant for the host: the widest vectors it has, or
   fewer where CUDA_SIM_ISA says (generic, avx2, avx512: for tests and
   measurements); *fma: the host has FMA and AVX2. */
static exec_fn *pick_run(int *fma) {
  *fma = 0;
#ifdef SIM_X86_FMA
  const char *e = getenv("CUDA_SIM_ISA");
  int cap = !e || !*e ? 2 : !strcmp(e, "avx512") ? 2 : !strcmp(e, "avx2") ? 1
          : 0;
  __builtin_cpu_init();
  *fma = __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
  int avx2 = *fma && __builtin_cpu_supports("bmi") &&
             __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt");
  int avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512cd");
  if (avx512 && cap >= 2) return exec_run_avx512;
  if (avx2 && cap >= 1) return exec_run_avx2;
#endif
  return exec_run;
}

const char *sim_isa(void) {
  int fma;
  exec_fn *run = pick_run(&fma);
#ifdef SIM_X86_FMA
  if (run == exec_run_avx512) return "avx512";
  if (run == exec_run_avx2) return "avx2";
#endif
  return run == exec_run ? "generic" : "?";
}

int sim_run(const sim_kernel *k, sim_launch *l, char *diag, size_t ndiag) {
  run_ctx rc;
  memset(&rc, 0, sizeof rc);
  rc.run = pick_run(&rc.fma);
  rc.timeout = launch_timeout();
  rc.deadline = now() + rc.timeout;
  rc.k = k;
  rc.m = k->m;
  rc.l = l;
  rc.nshared = SMEM_RESERVED + k->m->shared_static + l->dynamic_shared;
  rc.nblocks = (uint64_t)l->grid[0] * l->grid[1] * l->grid[2];
  rc.diag = diag;
  rc.ndiag = ndiag;
  if (ndiag) diag[0] = '\0';
  rc.early_block = UINT64_MAX;
  l->executed = 0;
  l->early_hit = 0;
  l->early_at[0] = '\0';
  l->waited = l->wait_first = 0;
  pthread_mutex_init(&rc.mu, NULL);
  unsigned n = host_threads(l, rc.nblocks);
  worker *ws = calloc(n, sizeof *ws);
  pthread_t *th = calloc(n, sizeof *th);
  unsigned made = 0;
  int code = SIM_OK;
  if (!ws || !th) code = SIM_OUT_OF_MEMORY;
  for (unsigned i = 0; !code && i < n; i++) {
    if (!init_worker(&ws[i], &rc, made)) code = SIM_OUT_OF_MEMORY;
    else made++;
  }
  unsigned char *joined = calloc(n, 1);
  if (!code && !joined) code = SIM_OUT_OF_MEMORY;
  if (!code) { /* this thread is worker 0; a thread not made leaves its
                  blocks to the others */
    for (unsigned i = 1; i < made; i++)
      joined[i] = !pthread_create(&th[i], NULL, work, &ws[i]);
    work(&ws[0]);
    for (unsigned i = 1; i < made; i++)
      if (joined[i]) pthread_join(th[i], NULL);
  }
  free(joined);
  exec_print_all(ws, made, l);
  for (unsigned i = 0; i < made; i++) {
    l->executed += ws[i].executed;
    l->waited |= ws[i].waited;
    l->wait_first |= ws[i].wait_first;
    free_worker(&ws[i]);
  }
  free(ws);
  free(th);
  if (!code) code = rc.fault;
  pthread_mutex_destroy(&rc.mu);
  return code;
}
