/* Bounds on simulated work. Work runs inside the call that sends it (a
   kernel's launch, a graph's), in the calling thread and the simulator's
   workers, so a caller that waits for work with a bound, or is told to
   stop (^C), could not do so with the device's work still in that call.
   The software driver's own entry points give it the means:

     cuSimSetWorkLimit(seconds)  work this thread sends from now on stops
                                 after that long (0: no bound);
     cuSimInterrupt()            work running now, in any thread, stops;
                                 async-signal-safe, for a SIGINT handler;
     cuSimStopReason(&why)       why this thread's last stopped work was:
                                 CU_SIM_STOP_LIMIT or CU_SIM_STOP_INTERRUPT.

   Stopped work ends its call with CUDA_ERROR_TIMEOUT and leaves memory as
   far as it got; the device is not broken (nothing sticky), as a GPU's
   work seen by a wait that timed out is not. Work polls at every turn of
   a while loop, every node and block, and a simulated warp every 4096
   backward branches (dbl_work_check).

   Work that waits for memory the host or another stream writes (a wait
   on an external semaphore, a stream memory operation's wait) polls it
   with the driver's lock given back (dbl_poll): bounded the same, and by
   CUDA_DOUBLE_WAIT_LIMIT seconds (30) past which the device stops as the
   watchdog stops an endless loop (CUDA_ERROR_LAUNCH_TIMEOUT, sticky). */
#include "double.h"

#include <stdlib.h>
#include <time.h>

static _Thread_local double limit;  /* seconds; 0: none */
static unsigned interrupts;         /* cuSimInterrupt's calls (atomic) */

/* The work this thread sends now: its deadline, the interrupts before it
   and why it stopped (written by the simulator's workers too). */
static _Thread_local dbl_work current;

static double mono(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

CUresult CUDAAPI cuSimSetWorkLimit(double seconds) {
  if (!(seconds >= 0)) return CUDA_ERROR_INVALID_VALUE; /* NaN too */
  limit = seconds;
  return CUDA_SUCCESS;
}

void CUDAAPI cuSimInterrupt(void) {
  __atomic_add_fetch(&interrupts, 1, __ATOMIC_RELAXED);
}

CUresult CUDAAPI cuSimStopReason(int *why) {
  if (!why) return CUDA_ERROR_INVALID_VALUE;
  *why = __atomic_load_n(&current.why, __ATOMIC_RELAXED);
  return CUDA_SUCCESS;
}

dbl_work *dbl_work_begin(void) {
  current.deadline = limit > 0 ? mono() + limit : 0;
  current.seen = __atomic_load_n(&interrupts, __ATOMIC_RELAXED);
  current.why = 0;
  return &current;
}

dbl_work *dbl_work_now(void) { return &current; }

CUresult dbl_work_check(dbl_work *w) {
  int why = __atomic_load_n(&interrupts, __ATOMIC_RELAXED) != w->seen
            ? CU_SIM_STOP_INTERRUPT
            : w->deadline > 0 && mono() > w->deadline ? CU_SIM_STOP_LIMIT : 0;
  if (!why) return CUDA_SUCCESS;
  __atomic_store_n(&w->why, why, __ATOMIC_RELAXED);
  return CUDA_ERROR_TIMEOUT;
}

/* CUDA_DOUBLE_WAIT_LIMIT, seconds (30 unless a number >= 0). */
static double wait_limit(void) {
  const char *e = getenv("CUDA_DOUBLE_WAIT_LIMIT");
  char *end = NULL;
  double v = e && *e ? strtod(e, &end) : -1;
  return end && !*end && v >= 0 ? v : 30;
}

CUresult dbl_poll(CUresult (*ready)(void *arg), void *arg) {
  double end = mono() + wait_limit();
  dbl_work *w = dbl_work_now();
  for (;;) {
    CUresult r = dbl_enter(); /* a device broken, a context gone */
    if (r || (r = dbl_work_check(w))) return r;
    if ((r = ready(arg)) != CUDA_ERROR_NOT_READY) return r;
    if (mono() >= end) { /* the watchdog's */
      if (!dbl_sticky) dbl_sticky = CUDA_ERROR_LAUNCH_TIMEOUT;
      return dbl_sticky;
    }
    dbl_nap(50);
  }
}
