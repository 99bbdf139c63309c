-- cg.lua: conjugate gradient on the 2-D Poisson problem (the 5-point
-- Laplacian A on an n x n grid, zero on the boundary), one kernel an
-- iteration; required by examples/solver.lua and bench/bench.lua.
--
-- An iteration needs its two dot products before the next can start, and
-- each of those is a reduction over the grid. Here both come from one
-- reduction (the variant of Chronopoulos and Gear: r.r and r.Ar, with
-- p.Ap from the recurrence eta = r.Ar - beta^2 eta), and the block of the
-- kernel that finishes last turns the sums into the next alpha and beta,
-- so an iteration is one kernel. It updates p, A p (s, from w = A r), x and r,
-- and computes the next w = A r in the same pass: each thread recomputes
-- the new r of its four neighbours from their old r, w and s, which the
-- iteration only reads (r, w and s have two halves, read one, write the
-- other, picked by the iteration count's parity).
--
--   local cg = require "cg"       (with examples/ on package.path)
--   local ustar, b = cg.problem(n)
--   local solver = cg.new(n, b, tol, maxit)   -- compiles, allocates, captures
--   solver.solve:launch()         -- the device loop, to convergence
--   solver.drive()                -- the host-driven loop
--   cg.host(n, b, tol, maxit)     -- the same iterations in Lua
local M = {}

M.source = [[
#include <cuda_device_runtime_api.h> // cudaGraphSetConditional
#define BLOCK 256
// d: 0 alpha, 1 beta, 2 gamma = r.r, 3 eta = p.Ap, 4 b.b, 5 and 6 the sums
// of r.r and r.Ar being made; sync: 0 iterations done, 1 blocks done

// the 5-point Laplacian of v (0 outside the grid) at i
template <class V> __device__ double laplace(V v, int i, int n) {
  int row = i / n, col = i % n;
  double q = 4 * v(i);
  if (col > 0) q -= v(i - 1);
  if (col < n - 1) q -= v(i + 1);
  if (row > 0) q -= v(i - n);
  if (row < n - 1) q -= v(i + n);
  return q;
}

__device__ double take(double *p) { // *p, and 0 left there
  return __longlong_as_double(atomicExch((unsigned long long *)p, 0ull));
}

// Adds the block's sums of g and h to d[5] and d[6]. True in one thread of
// the block that finishes last, once every block's sums are in: *G and *H
// are the totals, and d[5], d[6] and sync[1] are 0 again.
__device__ bool sums(double g, double h, double *d, unsigned *sync,
                     double *G, double *H) {
  __shared__ double pg[BLOCK], ph[BLOCK];
  int t = threadIdx.x;
  pg[t] = g;
  ph[t] = h;
  __syncthreads();
  for (int k = BLOCK / 2; k > 0; k /= 2) {
    if (t < k) {
      pg[t] += pg[t + k];
      ph[t] += ph[t + k];
    }
    __syncthreads();
  }
  if (t != 0) return false;
  atomicAdd(&d[5], pg[0]);
  atomicAdd(&d[6], ph[0]);
  __threadfence(); // the sums land before the count
  if (atomicAdd(&sync[1], 1u) != gridDim.x - 1) return false;
  __threadfence();
  *G = take(&d[5]);
  *H = take(&d[6]);
  sync[1] = 0;
  return true;
}

// x = p = s = 0, r = b, w = A b; the first alpha (beta 0), no iteration yet
extern "C" __global__ void start(const double *b, double *x, double *p,
                                 double *r, double *w, double *s, double *d,
                                 unsigned *sync, double *res, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  double g = 0, h = 0, G, H;
  if (i < n * n) {
    double q = laplace([=](int j) { return b[j]; }, i, n);
    x[i] = p[i] = s[i] = 0;
    r[i] = b[i];
    w[i] = q;
    g = b[i] * b[i];
    h = q * b[i];
  }
  if (sums(g, h, d, sync, &G, &H)) {
    d[0] = G / H;
    d[1] = 0;
    d[2] = d[4] = G;
    d[3] = H;
    *res = 1;
    sync[0] = 0;
  }
}

// One iteration, from the halves of r, w and s the count's parity picks to
// the others: p = r + beta p, s = w + beta s (= A p), x += alpha p,
// r -= alpha s, w = A r; then the sums r.r and r.w give the next alpha and
// beta, and *res the relative residual; LOOP: the loop's condition too, 0
// once converged or at maxit.
template <bool LOOP>
__device__ void step_(double *x, double *p, double *r, double *w, double *s,
                      double *d, unsigned *sync, double *res, int n,
                      double tol, unsigned maxit,
                      cudaGraphConditionalHandle cond) {
  int N = n * n, i = blockIdx.x * BLOCK + threadIdx.x;
  unsigned k = sync[0];
  // a loop body runs UNROLL steps: those after convergence do nothing
  if (LOOP && !(*res > tol && k < maxit)) return;
  const double *r0 = r + k % 2 * N, *w0 = w + k % 2 * N, *s0 = s + k % 2 * N;
  int to = (k + 1) % 2 * N;
  double a = d[0], be = d[1], g = 0, h = 0, G, H;
  // r after this iteration at j
  auto next = [=](int j) { return r0[j] - a * (w0[j] + be * s0[j]); };
  if (i < N) {
    double pi = r0[i] + be * p[i], ri = next(i), q = laplace(next, i, n);
    x[i] += a * pi;
    p[i] = pi;
    s[to + i] = w0[i] + be * s0[i];
    r[to + i] = ri;
    w[to + i] = q;
    g = ri * ri;
    h = q * ri;
  }
  if (!sums(g, h, d, sync, &G, &H)) return;
  double beta = G / d[2], eta = H - beta * beta * d[3];
  d[0] = G / eta;
  d[1] = beta;
  d[2] = G;
  d[3] = eta;
  *res = sqrt(G / d[4]);
  sync[0] = ++k;
  if (LOOP) cudaGraphSetConditional(cond, *res > tol && k < maxit);
}

extern "C" __global__ void step(double *x, double *p, double *r, double *w,
                                double *s, double *d, unsigned *sync,
                                double *res, int n) {
  step_<false>(x, p, r, w, s, d, sync, res, n, 0, 0, 0);
}

extern "C" __global__ void step_loop(double *x, double *p, double *r,
                                     double *w, double *s, double *d,
                                     unsigned *sync, double *res, int n,
                                     double tol, unsigned maxit,
                                     cudaGraphConditionalHandle cond) {
  step_<true>(x, p, r, w, s, d, sync, res, n, tol, maxit, cond);
}
]]

-- u*, a smooth function on the grid, and b = A u*: tables of n * n values,
-- row by row.
function M.problem(n)
  local ustar, b = {}, {}
  for r = 0, n - 1 do
    for c = 0, n - 1 do
      local x, y = (c + 1) / (n + 1), (r + 1) / (n + 1)
      ustar[r * n + c + 1] = math.sin(3 * x) * y * (1 - y) + 0.05 * math.cos(17 * x * y)
    end
  end
  for i = 1, n * n do
    b[i] = M.laplace(function(j) return ustar[j] end, i, n)
  end
  return ustar, b
end

-- The 5-point Laplacian of v (a function of the 1-based index, 0 outside
-- the grid) at i, as the kernels compute it.
function M.laplace(v, i, n)
  local c = (i - 1) % n
  local q = 4 * v(i)
  if c > 0 then q = q - v(i - 1) end
  if c < n - 1 then q = q - v(i + 1) end
  if i > n then q = q - v(i - n) end
  if i <= n * n - n then q = q - v(i + n) end
  return q
end

-- The solver on the device for b (a table of n * n values): kernels
-- Steps in the body of the device loop. Each checks convergence, as the
-- host-driven loop does after every step, and those after it do nothing:
-- the count of iterations is the same, and the loop's own cost (a few µs a
-- turn on an H200) is paid once per UNROLL steps.
M.UNROLL = 8

-- compiled, buffers allocated, graphs captured on a stream of its own.
-- Fields: stream; x (the answer, f64); res (a Scalar: the relative
-- residual); solve (a graph: the start, then a while node whose body is
-- UNROLL steps, until res <= tol or maxit iterations); start and step (graphs of
-- the start and of one iteration); iterations() (the count of the last
-- run, from the device); drive() (the host-driven loop: start, then one
-- step launch and a residual read an iteration while res > tol and the
-- count is below maxit; returns the count).
function M.new(n, b, tol, maxit)
  local cuda = require "cugraph"
  local m = cuda.compile(M.source, { name = "cg.cu" })
  local N = n * n
  local s = cuda.stream()
  local bb = cuda.buffer("f64", b)
  local x, p = cuda.buffer("f64", N), cuda.buffer("f64", N)
  local r, w, sv = cuda.buffer("f64", 2 * N), cuda.buffer("f64", 2 * N),
    cuda.buffer("f64", 2 * N)
  local d, sync = cuda.buffer("f64", 7), cuda.buffer("u32", 2)
  local res = cuda.scalar("f64")
  local c = cuda.condition(1)
  local grid = (N + 255) // 256

  local function start()
    d:fill(0, s)
    sync:fill(0, s)
    m.start:launch(s, grid, 256, bb, x, p, r, w, sv, d, sync, res, n)
  end
  local step = s:capture(function()
    m.step:launch(s, grid, 256, x, p, r, w, sv, d, sync, res, n)
  end)
  local o = {
    stream = s, x = x, res = res, step = step,
    start = s:capture(start),
    solve = s:capture(function()
      start()
      s:loop_while(c, function()
        for _ = 1, M.UNROLL do
          m.step_loop:launch(s, grid, 256, x, p, r, w, sv, d, sync, res, n,
                             tol, maxit, c)
        end
      end)
    end),
  }
  function o.iterations() return sync:download("table", 0, 1)[1] end
  function o.drive()
    o.start:launch()
    local k = 0
    repeat
      step:launch()
      k = k + 1
    until not (res:get() > tol and k < maxit)
    return k
  end
  return o
end

-- The same iterations in Lua, in doubles with the kernels' arithmetic (the
-- sums in another order): x (a table), the iteration count and the
-- relative residual.
function M.host(n, b, tol, maxit)
  local N = n * n
  local x, p, r, w, s = {}, {}, {}, {}, {}
  local function bj(j) return b[j] end
  for i = 1, N do
    x[i], p[i], s[i], r[i] = 0, 0, 0, b[i]
    w[i] = M.laplace(bj, i, n)
  end
  local G, H = 0, 0
  for i = 1, N do G, H = G + r[i] * r[i], H + w[i] * r[i] end
  local alpha, beta, gamma, eta, bb = G / H, 0, G, H, G
  local k, res = 0
  repeat
    local a, be = alpha, beta
    local function nxt(j) return r[j] - a * (w[j] + be * s[j]) end
    local r1, w1, s1 = {}, {}, {}
    G, H = 0, 0
    for i = 1, N do
      local pi = r[i] + be * p[i]
      x[i], p[i] = x[i] + a * pi, pi
      s1[i] = w[i] + be * s[i]
      r1[i], w1[i] = nxt(i), M.laplace(nxt, i, n)
      G, H = G + r1[i] * r1[i], H + w1[i] * r1[i]
    end
    r, w, s = r1, w1, s1
    beta = G / gamma
    eta = H - beta * beta * eta
    alpha, gamma = G / eta, G
    res = math.sqrt(G / bb)
    k = k + 1
  until not (res > tol and k < maxit)
  return x, k, res
end

return M
