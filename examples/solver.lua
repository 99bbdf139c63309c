-- Conjugate gradient on the 2-D Poisson problem (the 5-point Laplacian on
-- an n x n grid, zero on the boundary), run to convergence on the device in
-- one g:launch(): the iteration is the body of a while node, and a kernel
-- of the body clears the condition once the residual is small enough. The
-- same kernels then run host-driven (one graph launch per iteration, the
-- residual downloaded each time), for comparison.
--
--   cugraph-lua examples/solver.lua [n [tolerance]]     (default 256, 1e-10)
--
-- The right-hand side is A u* for a known u*, so the answer is checked
-- exactly: max |u - u*| / max |u*| must be below 1e-5. Exits 1 otherwise.
local cuda = require "cugraph"

local n = math.tointeger(tonumber(arg[1] or "256"))
local tol = tonumber(arg[2] or "1e-10")
assert(n and n >= 8, "n: an integer of at least 8")
local N = n * n
local MAXIT = 20 * n + 1000

local m = cuda.compile([[
#include <cuda_device_runtime_api.h> // cudaGraphSetConditional
#define BLOCK 256
// the sum of v over the block, added to *out
__device__ void block_add(double v, double *out) {
  __shared__ double part[BLOCK];
  part[threadIdx.x] = v;
  __syncthreads();
  for (int w = BLOCK / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, part[0]);
}

// q = A p; d[0] += p.q
extern "C" __global__ void spmv(const double *p, double *q, double *d, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  double v = 0;
  if (i < n * n) {
    int r = i / n, c = i % n;
    double s = 4.0 * p[i];
    if (c > 0) s -= p[i - 1];
    if (c < n - 1) s -= p[i + 1];
    if (r > 0) s -= p[i - n];
    if (r < n - 1) s -= p[i + n];
    q[i] = s;
    v = p[i] * s;
  }
  block_add(v, &d[0]);
}

// alpha = rr / pq; x += alpha p; r -= alpha q; d[1] += r.r
extern "C" __global__ void update(double *x, double *r, const double *p,
                                  const double *q, double *d, int N) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  double v = 0;
  if (i < N) {
    double a = d[2] / d[0];
    x[i] += a * p[i];
    double ri = r[i] - a * q[i];
    r[i] = ri;
    v = ri * ri;
  }
  block_add(v, &d[1]);
}

// p = r + (rr_new / rr) p
extern "C" __global__ void direction(double *p, const double *r,
                                     const double *d, int N) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < N) p[i] = r[i] + d[1] / d[2] * p[i];
}

// d[k] += a.b
extern "C" __global__ void dot(const double *a, const double *b, double *d,
                               int k, int N) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  block_add(i < N ? a[i] * b[i] : 0.0, &d[k]);
}

// one thread, after direction: rr = rr_new; the accumulators cleared; d[3]
// the relative residual, d[5] 1 while the iteration goes on
__device__ void finish_(double *d, unsigned *it, double tol, unsigned maxit) {
  d[2] = d[1];
  d[0] = d[1] = 0;
  d[3] = sqrt(d[2] / d[4]);
  unsigned k = ++*it;
  d[5] = d[3] > tol && k < maxit;
}
extern "C" __global__ void finish(double *d, unsigned *it, double tol,
                                  unsigned maxit) {
  finish_(d, it, tol, maxit);
}
// the same, and the loop's condition from it
extern "C" __global__ void finish_loop(double *d, unsigned *it, double tol,
                                       unsigned maxit,
                                       cudaGraphConditionalHandle h) {
  finish_(d, it, tol, maxit);
  cudaGraphSetConditional(h, d[5] != 0);
}

// the start: rr = b.b (in d[4]), the residual 1, no iteration yet
extern "C" __global__ void start(double *d, unsigned *it) {
  d[2] = d[4];
  d[3] = 1;
  d[5] = 1;
  *it = 0;
}
]], { name = "solver.cu" })

-- u*, and b = A u*, on the host
local ustar, b = {}, {}
for r = 0, n - 1 do
  for c = 0, n - 1 do
    local x, y = (c + 1) / (n + 1), (r + 1) / (n + 1)
    ustar[r * n + c + 1] = math.sin(3 * x) * y * (1 - y) + 0.05 * math.cos(17 * x * y)
  end
end
for r = 0, n - 1 do
  for c = 0, n - 1 do
    local i = r * n + c + 1
    local s = 4 * ustar[i]
    if c > 0 then s = s - ustar[i - 1] end
    if c < n - 1 then s = s - ustar[i + 1] end
    if r > 0 then s = s - ustar[i - n] end
    if r < n - 1 then s = s - ustar[i + n] end
    b[i] = s
  end
end

local s = cuda.stream()
local bb = cuda.buffer("f64", b)
local x, r, p, q = cuda.buffer("f64", N), cuda.buffer("f64", N),
  cuda.buffer("f64", N), cuda.buffer("f64", N)
local d = cuda.buffer("f64", 8)
local it = cuda.buffer("u32", 1)
local grid = (N + 255) // 256
local c = cuda.condition(1)

local function init()
  x:fill(0, s)
  r:copy(bb, s)
  p:copy(bb, s)
  d:fill(0, s)
  m.dot:launch(s, grid, 256, bb, bb, d, 4, N)
  m.start:launch(s, 1, 1, d, it)
end

local function iteration(fin, ...)
  m.spmv:launch(s, grid, 256, p, q, d, n)
  m.update:launch(s, grid, 256, x, r, p, q, d, N)
  m.direction:launch(s, grid, 256, p, r, d, N)
  fin:launch(s, 1, 1, d, it, tol, MAXIT, ...)
end

-- the device loop: one launch runs to convergence
local solve = s:capture(function()
  init()
  s:loop_while(c, function() iteration(m.finish_loop, c) end)
end)
-- the host-driven loop: a graph per iteration, the residual read back
local start = s:capture(init)
local step = s:capture(function() iteration(m.finish) end)

local function check(label)
  local u = x:download()
  local err, big = 0, 0
  for i = 1, N do
    err = math.max(err, math.abs(u[i] - ustar[i]))
    big = math.max(big, math.abs(ustar[i]))
  end
  local iters = it:download()[1]
  local res = d:download("table", 3, 1)[1]
  print(("%-12s %6d iterations, relative residual %.2e, max error %.2e"):format(label, iters, res, err / big))
  return iters, err / big
end

local t0, t1 = cuda.event(), cuda.event()
solve:launch() -- warm-up
s:synchronize()
t0:record(s)
solve:launch()
t1:record(s)
local device_ms = t1:elapsed(t0)
local iters, err = check("device loop")

local wall0 = cuda.event()
wall0:record(s)
start:launch()
local host_iters = 0
repeat
  step:launch()
  host_iters = host_iters + 1
  local flag = d:download("table", 5, 1)[1] -- waits for the step
until flag == 0
local wall1 = cuda.event()
wall1:record(s)
local host_ms = wall1:elapsed(wall0)
local hiters, herr = check("host loop")

print(("%dx%d Poisson, CG to %.0e: device loop %.2f ms (%.2f us/iteration), "
       .. "host-driven %.2f ms (%.2f us/iteration): %.1fx"):format(n, n, tol,
  device_ms, device_ms * 1e3 / iters, host_ms, host_ms * 1e3 / host_iters,
  host_ms / device_ms))
local ok = err < 1e-5 and herr < 1e-5 and iters == hiters and iters < MAXIT
if not ok then
  print("FAILED: the answer does not match u*, or the two loops differ")
  os.exit(1)
end
