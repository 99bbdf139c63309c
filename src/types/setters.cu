// The built-in condition setters of cugraph.Condition (src/types/condition.c): one
// thread each. `make setters` compiles this file to the PTX text in
// src/types/setters.h (PTX ISA 8.3, for drivers from CUDA 12.3 on), so the build
// itself needs no nvcc. The driver's JIT links cudaGraphSetConditional.
#include <cuda_device_runtime_api.h>

extern "C" {

// cond = v
__global__ void cg_cond_set(cudaGraphConditionalHandle h, unsigned v) {
  cudaGraphSetConditional(h, v);
}

// cond = (*p op value): type is the element type in cugraph's order (f32
// f64 i8 u8 i16 u16 i32 u32 i64 u64); bits holds value as a double for the
// float types, as a 64-bit integer for the others; op is one of < <= > >=
// == ~= (0..5). A NaN compares unequal to everything.
__global__ void cg_cond_when(cudaGraphConditionalHandle h, const void *p,
                             unsigned type, unsigned op,
                             unsigned long long bits) {
  int lt, eq, gt;
  if (type <= 1) {
    double a = type == 0 ? (double)*(const float *)p : *(const double *)p;
    double b = __longlong_as_double((long long)bits);
    lt = a < b; eq = a == b; gt = a > b;
  } else if (type % 2 == 0) {
    long long a = type == 2 ? *(const signed char *)p
                : type == 4 ? *(const short *)p
                : type == 6 ? *(const int *)p : *(const long long *)p;
    long long b = (long long)bits;
    lt = a < b; eq = a == b; gt = a > b;
  } else {
    unsigned long long a = type == 3 ? *(const unsigned char *)p
                         : type == 5 ? *(const unsigned short *)p
                         : type == 7 ? *(const unsigned *)p
                         : *(const unsigned long long *)p;
    lt = a < bits; eq = a == bits; gt = a > bits;
  }
  unsigned r = op == 0 ? lt : op == 1 ? lt | eq : op == 2 ? gt
             : op == 3 ? gt | eq : op == 4 ? eq : !eq;
  cudaGraphSetConditional(h, r);
}

// cond = (--count != 0), where count starts at n: the n-th run clears the
// condition and leaves *cell at 0, ready for the next launch.
__global__ void cg_cond_countdown(cudaGraphConditionalHandle h,
                                  unsigned *cell, unsigned n) {
  unsigned v = *cell;
  if (v == 0) v = n;
  v -= 1;
  *cell = v;
  cudaGraphSetConditional(h, v != 0);
}

// A profiling stamp (g:profile's stamps, src/graph/profile_stamps.c): reads
// the global timer. rec >= 0: a run of record rec ended now; its time from
// clocks[from] (when it could start: the stamp before it on its stream)
// adds to sums[rec], counts in runs[rec], and the run's start and end stay
// in last[2 rec] and last[2 rec + 1]. rec == -2 also sets clocks[0], the
// replay's start. Then clocks[to] = now.
__global__ void cg_stamp(unsigned long long *clocks, unsigned long long *sums,
                         unsigned *runs, unsigned long long *last, int to,
                         int from, int rec) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  if (rec >= 0) {
    unsigned long long t0 = clocks[from];
    sums[rec] += t > t0 ? t - t0 : 0; /* a shared clock may have moved on */
    runs[rec] += 1;
    last[2 * rec] = t0;
    last[2 * rec + 1] = t;
  } else if (rec == -2) {
    clocks[0] = t;
  }
  clocks[to] = t;
}

} // extern "C"
