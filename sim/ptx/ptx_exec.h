/* The simulator's interpreter: warps of 32 lanes in lock step. A warp runs
   one group of lanes at a time, those at the lowest PC among its runnable
   lanes; a divergent branch splits the group and the lanes meet again where
   their PCs do (NVRTC lays out a branch's both sides before the join). Each
   instruction loops over the group's lanes, guarded ones masked off. The
   warps of a block run in turn up to a bar.sync, which releases when every
   lane of the block that has not exited waits there; blocks run in
   parallel on host threads. Global accesses are checked against the live
   allocations; the first fault stops the launch.

   The loop and what it calls for each lane are one translation unit, so
   that those calls stay local and cheap: ptx_exec.c runs a warp's group of
   lanes instruction by instruction, with the memory accesses and
   instructions of ptx_mem.h, the comparisons and conversions of
   ptx_convert.h, the half precision instructions of ptx_half.h, the
   arithmetic of ptx_arith.h and the warp-level instructions of
   ptx_warp.h; the commonest instructions run first in their fast forms
   (ins.x). ptx_fma.c, built apart, has the vector f32 fma. ptx_launch.c
   runs blocks on host threads, fills special registers and records a
   launch's first fault. */
#ifndef PTX_EXEC_H
#define PTX_EXEC_H

#include "ptx_int.h"

#include <fenv.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

/* The interpreter's shared functions stay inside the library. */
#pragma GCC visibility push(hidden)

#define ALL 0xffffffffu

/* A warp's lanes in one function: the group running, and the others at
   their PCs. A lane parked at a .sync warp instruction waits there for the
   lanes of its member mask; the scheduler runs others first, and when
   nothing else can run it releases the lowest parked group (PTX leaves a
   mask naming lanes that never come undefined; the simulator goes on). */
typedef struct frame {
  int pc, other;        /* the group's PC; the lowest PC of other lanes
                           that are not parked */
  uint32_t live, mask;  /* lanes in this frame; lanes of the group */
  uint32_t park;        /* lanes parked at a .sync warp instruction */
  int release;          /* the group was released: it goes on without
                           waiting at its .sync instruction */
  int pcs[32];          /* PCs of lanes outside the group */
} frame;

/* What a fast load or store found of the addresses in a register (slot;
   -1: none): over the lanes of mask, Bs[l] + from lies in [mn, mx] above
   lo (the allocation's start, 0 for shared memory), bits any ORed. Kept
   until an instruction writes the register (ins.inval). */
typedef struct span {
  int32_t slot;
  uint32_t mask;
  uint64_t lo, from, any;
  int64_t mn, mx;
} span;
enum { SIM_SPANS = 4 }; /* a register's span is spans[slot % SIM_SPANS] */

typedef struct warp {
  uint64_t *r;          /* slot s of lane l: r[s * 32 + l] */
  uint32_t *p;          /* predicate masks */
  unsigned char *local, *pf; /* per lane: local memory, parameter frames */
  frame top;
  uint32_t wait, exited;
  uint32_t waited;      /* lanes that ran griddepcontrol.wait */
  uint32_t carry;       /* each lane's carry flag (add.cc, addc, ...) */
  span spans[SIM_SPANS];
  /* lane masks expanded, one word a lane (all ones where the bit is set):
     of the group running (ptx_exec.c's lane_masks) */
  uint64_t km[1][32];
  uint32_t kmask[1];

  int done, index;
} warp;

typedef struct run_ctx run_ctx;
typedef struct worker worker;
/* Runs the group of frame f of warp wp of w's block (ptx_exec.c). */
typedef int exec_fn(worker *w, warp *wp, frame *f, int depth);

/* Allocations a worker keeps as found live (a kernel reads and writes
   several in turn). */
enum { SIM_RANGES = 4 };

/* A record of printf's or assert's text: the lane's block and thread
   (key), its order among the worker's records, stderr or stdout, where
   in the worker's text. */
typedef struct sim_rec {
  uint64_t key;
  uint32_t seq, err;
  size_t off, len;
} sim_rec;

struct worker {
  run_ctx *rc;
  warp *warps;
  uint64_t *regs, *regs_mem; /* regs: regs_mem rounded up to 64 bytes */
  uint32_t *preds;
  unsigned char *shared, *local, *pf;
  uint64_t *first;      /* each warp index's special registers but the
                           block's ids (S_READ slots), as a warp starts */
  uint64_t *consts;     /* the immediates' slots, as a warp starts */
  uint32_t *live;       /* each warp index's lanes that run */
  unsigned nwarps;
  unsigned id;          /* the worker's index: the block's %smid */
  unsigned bid[3];
  uint64_t lo[SIM_RANGES], hi[SIM_RANGES]; /* the allocations last found
                           live, the next replaced at lo[nextr] */
  unsigned nextr;
  /* where the launch read ([0]) and wrote ([1]) in each of them, while
     the caller follows accesses (touch): [lo, hi), empty when lo >= hi */
  uint64_t tlo[2][SIM_RANGES], thi[2][SIM_RANGES];
  int touch;
  /* programmatic launches: whether accesses before griddepcontrol.wait
     are checked (sim_launch.early); whether the block has run
     griddepcontrol.launch_dependents, and had an early access reported;
     whether a thread of the worker's blocks waited, and one did before
     its block triggered */
  int early, triggered, early_told, waited, wait_first;
  /* printf's and assert's text (ptx_print.c) */
  char *out;
  size_t nout, cout, out_total;
  sim_rec *recs;
  size_t nrecs, crecs;
  uint32_t seq;
  uint64_t executed;
  unsigned backs;       /* backward branches taken */
  int red;              /* a bar.red at the barrier: the threads whose */
  unsigned red_count;   /* predicate holds, and whether none or all */
  int red_none, red_all;
  int fault;
};

struct run_ctx {
  const func *k;
  const sim_module *m;
  sim_launch *l;
  size_t nshared;
  unsigned nthreads;
  uint64_t nblocks, next;
  int fault;            /* set once, by the first fault */
  int fma;              /* the host has FMA and AVX2 (x86-64) */
  exec_fn *run;         /* exec_run, or the variant the host runs */
  double timeout;       /* CUDA_SIM_TIMEOUT, seconds; 0: none */
  double deadline;      /* CLOCK_MONOTONIC seconds when it times out */
  pthread_mutex_t mu;
  uint64_t early_block; /* the block of the early access recorded */
  char *diag;
  size_t ndiag;
};

/* -- values --------------------------------------------------------------- */

static inline float f32(uint64_t v) {
  uint32_t u = (uint32_t)v;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint64_t bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline double f64(uint64_t v) {
  double f;
  memcpy(&f, &v, 8);
  return f;
}
static inline uint64_t bd(double f) {
  uint64_t u;
  memcpy(&u, &f, 8);
  return u;
}
static inline int64_t sx(uint64_t v, int bits) {
  return bits >= 64 ? (int64_t)v : (int64_t)(v << (64 - bits)) >> (64 - bits);
}
static inline uint64_t zx(uint64_t v, int bits) {
  return bits >= 64 ? v : v & ((1ull << bits) - 1);
}
static inline float ftz(float x) {
  return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x;
}
static inline double ftz64(double x) {
  return fabs(x) < DBL_MIN ? copysign(0.0, x) : x;
}

static inline int fe_mode(int rnd) {
  switch (rnd) {
  case R_Z: return FE_TOWARDZERO;
  case R_M: return FE_DOWNWARD;
  case R_P: return FE_UPWARD;
  default: return FE_TONEAREST;
  }
}

/* The registers of slot s of the warp wp, one a lane. */
#define R(s) (wp->r + (size_t)(s) * 32)

/* Runs the statement for each lane l of the mask em. */
#define LOOP(...)                                                           \
  do {                                                                      \
    if (em == ALL) {                                                        \
      for (int l = 0; l < 32; l++) { __VA_ARGS__; }                              \
    } else {                                                                \
      for (uint32_t m_ = em; m_; m_ &= m_ - 1) {                            \
        int l = __builtin_ctz(m_);                                          \
        __VA_ARGS__;                                                        \
      }                                                                     \
    }                                                                       \
  } while (0)

/* Not every x86-64 CPU has FMA instructions and AVX2: the simulator
   looks at run time (sim_run), where GCC or clang give it the means. */
#if defined(__x86_64__) && defined(__GNUC__)
#define SIM_X86_FMA 1
#endif

/* Instructions written apart from the loop of exec_run, and inlined there
   whatever the loop's size. */
#define ALWAYS_INLINE inline __attribute__((always_inline))

/* RUN_YIELD: a warp that has taken many backward branches gives the
   others of its block a turn (one may be waiting on what another writes). */
enum { RUN_DONE, RUN_BLOCKED, RUN_FAULT, RUN_YIELD };
/* Backward branches of a worker between a yield and a look at the clock. */
enum { SIM_BACKS = 4096 };

/* ptx_exec.c, and its variants for wider vectors (the Makefile builds
   them on x86-64) */
exec_fn exec_run;
#ifdef SIM_X86_FMA
exec_fn exec_run_avx2, exec_run_avx512;
#endif
/* Whether the launch has run past its deadline. */
int exec_late(const run_ctx *rc);
/* Whether the caller wants the launch stopped (sim_launch.stop); then it
   is marked stopped, which ends every worker as a fault does. */
int exec_stopped(run_ctx *rc);

#ifdef SIM_X86_FMA
/* ptx_fma.c: fma.rn.f32 of a whole group (D = A * B + C), where
   run_ctx.fma; 0 (nothing done) when an operand is a NaN. */
int exec_fma_f32_x86(uint64_t *D, const uint64_t *A, const uint64_t *B,
                     const uint64_t *C);
#endif

/* ptx_print.c: vprintf and __assertfail for the lanes of em (1: the
   launch stops: a fault, or the assertion); the records handed over once
   the launch is over. */
int exec_printf(worker *w, warp *wp, const ins *in, uint32_t em);
int exec_assert(worker *w, warp *wp, const ins *in, uint32_t em);
void exec_print_all(worker *ws, unsigned n, sim_launch *l);

/* ptx_exec.c: reads n bytes at generic address p for a lane (0 after a
   fault). */
int exec_read(worker *w, warp *wp, int lane, const ins *in, uint64_t p,
              void *v, size_t n);

/* ptx_launch.c */
/* The thread index of a lane of warp warp_index of w's block. */
void exec_thread_of(const worker *w, int warp_index, int lane, unsigned t[3]);
/* Gives the caller (touch) where w's launch read and wrote allocation i,
   and forgets it. */
void exec_touch_flush(worker *w, unsigned i);
/* griddepcontrol for the lanes of em (none: nothing): the grid before
   this one has completed before it started (the simulator runs grids one
   after another), so the wait returns at once; both are recorded for the
   programmatic check. */
void exec_griddep(worker *w, warp *wp, const ins *in, uint32_t em);
/* An n-byte global access at p by a lane that has not run
   griddepcontrol.wait, in a launch that checks them (w->early): given to
   sim_launch.early, and the launch's first race described. */
void exec_early(worker *w, const warp *wp, int lane, const ins *in,
                uint64_t p, unsigned n, int write);
/* The value of special register s (S_READ and after) for the block w
   runs, clock the worker's count of thread-instructions so far. */
uint64_t exec_sreg(const worker *w, int s, uint64_t clock);
void exec_fault(worker *w, const warp *wp, int lane, const ins *in, int code,
                const char *fmt, ...) __attribute__((format(printf, 6, 7)));

#pragma GCC visibility pop

#endif
