/* A stand-in for libcufft.so, for the specs on machines without GPUs.
   Built as build/libcufft-double.so and loaded by default with the
   software driver (its cugraph_fft_standin), it exports the cuFFT calls
   the runtime makes and computes the transforms on the host, where the
   software driver's device memory lives: a direct DFT along each
   dimension in double precision (exact twiddles per point, O(n^2) a
   dimension), rounded once to f32 for single precision plans. Packed
   layouts only (what the runtime plans). r2c keeps the first n/2 + 1
   points of the last dimension; c2r reads those and takes the rest from
   Hermitian symmetry.

   The plan asks for a work area of one complex double per point of a
   signal, and computes in it: a plan without its work area fails with
   CUFFT_NO_WORKSPACE, as cuFFT's does when auto-allocation is off. On a
   capturing stream (the software driver's cuStreamIsCapturing) a transform
   becomes a host node that runs it each time the graph runs, its record
   kept by the plan; otherwise it runs at once.

   CUFFT_DOUBLE_FAULT=name:n:result[,...] makes the n-th call of an entry
   point fail with that result before it does anything. */
#define _GNU_SOURCE
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "standin.h"

/* Keeps no device memory of its own: the runtime never closes it. */
const int cugraph_fft_double = 1;

typedef int cufftResult;
enum { OK = 0, INVALID_PLAN = 1, ALLOC_FAILED = 2, INVALID_TYPE = 3,
       INVALID_VALUE = 4, EXEC_FAILED = 6, INVALID_SIZE = 8,
       NO_WORKSPACE = 13, NOT_SUPPORTED = 16 };
enum { R2C = 0x2a, C2R = 0x2c, C2C = 0x29, D2Z = 0x6a, Z2D = 0x6c,
       Z2Z = 0x69 };

typedef struct run {
  struct run *next;
  struct plan *p;
  const void *in;
  void *out;
  int dir;
} run;

typedef struct plan {
  int made, autoalloc, type, rank;
  long long n[3], batch, points;
  void *work;
  CUstream stream;
  run *kept;
} plan;

enum { MAX_PLANS = 4096 };
static plan *plans[MAX_PLANS]; /* handle h is plans[h - 1] */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static standin_calls counts = { PTHREAD_MUTEX_INITIALIZER, {{0, 0}} };

static cufftResult injected(const char *name) {
  const char *spec = getenv("CUFFT_DOUBLE_FAULT");
  if (!spec || !*spec) return OK;
  return standin_fault("CUFFT_DOUBLE_FAULT", name,
                       standin_count(&counts, name));
}

#define ENTRY(name) do { \
    cufftResult r_ = injected(#name); \
    if (r_) return r_; \
  } while (0)

static plan *get(int h) {
  pthread_mutex_lock(&lock);
  plan *p = h >= 1 && h <= MAX_PLANS ? plans[h - 1] : NULL;
  pthread_mutex_unlock(&lock);
  return p;
}

/* -- the transform ---------------------------------------------------------- */

/* A DFT of the n points x[0], x[s], ... in place, sign -1 or +1; t is
   scratch of n points. */
static void dft(double complex *x, long long n, long long s, int sign,
                double complex *t) {
  for (long long k = 0; k < n; k++) {
    double complex acc = 0;
    for (long long j = 0; j < n; j++) {
      double a = sign * 2 * M_PI * (double)((k * j) % n) / (double)n;
      acc += x[j * s] * (cos(a) + I * sin(a));
    }
    t[k] = acc;
  }
  for (long long k = 0; k < n; k++) x[k * s] = t[k];
}

/* Every dimension of the signal x (row-major, the plan's lengths). */
static void dft_all(const plan *p, double complex *x, int sign,
                    double complex *t) {
  long long inner = 1;
  for (int d = p->rank - 1; d >= 0; d--) {
    long long n = p->n[d], outer = p->points / (n * inner);
    for (long long o = 0; o < outer; o++)
      for (long long i = 0; i < inner; i++)
        dft(x + o * n * inner + i, n, inner, sign, t);
    inner *= n;
  }
}

static int f64(int type) { return type == D2Z || type == Z2D || type == Z2Z; }

static double rd(const void *p, int dbl, long long i) {
  return dbl ? ((const double *)p)[i] : ((const float *)p)[i];
}

static void wr(void *p, int dbl, long long i, double v) {
  if (dbl) ((double *)p)[i] = v;
  else ((float *)p)[i] = (float)v;
}

static void execute(const run *r) {
  const plan *p = r->p;
  int dbl = f64(p->type);
  long long last = p->n[p->rank - 1], half = last / 2 + 1;
  long long rows = p->points / last, cpts = rows * half;
  double complex *x = p->work, *t = malloc(sizeof *t * (size_t)p->points);
  if (!t) return;
  for (long long b = 0; b < p->batch; b++) {
    if (p->type == C2C || p->type == Z2Z) {
      const void *in = (const char *)r->in + (size_t)(2 * b * p->points) * (dbl ? 8 : 4);
      void *out = (char *)r->out + (size_t)(2 * b * p->points) * (dbl ? 8 : 4);
      for (long long i = 0; i < p->points; i++)
        x[i] = rd(in, dbl, 2 * i) + I * rd(in, dbl, 2 * i + 1);
      dft_all(p, x, r->dir, t);
      for (long long i = 0; i < p->points; i++) {
        wr(out, dbl, 2 * i, creal(x[i]));
        wr(out, dbl, 2 * i + 1, cimag(x[i]));
      }
    } else if (p->type == R2C || p->type == D2Z) {
      const void *in = (const char *)r->in + (size_t)(b * p->points) * (dbl ? 8 : 4);
      void *out = (char *)r->out + (size_t)(2 * b * cpts) * (dbl ? 8 : 4);
      for (long long i = 0; i < p->points; i++) x[i] = rd(in, dbl, i);
      dft_all(p, x, -1, t);
      for (long long row = 0; row < rows; row++)
        for (long long k = 0; k < half; k++) {
          double complex v = x[row * last + k];
          wr(out, dbl, 2 * (row * half + k), creal(v));
          wr(out, dbl, 2 * (row * half + k) + 1, cimag(v));
        }
    } else { /* C2R, Z2D: the full spectrum from its first half */
      const void *in = (const char *)r->in + (size_t)(2 * b * cpts) * (dbl ? 8 : 4);
      void *out = (char *)r->out + (size_t)(b * p->points) * (dbl ? 8 : 4);
      for (long long row = 0; row < rows; row++)
        for (long long k = 0; k < last; k++) {
          long long src = row, kk = k;
          int conj_ = 0;
          if (k >= half) { /* X[r, k] = conj(X[-r, n - k]) */
            long long rest = row, mirror = 0, scale = 1;
            for (int d = p->rank - 2; d >= 0; d--) {
              long long i = rest % p->n[d];
              rest /= p->n[d];
              mirror += ((p->n[d] - i) % p->n[d]) * scale;
              scale *= p->n[d];
            }
            src = mirror;
            kk = last - k;
            conj_ = 1;
          }
          double complex v = rd(in, dbl, 2 * (src * half + kk)) +
                             I * rd(in, dbl, 2 * (src * half + kk) + 1);
          x[row * last + k] = conj_ ? conj(v) : v;
        }
      dft_all(p, x, 1, t);
      for (long long i = 0; i < p->points; i++) wr(out, dbl, i, creal(x[i]));
    }
  }
  free(t);
}

static void host_node(void *r) { execute(r); }

static standin_capturing_fn is_capturing;
static standin_host_fn launch_host;

static cufftResult issue(plan *p, const void *in, void *out, int dir,
                         int type) {
  if (!p || !p->made) return INVALID_PLAN;
  if (p->type != type) return INVALID_TYPE;
  if (!p->work) return NO_WORKSPACE;
  if (!in || !out || (dir != -1 && dir != 1)) return INVALID_VALUE;
  run r = { NULL, p, in, out, dir };
  if (!launch_host) standin_driver(&is_capturing, &launch_host);
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  if (is_capturing && is_capturing(p->stream, &st) == CUDA_SUCCESS &&
      st != CU_STREAM_CAPTURE_STATUS_NONE) {
    if (!launch_host) return NOT_SUPPORTED;
    run *k = malloc(sizeof *k);
    if (!k) return ALLOC_FAILED;
    *k = r;
    k->next = p->kept;
    p->kept = k;
    return launch_host(p->stream, host_node, k) == CUDA_SUCCESS ? OK
                                                                : EXEC_FAILED;
  }
  standin_settle(p->stream);
  execute(&r);
  return OK;
}

/* -- entry points ------------------------------------------------------------ */

cufftResult cufftCreate(int *handle);
cufftResult cufftDestroy(int handle);
cufftResult cufftGetVersion(int *version);
cufftResult cufftSetAutoAllocation(int handle, int on);
cufftResult cufftMakePlanMany64(int handle, int rank, long long *n,
                                long long *inembed, long long istride,
                                long long idist, long long *onembed,
                                long long ostride, long long odist, int type,
                                long long batch, size_t *work);
cufftResult cufftSetWorkArea(int handle, void *work);
cufftResult cufftSetStream(int handle, CUstream s);
cufftResult cufftExecC2C(int h, void *in, void *out, int dir);
cufftResult cufftExecZ2Z(int h, void *in, void *out, int dir);
cufftResult cufftExecR2C(int h, void *in, void *out);
cufftResult cufftExecD2Z(int h, void *in, void *out);
cufftResult cufftExecC2R(int h, void *in, void *out);
cufftResult cufftExecZ2D(int h, void *in, void *out);

cufftResult cufftCreate(int *handle) {
  ENTRY(cufftCreate);
  if (!handle) return INVALID_VALUE;
  plan *p = calloc(1, sizeof *p);
  if (!p) return ALLOC_FAILED;
  p->autoalloc = 1;
  pthread_mutex_lock(&lock);
  int i = 0;
  while (i < MAX_PLANS && plans[i]) i++;
  if (i < MAX_PLANS) plans[i] = p;
  pthread_mutex_unlock(&lock);
  if (i == MAX_PLANS) {
    free(p);
    return ALLOC_FAILED;
  }
  *handle = i + 1;
  return OK;
}

cufftResult cufftDestroy(int handle) {
  ENTRY(cufftDestroy);
  plan *p = get(handle);
  if (!p) return INVALID_PLAN;
  pthread_mutex_lock(&lock);
  plans[handle - 1] = NULL;
  pthread_mutex_unlock(&lock);
  for (run *r = p->kept, *next; r; r = next) {
    next = r->next;
    free(r);
  }
  if (p->autoalloc) free(p->work);
  free(p);
  return OK;
}

cufftResult cufftGetVersion(int *version) {
  if (!version) return INVALID_VALUE;
  *version = 12000;
  return OK;
}

cufftResult cufftSetAutoAllocation(int handle, int on) {
  ENTRY(cufftSetAutoAllocation);
  plan *p = get(handle);
  if (!p) return INVALID_PLAN;
  if (p->made) return INVALID_VALUE; /* before the plan is made */
  p->autoalloc = on != 0;
  return OK;
}

cufftResult cufftMakePlanMany64(int handle, int rank, long long *n,
                                long long *inembed, long long istride,
                                long long idist, long long *onembed,
                                long long ostride, long long odist, int type,
                                long long batch, size_t *work) {
  ENTRY(cufftMakePlanMany64);
  (void)istride; (void)idist; (void)ostride; (void)odist;
  plan *p = get(handle);
  if (!p) return INVALID_PLAN;
  if (p->made) return INVALID_PLAN;
  if (inembed || onembed) return NOT_SUPPORTED; /* packed layouts only */
  if (type != R2C && type != C2R && type != C2C && type != D2Z &&
      type != Z2D && type != Z2Z)
    return INVALID_TYPE;
  if (rank < 1 || rank > 3 || !n || batch < 1) return INVALID_SIZE;
  p->points = 1;
  for (int i = 0; i < rank; i++) {
    if (n[i] < 1) return INVALID_SIZE;
    p->n[i] = n[i];
    p->points *= n[i];
  }
  p->rank = rank;
  p->type = type;
  p->batch = batch;
  size_t bytes = (size_t)p->points * sizeof(double complex);
  if (p->autoalloc && !(p->work = malloc(bytes))) return ALLOC_FAILED;
  if (work) *work = bytes;
  p->made = 1;
  return OK;
}

cufftResult cufftSetWorkArea(int handle, void *work) {
  ENTRY(cufftSetWorkArea);
  plan *p = get(handle);
  if (!p || !p->made) return INVALID_PLAN;
  if (p->autoalloc) free(p->work);
  p->autoalloc = 0;
  p->work = work;
  return OK;
}

cufftResult cufftSetStream(int handle, CUstream s) {
  ENTRY(cufftSetStream);
  plan *p = get(handle);
  if (!p) return INVALID_PLAN;
  p->stream = s;
  return OK;
}

#define EXEC_DIR(name, type) \
  cufftResult name(int h, void *in, void *out, int dir) { \
    ENTRY(name); \
    return issue(get(h), in, out, dir, type); \
  }
#define EXEC(name, type, dir) \
  cufftResult name(int h, void *in, void *out) { \
    ENTRY(name); \
    return issue(get(h), in, out, dir, type); \
  }
EXEC_DIR(cufftExecC2C, C2C)
EXEC_DIR(cufftExecZ2Z, Z2Z)
EXEC(cufftExecR2C, R2C, -1)
EXEC(cufftExecD2Z, D2Z, -1)
EXEC(cufftExecC2R, C2R, 1)
EXEC(cufftExecZ2D, Z2D, 1)
