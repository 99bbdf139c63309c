// Kernels of the benchmark's argument rows: argsN takes the buffer x and
// N - 1 i32 values (0 in the benchmark) and adds 1 + their sum to x[t], one
// thread t per element, so x[0] counts the launches. Launched as inc_i32 is
// (grid 1, block 256); nvcc builds build/bench/kernels.ptx from this file.
// turn is the one-kernel body of the device while loop's row.
#include <cuda_device_runtime_api.h> // cudaGraphSetConditional

extern "C" {

// nop touches no memory: the launch and replay rows that compare the
// binding with C, CuPy, PyTorch and the device's floor use it, so that no
// figure depends on where a buffer lies. Its arguments are inc_i32's.
__global__ void nop(int *, int) {}

__global__ void args1(int *x) { x[threadIdx.x] += 1; }

__global__ void args2(int *x, int a) { x[threadIdx.x] += 1 + a; }

__global__ void args4(int *x, int a, int b, int c) {
  x[threadIdx.x] += 1 + a + b + c;
}

__global__ void args8(int *x, int a, int b, int c, int d, int e, int f,
                      int g) {
  x[threadIdx.x] += 1 + a + b + c + d + e + f + g;
}

__global__ void args16(int *x, int a, int b, int c, int d, int e, int f,
                       int g, int h, int i, int j, int k, int l, int m, int n,
                       int o) {
  x[threadIdx.x] += 1 + a + b + c + d + e + f + g + h + i + j + k + l + m +
                    n + o;
}

// One turn of a while loop of n turns a launch: x[t] += 1 as inc_i32 does;
// thread 0 counts the turn in *turns (0 again after the n-th) and keeps
// the loop going until then.
__global__ void turn(int *x, unsigned *turns, unsigned n,
                     cudaGraphConditionalHandle cond) {
  x[threadIdx.x] += 1;
  if (threadIdx.x == 0) {
    unsigned k = (*turns + 1) % n;
    *turns = k;
    cudaGraphSetConditional(cond, k != 0);
  }
}

}
