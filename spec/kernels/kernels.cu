// Kernels the specs launch. Compiled to PTX by nvcc at build time; the test
// double (sim/driver) has a host version of each (spec/support/twins.c),
// found by entry name, so the same specs run with and without a GPU.

#include <cuda_device_runtime_api.h> // cudaGraphSetConditional, for NVRTC

extern "C" {

// y[i] = a * x[i] + y[i]
__global__ void saxpy(float a, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// out[i] = base + i
__global__ void iota_u32(unsigned *out, unsigned base, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = base + (unsigned)i;
}

// y[i] += *s: the scalar is read through its device pointer at run time
__global__ void add_scalar_f32(float *y, const float *s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += *s;
}

// out[*pos] = *pos + 1 (one thread): a replay leaves its mark in slot *pos
__global__ void mark_u32(unsigned *out, const unsigned *pos, int n) {
  if (blockIdx.x == 0 && threadIdx.x == 0 && *pos < (unsigned)n)
    out[*pos] = *pos + 1u;
}

// x[i] += 1
__global__ void inc_i32(int *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1;
}

// dst[i] = src[i] * k (f64)
__global__ void scale_f64(double *dst, const double *src, double k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i] * k;
}

// One Jacobi sweep of the 1D Laplace equation: the ends stay, each inner
// point becomes the mean of its neighbours (f64)
__global__ void jacobi_f64(double *out, const double *in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i == 0 || i == n - 1 ? in[i] : 0.5 * (in[i - 1] + in[i + 1]);
}

// dst[i] = src[i] + v (64-bit integers, by value)
__global__ void add_i64(long long *dst, const long long *src, long long v,
                        int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i] + v;
}

// out[i] = number of threads in the launch, i = flat thread index (3D)
__global__ void dims_u32(unsigned *out, int n) {
  unsigned bx = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  unsigned tx = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  unsigned nt = blockDim.x * blockDim.y * blockDim.z;
  unsigned i = bx * nt + tx;
  if (i < (unsigned)n) out[i] = nt * gridDim.x * gridDim.y * gridDim.z;
}

// out[i] = shared-memory round trip of i (uses dynamic shared memory)
__global__ void shared_u32(unsigned *out, int n) {
  extern __shared__ unsigned tile[];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = (unsigned)i * 2u;
  __syncthreads();
  if (i < n) out[i] = tile[threadIdx.x];
}

// writes far outside any allocation: CUDA_ERROR_ILLEGAL_ADDRESS
__global__ void oob_write(float *x) {
  x[(size_t)1 << 40] = 1.0f;
}

// out[0] = p.a + p.b: a struct passed by value (a .b8[16] parameter)
struct pair { double a, b; };
__global__ void pair_sum(double *out, struct pair p) {
  if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = p.a + p.b;
}

// does nothing: launch overhead
__global__ void noop(void) {}

// x[0] += 1, then the condition says whether x[0] < limit (one thread): a
// while loop's body that counts to limit
__global__ void count_to(unsigned *x, cudaGraphConditionalHandle h,
                         unsigned limit) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    unsigned v = ++x[0];
    cudaGraphSetConditional(h, v < limit);
  }
}

// the condition becomes *v (one thread): picks a branch or a case
__global__ void set_cond(cudaGraphConditionalHandle h, const unsigned *v) {
  if (blockIdx.x == 0 && threadIdx.x == 0) cudaGraphSetConditional(h, *v);
}

} // extern "C"

// A C++ kernel: its PTX entry is the mangled name _Z4axpyfPKfPfi, which
// spells the parameter types float, const float*, float*, int.
__global__ void axpy(float a, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
