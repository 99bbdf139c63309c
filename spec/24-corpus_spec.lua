-- A corpus of well-known GPU kernels, written from the public algorithms:
-- reductions, scans, sorts, histograms, transposes, convolution, n-body,
-- stencils, SGEMM, cooperative groups, half precision, warp votes and
-- shuffles, templates, device globals, stream compaction, radix sort,
-- BLAS-1/2 kernels, softmax, layer norm, a graph replayed with a
-- DeviceScalar, and a cooperative launch with grid sync. Each case compiles
-- its own source with cuda.compile, launches it and checks the result
-- against a reference computed here in Lua: integers exactly, floats
-- exactly where every partial result is representable in f32 (the inputs
-- are then small dyadic rationals, so the order of the additions cannot
-- matter), else within the tolerance stated beside the case.
--
-- The kernels run on a GPU (make test-gpu) and on the PTX simulator (make
-- test-sim); the test double, which runs only host twins of the spec
-- kernels, leaves every case pending. A kernel the simulator refuses at
-- load is listed in SIM_REFUSES: there the case checks the refusal, and
-- the kernel runs only on the GPU.
local H = require "support.helper"
local cuda = H.cuda

-- Kernels the simulator refuses when their module loads, with the message
-- it gives (a plain substring) and why.
local SIM_REFUSES = {
  grid_sync = {
    message = "unknown name '%envreg",
    why = "cg::this_grid().sync() reads %envreg1/%envreg2, the grid barrier the simulator does not model",
  },
}

-- Kernels the simulator may refuse at load or may run (its support is
-- changing); either is accepted there, a wrong answer never. Each is a
-- list of accepted refusal messages.
local SIM_MAY_REFUSE = {
  half_dot = { "unsupported instruction '", "unknown name '" },   -- f16 / f16x2 arithmetic
}

-- On the simulator the sources are compiled for its sm_90; on a GPU for
-- the device's own architecture.
local ARCH = H.sim and "sm_90" or nil
local FULL = "0xffffffffu"

--------------------------------------------------------------------------
-- Host helpers: deterministic inputs and comparisons.

-- A 32-bit xorshift generator (Marsaglia), seeded with a non-zero value.
local function xorshift(seed)
  local x = seed
  return function()
    x = (x ~ (x << 13)) & 0xffffffff
    x = x ~ (x >> 17)
    x = (x ~ (x << 5)) & 0xffffffff
    return x
  end
end

-- n integers from lo to hi.
local function ints(n, seed, lo, hi)
  local r, t = xorshift(seed), {}
  for i = 1, n do t[i] = lo + r() % (hi - lo + 1) end
  return t
end

-- A Lua number rounded to the nearest f32.
local function f32(x) return (string.unpack("<f", string.pack("<f", x))) end

-- n f32 values evenly spread over [lo, hi), each exactly an f32.
local function reals(n, seed, lo, hi)
  local r, t = xorshift(seed), {}
  for i = 1, n do t[i] = f32(lo + (hi - lo) * (r() / 4294967296)) end
  return t
end

-- n dyadic values k / den, k from lo to hi: sums of a few thousand of them
-- are exact in f32.
local function dyadic(n, seed, lo, hi, den)
  local t = ints(n, seed, lo, hi)
  for i = 1, n do t[i] = t[i] / den end
  return t
end

-- The same values, element by element (reports the first difference).
local function same(want, got, what)
  assert.equals(#want, #got, (what or "result") .. ": length")
  for i = 1, #want do
    if want[i] ~= got[i] then
      error(("%s: element %d is %s, want %s"):format(what or "result", i, tostring(got[i]),
                                                       tostring(want[i])), 2)
    end
  end
end

-- Element by element within tol(i, want) of the reference.
local function near(want, got, tol, what)
  assert.equals(#want, #got, (what or "result") .. ": length")
  for i = 1, #want do
    local t = tol(i, want[i])
    local err = math.abs(got[i] - want[i])
    if err > t or err ~= err then -- a NaN fails too
      error(("%s: element %d is %.9g, want %.9g (tolerance %.3g)"):format(
        what or "result", i, got[i], want[i], t), 2)
    end
  end
end

local function sum(t, first, last)
  local acc = 0
  for i = first or 1, last or #t do acc = acc + t[i] end
  return acc
end

local function popcount(x)
  local c = 0
  while x ~= 0 do c = c + (x & 1); x = x >> 1 end
  return c
end

-- Per-block sums of v, blocks of size b.
local function block_sums(v, b)
  local out = {}
  for k = 0, (#v + b - 1) // b - 1 do
    out[k + 1] = sum(v, k * b + 1, math.min(#v, (k + 1) * b))
  end
  return out
end

--------------------------------------------------------------------------
-- The cases: name, what it is, CUDA source, optional C++ names, run(m, s).

local cases = {}
local function case(name, what, src, run, names)
  cases[#cases + 1] = { name = name, what = what, src = src, run = run, names = names }
end

-- Reduction 1: interleaved addressing (stride doubles, modulo test).
case("reduce_interleaved", "block reduction, interleaved addressing", [=[
extern "C" __global__ void reduce_interleaved(const int *in, int *out, int n) {
  extern __shared__ int s[];
  unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  s[t] = i < n ? in[i] : 0;
  __syncthreads();
  for (unsigned k = 1; k < blockDim.x; k *= 2) {
    if (t % (2 * k) == 0) s[t] += s[t + k];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}]=], function(m, s)
  local n, b = 4000, 256
  local v = ints(n, 101, -1000, 1000)
  local out = cuda.buffer("i32", (n + b - 1) // b)
  m.reduce_interleaved:shared(b * 4):launch(s, #out, b, cuda.buffer("i32", v), out, n)
  same(block_sums(v, b), out:download())
end)

-- Reduction 2: sequential addressing (halving stride, no divergence in
-- the first warps). Exact: k/8 values, partial sums below 2^20 eighths.
case("reduce_sequential", "block reduction, sequential addressing", [=[
extern "C" __global__ void reduce_sequential(const float *in, float *out, int n) {
  extern __shared__ float s[];
  unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  s[t] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
    if (t < h) s[t] += s[t + h];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}]=], function(m, s)
  local n, b = 4096, 256
  local v = dyadic(n, 102, -255, 255, 8)
  local out = cuda.buffer("f32", n // b)
  m.reduce_sequential:shared(b * 4):launch(s, n // b, b, cuda.buffer("f32", v), out, n)
  same(block_sums(v, b), out:download())
end)

-- Reduction 3: first add during load (two elements a thread), shared
-- memory down to 64, then a warp-shuffle final stage. Exact (dyadic).
case("reduce_warp_shuffle", "block reduction with a __shfl_down_sync final warp", ([=[
extern "C" __global__ void reduce_warp(const float *in, float *out, int n) {
  extern __shared__ float s[];
  unsigned t = threadIdx.x, i = blockIdx.x * (2 * blockDim.x) + t;
  float v = 0.0f;
  if (i < n) v = in[i];
  if (i + blockDim.x < n) v += in[i + blockDim.x];
  s[t] = v;
  __syncthreads();
  for (unsigned h = blockDim.x / 2; h > 32; h >>= 1) {
    if (t < h) s[t] = v = v + s[t + h];
    __syncthreads();
  }
  if (t < 32) {
    v += s[t + 32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(%s, v, o);
  }
  if (t == 0) out[blockIdx.x] = v;
}]=]):format(FULL), function(m, s)
  local n, b = 3000, 128
  local v = dyadic(n, 103, -255, 255, 4)
  local blocks = (n + 2 * b - 1) // (2 * b)
  local out = cuda.buffer("f32", blocks)
  m.reduce_warp:shared(b * 4):launch(s, blocks, b, cuda.buffer("f32", v), out, n)
  same(block_sums(v, 2 * b), out:download())
end)

-- Reduction 4: grid-stride accumulation, a butterfly (__shfl_xor_sync)
-- across the warp, one atomicAdd per warp (i32 and f32; the f32 one is
-- exact since every partial sum is a multiple of 1/8 below 2^21).
case("reduce_atomic", "grid-stride reduction with warp butterflies and atomicAdd", ([=[
extern "C" __global__ void reduce_atomic(const int *in, int *isum, float *fsum, int n) {
  int v = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v += in[i];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(%s, v, o);
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(isum, v);
    atomicAdd(fsum, (float)v * 0.125f);
  }
}]=]):format(FULL), function(m, s)
  local n = 5000
  local v = ints(n, 104, 0, 255)
  local isum, fsum = cuda.buffer("i32", 1):fill(0), cuda.buffer("f32", 1):fill(0)
  m.reduce_atomic:launch(s, 4, 128, cuda.buffer("i32", v), isum, fsum, n)
  assert.equals(sum(v), isum:download()[1])
  assert.equals(sum(v) / 8, fsum:download()[1])
end)

-- Double-precision dot product: warp shuffles of doubles, a shared array
-- of warp sums, one f64 atomicAdd per block. Tolerance: each partial sum
-- rounds once, so the error is below n * 2^-53 times the sum of |a_i b_i|
-- (about 5e-13 of it here); 1e-12 of it allows for the order of the
-- atomics.
case("ddot", "f64 dot product, 64-bit shuffles and f64 atomicAdd", ([=[
extern "C" __global__ void ddot(const double *a, const double *b, double *out, int n) {
  __shared__ double ws[32];
  double acc = 0.0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    acc += a[i] * b[i];
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(%s, acc, o);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) ws[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < (int)(blockDim.x >> 5) ? ws[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(%s, acc, o);
    if (lane == 0) atomicAdd(out, acc);
  }
}]=]):format(FULL, FULL), function(m, s)
  local n = 4000
  local r, a, b = xorshift(105), {}, {}
  for i = 1, n do a[i] = r() / 2147483648 - 1; b[i] = r() / 2147483648 - 1 end
  local out = cuda.buffer("f64", 1):fill(0)
  m.ddot:launch(s, 4, 256, cuda.buffer("f64", a), cuda.buffer("f64", b), out, n)
  local want, mag = 0, 0
  for i = 1, n do want = want + a[i] * b[i]; mag = mag + math.abs(a[i] * b[i]) end
  near({ want }, out:download(), function() return 1e-12 * mag end, "ddot")
end)

-- Inclusive scan, Hillis-Steele: log2(n) steps, double-buffered shared
-- memory; each block scans its own segment.
case("scan_hillis_steele", "inclusive scan, Hillis-Steele, double-buffered shared memory", [=[
extern "C" __global__ void scan_hillis_steele(const int *in, int *out, int n) {
  extern __shared__ int buf[];   // 2 * blockDim.x
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t, nb = blockDim.x;
  int pout = 0, pin;
  buf[t] = i < n ? in[i] : 0;
  __syncthreads();
  for (int off = 1; off < nb; off <<= 1) {
    pout = 1 - pout;
    pin = 1 - pout;
    int v = buf[pin * nb + t];
    if (t >= off) v += buf[pin * nb + t - off];
    buf[pout * nb + t] = v;
    __syncthreads();
  }
  if (i < n) out[i] = buf[pout * nb + t];
}]=], function(m, s)
  local n, b = 1000, 256
  local v = ints(n, 106, -50, 50)
  local out = cuda.buffer("i32", n)
  m.scan_hillis_steele:shared(2 * b * 4):launch(s, (n + b - 1) // b, b, cuda.buffer("i32", v), out, n)
  local want, run = {}, 0
  for i = 1, n do
    if (i - 1) % b == 0 then run = 0 end
    run = run + v[i]
    want[i] = run
  end
  same(want, out:download())
end)

-- Exclusive scan, Blelloch (work-efficient up-sweep and down-sweep),
-- 2 elements a thread; the block totals are scanned by the same kernel
-- and added back, which gives one scan of the whole array.
case("scan_blelloch", "exclusive scan, Blelloch up-sweep/down-sweep, multi-block", [=[
extern "C" __global__ void scan_blelloch(const int *in, int *out, int *sums, int n) {
  extern __shared__ int s[];     // 2 * blockDim.x
  int t = threadIdx.x, m = 2 * blockDim.x, base = blockIdx.x * m;
  s[2 * t] = base + 2 * t < n ? in[base + 2 * t] : 0;
  s[2 * t + 1] = base + 2 * t + 1 < n ? in[base + 2 * t + 1] : 0;
  int off = 1;
  for (int d = m >> 1; d > 0; d >>= 1) {
    __syncthreads();
    if (t < d) s[off * (2 * t + 2) - 1] += s[off * (2 * t + 1) - 1];
    off <<= 1;
  }
  if (t == 0) { sums[blockIdx.x] = s[m - 1]; s[m - 1] = 0; }
  for (int d = 1; d < m; d <<= 1) {
    off >>= 1;
    __syncthreads();
    if (t < d) {
      int a = off * (2 * t + 1) - 1, b = off * (2 * t + 2) - 1;
      int x = s[a];
      s[a] = s[b];
      s[b] += x;
    }
  }
  __syncthreads();
  if (base + 2 * t < n) out[base + 2 * t] = s[2 * t];
  if (base + 2 * t + 1 < n) out[base + 2 * t + 1] = s[2 * t + 1];
}

extern "C" __global__ void add_block_offsets(int *out, const int *offsets, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] += offsets[i / blockDim.x];
}]=], function(m, s)
  local n, b = 3000, 128
  local per = 2 * b
  local blocks = (n + per - 1) // per
  local v = ints(n, 107, -100, 100)
  local out, sums = cuda.buffer("i32", n), cuda.buffer("i32", blocks)
  local offs, total = cuda.buffer("i32", blocks), cuda.buffer("i32", 1)
  local scan = m.scan_blelloch:shared(per * 4)
  scan:launch(s, blocks, b, cuda.buffer("i32", v), out, sums, n)
  scan:launch(s, 1, b, sums, offs, total, blocks)
  m.add_block_offsets:launch(s, blocks, per, out, offs, n)
  local want, run = {}, 0
  for i = 1, n do want[i] = run; run = run + v[i] end
  same(want, out:download(), "scan")
  assert.equals(sum(v), total:download()[1])
end)

-- Bitonic sort of 1024 keys per block in shared memory, one thread a key.
case("bitonic_shared", "bitonic sort in shared memory, one block per 1024 keys", [=[
extern "C" __global__ void bitonic_shared(unsigned *keys) {
  __shared__ unsigned s[1024];
  unsigned t = threadIdx.x;
  s[t] = keys[blockIdx.x * 1024 + t];
  __syncthreads();
  for (unsigned k = 2; k <= 1024; k <<= 1) {
    for (unsigned j = k >> 1; j > 0; j >>= 1) {
      unsigned p = t ^ j;
      if (p > t) {
        unsigned a = s[t], b = s[p];
        bool up = (t & k) == 0;
        if ((a > b) == up) { s[t] = b; s[p] = a; }
      }
      __syncthreads();
    }
  }
  keys[blockIdx.x * 1024 + t] = s[t];
}]=], function(m, s)
  local v = ints(2048, 108, 0, 0xffffffff)
  local keys = cuda.buffer("u32", v)
  m.bitonic_shared:launch(s, 2, 1024, keys)
  local want = {}
  for seg = 0, 1 do
    local part = { table.unpack(v, seg * 1024 + 1, seg * 1024 + 1024) }
    table.sort(part)
    table.move(part, 1, 1024, seg * 1024 + 1, want)
  end
  same(want, keys:download())
end)

-- Bitonic sort in global memory: one launch per (k, j) step of the
-- network, 78 launches for 4096 signed keys.
case("bitonic_global", "bitonic sort network, one launch per step", [=[
extern "C" __global__ void bitonic_step(int *keys, unsigned j, unsigned k) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x, p = i ^ j;
  if (p > i) {
    int a = keys[i], b = keys[p];
    bool up = (i & k) == 0;
    if ((a > b) == up) { keys[i] = b; keys[p] = a; }
  }
}]=], function(m, s)
  local n = 4096
  local v = ints(n, 109, -100000, 100000)
  local keys = cuda.buffer("i32", v)
  local k, steps = 2, 0
  while k <= n do
    local j = k // 2
    while j > 0 do
      m.bitonic_step:launch(s, n // 256, 256, keys, j, k)
      steps = steps + 1
      j = j // 2
    end
    k = k * 2
  end
  assert.equals(78, steps)
  table.sort(v)
  same(v, keys:download())
end)

-- Histogram of bytes: per-block bins in shared memory with shared-memory
-- atomics, merged into the global bins with one atomicAdd per bin.
case("histogram", "256-bin histogram, shared-memory atomics", [=[
extern "C" __global__ void histogram256(const unsigned char *data, unsigned *bins, int n) {
  __shared__ unsigned h[256];
  for (int b = threadIdx.x; b < 256; b += blockDim.x) h[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    atomicAdd(&h[data[i]], 1u);
  __syncthreads();
  for (int b = threadIdx.x; b < 256; b += blockDim.x)
    if (h[b]) atomicAdd(&bins[b], h[b]);
}]=], function(m, s)
  local n = 10000
  local v = ints(n, 110, 0, 255)
  for i = 1, n, 2 do v[i] = 7 end -- half the bytes in one bin: contention
  local bins = cuda.buffer("u32", 256):fill(0)
  m.histogram256:launch(s, 8, 128, cuda.buffer("u8", v), bins, n)
  local want = {}
  for b = 1, 256 do want[b] = 0 end
  for i = 1, n do want[v[i] + 1] = want[v[i] + 1] + 1 end
  same(want, bins:download())
end)

-- Matrix transpose, naive (coalesced reads, strided writes) and through a
-- 32x33 shared-memory tile (the padding column avoids bank conflicts),
-- on a 100 x 70 matrix, not a multiple of the tile.
case("transpose", "matrix transpose, naive and shared-memory tiled with padding", [=[
#define TILE 32
#define ROWS 8
extern "C" __global__ void transpose_naive(const float *in, float *out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) out[x * h + y] = in[y * w + x];
}

extern "C" __global__ void transpose_tiled(const float *in, float *out, int w, int h) {
  __shared__ float tile[TILE][TILE + 1];
  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  for (int r = 0; r < TILE; r += ROWS)
    if (x < w && y + r < h) tile[threadIdx.y + r][threadIdx.x] = in[(y + r) * w + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
  for (int r = 0; r < TILE; r += ROWS)
    if (x < h && y + r < w) out[(y + r) * h + x] = tile[threadIdx.x][threadIdx.y + r];
}]=], function(m, s)
  local w, h = 100, 70
  local v = reals(w * h, 111, -1, 1)
  local a = cuda.buffer("f32", v)
  local naive, tiled = cuda.buffer("f32", w * h):fill(0), cuda.buffer("f32", w * h):fill(0)
  m.transpose_naive:launch(s, { (w + 15) // 16, (h + 15) // 16 }, { 16, 16 }, a, naive, w, h)
  m.transpose_tiled:launch(s, { (w + 31) // 32, (h + 31) // 32 }, { 32, 8 }, a, tiled, w, h)
  local want = {}
  for y = 0, h - 1 do
    for x = 0, w - 1 do want[x * h + y + 1] = v[y * w + x + 1] end
  end
  same(want, naive:download(), "naive")
  same(want, tiled:download(), "tiled")
end)

-- Separable convolution: a row pass then a column pass, clamped at the
-- edges, with the taps in __constant__ memory uploaded from Lua
-- (m:global). Exact: binomial taps c/64 on pixels k/256 give multiples of
-- 2^-20 below 1.
case("convolution", "separable convolution, taps in __constant__ memory via m:global", [=[
#define R 3
__constant__ float taps[2 * R + 1];
extern "C" __global__ void conv_rows(const float *in, float *out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  float acc = 0.0f;
#pragma unroll
  for (int k = -R; k <= R; k++) acc += taps[k + R] * in[y * w + min(max(x + k, 0), w - 1)];
  out[y * w + x] = acc;
}

extern "C" __global__ void conv_cols(const float *in, float *out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  float acc = 0.0f;
#pragma unroll
  for (int k = -R; k <= R; k++) acc += taps[k + R] * in[min(max(y + k, 0), h - 1) * w + x];
  out[y * w + x] = acc;
}]=], function(m, s)
  local w, h, r = 40, 30, 3
  local img = dyadic(w * h, 112, 0, 255, 256)
  local coef = { 1 / 64, 6 / 64, 15 / 64, 20 / 64, 15 / 64, 6 / 64, 1 / 64 }
  local taps = m:global("taps")
  assert.equals("f32", taps:type())
  assert.equals(7, #taps)
  taps:upload(coef)
  same(coef, taps:download(), "taps")
  local a, tmp, b = cuda.buffer("f32", img), cuda.buffer("f32", w * h), cuda.buffer("f32", w * h)
  local grid, block = { (w + 15) // 16, (h + 15) // 16 }, { 16, 16 }
  m.conv_rows:launch(s, grid, block, a, tmp, w, h)
  m.conv_cols:launch(s, grid, block, tmp, b, w, h)
  local function at(t, x, y)
    x = math.min(math.max(x, 0), w - 1)
    y = math.min(math.max(y, 0), h - 1)
    return t[y * w + x + 1]
  end
  local rows, want = {}, {}
  for y = 0, h - 1 do
    for x = 0, w - 1 do
      local acc = 0
      for k = -r, r do acc = acc + coef[k + r + 1] * at(img, x + k, y) end
      rows[y * w + x + 1] = acc
    end
  end
  for y = 0, h - 1 do
    for x = 0, w - 1 do
      local acc = 0
      for k = -r, r do acc = acc + coef[k + r + 1] * at(rows, x, y + k) end
      want[y * w + x + 1] = acc
    end
  end
  same(rows, tmp:download(), "rows")
  same(want, b:download(), "columns")
  -- New taps from Lua reach the next launch: the identity filter.
  taps:upload({ 0, 0, 0, 1, 0, 0, 0 })
  m.conv_rows:launch(s, grid, block, a, tmp, w, h)
  same(img, tmp:download(), "identity")
end)

-- N-body, one leapfrog step: all pairs, float4 positions (xyz, mass) tiled
-- through shared memory, softened gravity with rsqrtf. Tolerance: each
-- acceleration is a sequential f32 sum of 256 terms, each within about 10
-- ulps (rsqrtf is 2 ulps, the CUDA guide), so its error is below
-- (256 + 10) * 2^-24 ~ 1.6e-5 of the sum of the terms' magnitudes; 3e-5 of
-- it, then one rounding of the velocity and of the position on top.
case("nbody", "n-body step, float4 bodies tiled in shared memory", [=[
extern "C" __global__ void nbody_step(const float *pos_, const float *vel_, float *npos_, float *nvel_,
                                      int n, float dt, float eps2) {
  const float4 *pos = (const float4 *)pos_, *vel = (const float4 *)vel_;
  float4 *npos = (float4 *)npos_, *nvel = (float4 *)nvel_;
  __shared__ float4 sh[64];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float4 p = pos[i];
  float ax = 0.0f, ay = 0.0f, az = 0.0f;
  for (int base = 0; base < n; base += blockDim.x) {
    sh[threadIdx.x] = pos[base + threadIdx.x];
    __syncthreads();
    for (int j = 0; j < blockDim.x; j++) {
      float4 q = sh[j];
      float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
      float inv = rsqrtf(dx * dx + dy * dy + dz * dz + eps2);
      float f = q.w * inv * inv * inv;
      ax += dx * f; ay += dy * f; az += dz * f;
    }
    __syncthreads();
  }
  float4 v = vel[i];
  v.x += ax * dt; v.y += ay * dt; v.z += az * dt;
  nvel[i] = v;
  npos[i] = make_float4(p.x + v.x * dt, p.y + v.y * dt, p.z + v.z * dt, p.w);
}]=], function(m, s)
  local n, dt, eps2 = 256, f32(0.01), f32(0.01)
  local xyz, vxyz, mass = reals(3 * n, 113, -1, 1), reals(3 * n, 114, -0.1, 0.1), reals(n, 115, 0.5, 1.5)
  local pos, vel = {}, {}
  for i = 0, n - 1 do
    for c = 1, 3 do pos[4 * i + c] = xyz[3 * i + c]; vel[4 * i + c] = vxyz[3 * i + c] end
    pos[4 * i + 4], vel[4 * i + 4] = mass[i + 1], 0
  end
  local npos, nvel = cuda.buffer("f32", 4 * n), cuda.buffer("f32", 4 * n)
  m.nbody_step:launch(s, n // 64, 64, cuda.buffer("f32", pos), cuda.buffer("f32", vel), npos, nvel, n, dt, eps2)
  local wp, wv, tp, tv = {}, {}, {}, {}
  for i = 0, n - 1 do
    for c = 1, 3 do
      local a, mag = 0, 0
      for j = 0, n - 1 do
        local d = {}
        for e = 1, 3 do d[e] = pos[4 * j + e] - pos[4 * i + e] end
        local r2 = d[1] * d[1] + d[2] * d[2] + d[3] * d[3] + eps2
        local term = pos[4 * j + 4] * d[c] / (r2 * math.sqrt(r2))
        a, mag = a + term, mag + math.abs(term)
      end
      local k = 4 * i + c
      wv[k] = vel[k] + a * dt
      wp[k] = pos[k] + wv[k] * dt
      tv[k] = 3e-5 * mag * dt + 2 ^ -23 * math.abs(wv[k])
      tp[k] = tv[k] * dt + 2 ^ -23 * math.abs(wp[k])
    end
    wp[4 * i + 4], wv[4 * i + 4], tp[4 * i + 4], tv[4 * i + 4] = pos[4 * i + 4], 0, 0, 0
  end
  near(wv, nvel:download(), function(k) return tv[k] end, "velocity")
  near(wp, npos:download(), function(k) return tp[k] end, "position")
end)

-- Jacobi iteration of Laplace's equation, 5-point stencil, fixed boundary,
-- 30 sweeps ping-ponging two buffers. Tolerance: a sweep rounds 3 adds
-- (the 0.25 is exact) and averaging does not grow earlier errors, so after
-- 30 sweeps on values in [0, 1] the error is below 30 * 3 * 2^-24 ~ 5.4e-6.
case("jacobi", "2-D Jacobi sweeps, 5-point stencil", [=[
extern "C" __global__ void jacobi(const float *u, float *v, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  int i = y * w + x;
  if (x == 0 || y == 0 || x == w - 1 || y == h - 1) v[i] = u[i];
  else v[i] = 0.25f * (u[i - 1] + u[i + 1] + u[i - w] + u[i + w]);
}]=], function(m, s)
  local w, h, sweeps = 34, 26, 30
  local grid0 = reals(w * h, 116, 0, 1)
  for y = 1, h - 2 do for x = 1, w - 2 do grid0[y * w + x + 1] = 0 end end
  local u, v = cuda.buffer("f32", grid0), cuda.buffer("f32", w * h)
  local grid, block = { (w + 15) // 16, (h + 15) // 16 }, { 16, 16 }
  for _ = 1, sweeps do
    m.jacobi:launch(s, grid, block, u, v, w, h)
    u, v = v, u
  end
  local a, b = grid0, {}
  for _ = 1, sweeps do
    for y = 0, h - 1 do
      for x = 0, w - 1 do
        local i = y * w + x + 1
        if x == 0 or y == 0 or x == w - 1 or y == h - 1 then b[i] = a[i]
        else b[i] = 0.25 * (a[i - 1] + a[i + 1] + a[i - w] + a[i + w]) end
      end
    end
    a, b = b, a
  end
  near(a, u:download(), function() return 1e-5 end, "jacobi")
end)

-- SGEMM, C = alpha A B + beta C, 16x16 tiles of A and B in shared memory,
-- sizes not multiples of the tile. Exact: small integer entries.
case("sgemm_tiled", "SGEMM tiled in shared memory", [=[
#define TS 16
extern "C" __global__ void sgemm(int M, int N, int K, float alpha, const float *A, const float *B,
                                 float beta, float *C) {
  __shared__ float As[TS][TS], Bs[TS][TS];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TS + ty, col = blockIdx.x * TS + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TS) {
    As[ty][tx] = row < M && k0 + tx < K ? A[row * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = k0 + ty < K && col < N ? B[(k0 + ty) * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TS; k++) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = alpha * acc + beta * C[row * N + col];
}]=], function(m, s)
  local M, N, K = 48, 40, 56
  local A, B, C = ints(M * K, 117, -4, 4), ints(K * N, 118, -4, 4), ints(M * N, 119, -8, 8)
  local c = cuda.buffer("f32", C)
  m.sgemm:launch(s, { (N + 15) // 16, (M + 15) // 16 }, { 16, 16 }, M, N, K, 0.5,
                 cuda.buffer("f32", A), cuda.buffer("f32", B), -2.0, c)
  local want = {}
  for i = 0, M - 1 do
    for j = 0, N - 1 do
      local acc = 0
      for k = 0, K - 1 do acc = acc + A[i * K + k + 1] * B[k * N + j + 1] end
      want[i * N + j + 1] = 0.5 * acc - 2 * C[i * N + j + 1]
    end
  end
  same(want, c:download())
end)

-- Cooperative groups: tiled_partition<32> with cg::reduce (plus on ints,
-- greater on floats), and a tiled_partition<8> reduced with its own
-- shfl_down.
case("cg_tiles", "cooperative-groups tile reductions (cg::reduce, tile shfl_down)", [=[
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
extern "C" __global__ void cg_tiles(const int *in, const float *f, int *wsum, float *wmax, int *sum8,
                                    int *total) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = in[i];
  int s = cg::reduce(warp, v, cg::plus<int>());
  float mx = cg::reduce(warp, f[i], cg::greater<float>());
  int w = blockIdx.x * (blockDim.x / 32) + warp.meta_group_rank();
  if (warp.thread_rank() == 0) { wsum[w] = s; wmax[w] = mx; atomicAdd(total, s); }
  cg::thread_block_tile<8> t8 = cg::tiled_partition<8>(block);
  for (int o = t8.size() / 2; o > 0; o >>= 1) v += t8.shfl_down(v, o);
  if (t8.thread_rank() == 0) sum8[i / 8] = v;
}]=], function(m, s)
  local n = 512
  local v, f = ints(n, 120, -1000, 1000), reals(n, 121, -10, 10)
  local wsum, wmax = cuda.buffer("i32", n // 32), cuda.buffer("f32", n // 32)
  local sum8, total = cuda.buffer("i32", n // 8), cuda.buffer("i32", 1):fill(0)
  m.cg_tiles:launch(s, n // 128, 128, cuda.buffer("i32", v), cuda.buffer("f32", f), wsum, wmax, sum8, total)
  local wmaxes = {}
  for w = 0, n // 32 - 1 do wmaxes[w + 1] = math.max(table.unpack(f, 32 * w + 1, 32 * w + 32)) end
  same(block_sums(v, 32), wsum:download(), "tile<32> sums")
  same(wmaxes, wmax:download(), "tile<32> maxima")
  same(block_sums(v, 8), sum8:download(), "tile<8> sums")
  assert.equals(sum(v), total:download()[1])
end)

-- Half-precision dot product: __half2 loads, __hmul2 products, __hadd of
-- the two lanes, accumulated in f32. Exact: entries k/8 with |k| <= 16 make
-- products and pair sums exact in f16 and the f32 sums exact.
case("half_dot", "f16 dot product with __half2 and __hmul2 / __hadd", ([=[
#include <cuda_fp16.h>
extern "C" __global__ void hdot(const __half *a, const __half *b, float *out, int n2) {
  const __half2 *a2 = reinterpret_cast<const __half2 *>(a);
  const __half2 *b2 = reinterpret_cast<const __half2 *>(b);
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n2; i += gridDim.x * blockDim.x) {
    __half2 p = __hmul2(a2[i], b2[i]);
    acc += __half2float(__hadd(__low2half(p), __high2half(p)));
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(%s, acc, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);
}]=]):format(FULL), function(m, s)
  local n = 2048
  local a, b = dyadic(n, 122, -16, 16, 8), dyadic(n, 123, -16, 16, 8)
  local out = cuda.buffer("f32", 1):fill(0)
  m.hdot:launch(s, 2, 128, cuda.buffer("f16", a), cuda.buffer("f16", b), out, n // 2)
  local want = 0
  for i = 1, n do want = want + a[i] * b[i] end
  assert.equals(want, out:download()[1])
end)

-- Warp votes and shuffles: __ballot_sync, __any_sync, __all_sync, the
-- popcount of a ballot, and a butterfly max with __shfl_xor_sync; blocks
-- of 48 threads leave a warp of 16 lanes, whose mask names only them.
case("warp_vote", "warp vote and shuffle (__ballot_sync, __any_sync, __all_sync, __shfl_xor_sync)", [=[
extern "C" __global__ void warp_vote(const int *in, unsigned *ballot, int *anyall, int *count, int *wmax) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int live = min(32, (int)blockDim.x - (int)(threadIdx.x & ~31u));   // lanes in this warp
  unsigned mask = live == 32 ? 0xffffffffu : (1u << live) - 1u;
  int v = in[i];
  unsigned b = __ballot_sync(mask, v > 0);
  int any = __any_sync(mask, v > 90), all = __all_sync(mask, v > -100);
  int mx = v;
  for (int o = 16; o > 0; o >>= 1)
    if (o < live) mx = max(mx, __shfl_xor_sync(mask, mx, o));
  ballot[i] = b;
  anyall[i] = 2 * any + all;
  count[i] = __popc(b);
  wmax[i] = mx;
}]=], function(m, s)
  for _, block in ipairs { 64, 48 } do
    local n = 2 * block
    local v = ints(n, 124 + block, -120, 95)
    v[5] = 99   -- the first warp has a value above 90, and the last warp
    v[n] = -110 -- one below -100
    local ballot, anyall = cuda.buffer("u32", n), cuda.buffer("i32", n)
    local count, wmax = cuda.buffer("i32", n), cuda.buffer("i32", n)
    m.warp_vote:launch(s, 2, block, cuda.buffer("i32", v), ballot, anyall, count, wmax)
    local wb, wa, wc, wm = {}, {}, {}, {}
    for blk = 0, 1 do
      for first = 0, block - 1, 32 do
        local live = math.min(32, block - first)
        local bits, any, all, mx = 0, 0, 1, -math.huge
        for l = 0, live - 1 do
          local x = v[blk * block + first + l + 1]
          if x > 0 then bits = bits | 1 << l end
          if x > 90 then any = 1 end
          if x <= -100 then all = 0 end
          mx = math.max(mx, x)
        end
        for l = 0, live - 1 do
          local i = blk * block + first + l + 1
          wb[i], wa[i], wc[i], wm[i] = bits, 2 * any + all, popcount(bits), mx
        end
      end
    end
    same(wb, ballot:download(), "ballot, block " .. block)
    same(wa, anyall:download(), "any/all, block " .. block)
    same(wc, count:download(), "popc, block " .. block)
    same(wm, wmax:download(), "butterfly max, block " .. block)
  end
end)

-- Votes and shuffles in divergent code and in sub-warp groups: each side
-- of a branch votes, broadcasts and reduces (__reduce_add_sync,
-- __reduce_max_sync) over its own lanes' mask; __shfl_xor_sync with width 8
-- sums segments of 8 lanes, __shfl_up_sync with width 16 scans halves.
case("warp_subgroups", "divergent-mask votes, __reduce_*_sync and width-limited shuffles", ([=[
#define FULL %s
extern "C" __global__ void warp_subgroups(const int *in, unsigned *ballot, int *bcast, int *red,
                                          int *seg, int *scan) {
  int i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31;
  int v = in[i];
  if (lane < 20) {
    ballot[i] = __ballot_sync(0x000fffffu, v > 0);
    bcast[i] = __shfl_sync(0x000fffffu, v, 3);
    red[i] = __reduce_add_sync(0x000fffffu, v);
  } else {
    ballot[i] = __ballot_sync(0xfff00000u, v > 0);
    bcast[i] = __shfl_sync(0xfff00000u, v, 25);
    red[i] = __reduce_max_sync(0xfff00000u, v);
  }
  int x = v;
  for (int o = 4; o > 0; o >>= 1) x += __shfl_xor_sync(FULL, x, o, 8);
  seg[i] = x;
  int y = v;
  for (int o = 1; o < 16; o <<= 1) {
    int t = __shfl_up_sync(FULL, y, o, 16);
    if ((lane & 15) >= o) y += t;
  }
  scan[i] = y;
}]=]):format(FULL), function(m, s)
  local n = 128
  local v = ints(n, 141, -50, 50)
  local ballot = cuda.buffer("u32", n)
  local outs = { cuda.buffer("i32", n), cuda.buffer("i32", n), cuda.buffer("i32", n), cuda.buffer("i32", n) }
  m.warp_subgroups:launch(s, 2, 64, cuda.buffer("i32", v), ballot, table.unpack(outs))
  local wb, wbc, wr, ws, wsc = {}, {}, {}, {}, {}
  for w = 0, n // 32 - 1 do
    local lo, hi, add, most = 0, 0, 0, -math.huge
    for l = 0, 31 do
      local x = v[32 * w + l + 1]
      if l < 20 then
        add = add + x
        if x > 0 then lo = lo | 1 << l end
      else
        most = math.max(most, x)
        if x > 0 then hi = hi | 1 << l end
      end
    end
    for l = 0, 31 do
      local i = 32 * w + l + 1
      wb[i] = l < 20 and lo or hi
      wbc[i] = v[32 * w + (l < 20 and 3 or 25) + 1]
      wr[i] = l < 20 and add or most
      ws[i] = sum(v, 32 * w + (l & ~7) + 1, 32 * w + (l & ~7) + 8)
      wsc[i] = sum(v, 32 * w + (l & ~15) + 1, i)
    end
  end
  same(wb, ballot:download(), "ballot")
  same(wbc, outs[1]:download(), "broadcast")
  same(wr, outs[2]:download(), "reduce")
  same(ws, outs[3]:download(), "width-8 butterfly")
  same(wsc, outs[4]:download(), "width-16 scan")
end)

-- Template kernels instantiated by their C++ names (opts.names): one block
-- reduction for f32, i32 and f64, the block size a template argument.
case("template_reduce", "template kernels instantiated through opts.names", [=[
template <typename T, int B>
__global__ void block_reduce(const T *in, T *out, int n) {
  __shared__ T s[B];
  T acc = 0;
  for (int i = blockIdx.x * B + threadIdx.x; i < n; i += gridDim.x * B) acc += in[i];
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int h = B / 2; h > 0; h >>= 1) {
    if (threadIdx.x < h) s[threadIdx.x] += s[threadIdx.x + h];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}]=], function(m, s)
  local n = 3000
  local v = dyadic(n, 126, -500, 500, 16)
  local iv = ints(n, 127, -500, 500)
  for _, t in ipairs {
    { "block_reduce<float, 256>", "f32", 256, v },
    { "block_reduce<int, 128>", "i32", 128, iv },
    { "block_reduce<double, 64>", "f64", 64, v },
  } do
    local name, ty, b, data = t[1], t[2], t[3], t[4]
    local k = m[name]
    assert.equals(("%s(const %s*, %s*, i32)"):format(name, ty, ty), k:signature())
    local out = cuda.buffer(ty, 4)
    k:launch(s, 4, b, cuda.buffer(ty, data), out, n)
    local want = { 0, 0, 0, 0 }  -- block k takes the chunks of B elements k, k + 4, ...
    for i = 1, n do
      local blk = (i - 1) // b % 4 + 1
      want[blk] = want[blk] + data[i]
    end
    same(want, out:download(), name)
  end
end, { "block_reduce<float, 256>", "block_reduce<int, 128>", "block_reduce<double, 64>" })

-- A __device__ counter and a __device__ minimum, reset and read back from
-- Lua through m:global: how many values pass a threshold, and the first.
case("device_counter", "__device__ counters read back with m:global", [=[
__device__ unsigned int hits;
__device__ int first_hit;
extern "C" __global__ void count_hits(const int *in, int n, int threshold) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && in[i] > threshold) {
    atomicAdd(&hits, 1u);
    atomicMin(&first_hit, i);
  }
}]=], function(m, s)
  local n = 3000
  local v = ints(n, 128, 0, 9999)
  local data = cuda.buffer("i32", v)
  local hits, first = m:global("hits"), m:global("first_hit")
  assert.equals("u32", hits:type())
  assert.equals("i32", first:type())
  for _, threshold in ipairs { 9000, 9990, 5000 } do
    hits:fill(0)
    first:fill(0x7fffffff)
    m.count_hits:launch(s, (n + 255) // 256, 256, data, n, threshold)
    local count, at = 0, 0x7fffffff
    for i = 1, n do
      if v[i] > threshold then count = count + 1; at = math.min(at, i - 1) end
    end
    assert.equals(count, hits:download()[1], "hits over " .. threshold)
    assert.equals(at, first:download()[1], "first over " .. threshold)
  end
end)

-- Stream compaction, order kept: per-block counts from warp ballots, an
-- exclusive scan of the counts, then a scatter where each thread's place
-- is its block's offset, its warp's offset and the popcount of the ballot
-- below its lane.
case("stream_compaction", "ordered stream compaction (ballot, popc, scan, scatter)", ([=[
#define FULL %s
__device__ bool keep(int v) { return v %% 3 == 0; }

extern "C" __global__ void compact_count(const int *in, int *counts, int n) {
  __shared__ int c;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (threadIdx.x == 0) c = 0;
  __syncthreads();
  unsigned b = __ballot_sync(FULL, i < n && keep(in[i]));
  if ((threadIdx.x & 31) == 0) atomicAdd(&c, __popc(b));
  __syncthreads();
  if (threadIdx.x == 0) counts[blockIdx.x] = c;
}

extern "C" __global__ void compact_offsets(const int *counts, int *offsets, int *total, int blocks) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  int run = 0;
  for (int b = 0; b < blocks; b++) { offsets[b] = run; run += counts[b]; }
  *total = run;
}

extern "C" __global__ void compact_scatter(const int *in, const int *offsets, int *out, int n) {
  __shared__ int wbase[32];
  int i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  bool k = i < n && keep(in[i]);
  unsigned b = __ballot_sync(FULL, k);
  if (lane == 0) wbase[warp] = __popc(b);
  __syncthreads();
  if (threadIdx.x == 0) {
    int run = 0;
    for (int w = 0; w < (int)(blockDim.x >> 5); w++) { int c = wbase[w]; wbase[w] = run; run += c; }
  }
  __syncthreads();
  if (k) out[offsets[blockIdx.x] + wbase[warp] + __popc(b & ((1u << lane) - 1u))] = in[i];
}]=]):format(FULL), function(m, s)
  local n, b = 3000, 256
  local blocks = (n + b - 1) // b
  local v = ints(n, 129, -10000, 10000)
  local data, counts = cuda.buffer("i32", v), cuda.buffer("i32", blocks)
  local offsets, total, out = cuda.buffer("i32", blocks), cuda.buffer("i32", 1), cuda.buffer("i32", n):fill(0)
  m.compact_count:launch(s, blocks, b, data, counts, n)
  m.compact_offsets:launch(s, 1, 32, counts, offsets, total, blocks)
  m.compact_scatter:launch(s, blocks, b, data, offsets, out, n)
  local want = {}
  for i = 1, n do if v[i] % 3 == 0 then want[#want + 1] = v[i] end end
  assert.equals(#want, total:download()[1])
  same(want, out:download("table", 0, #want))
end)

-- Block-wide votes: __syncthreads_count, __syncthreads_and and
-- __syncthreads_or (bar.red), a barrier that also counts or tests a
-- predicate over the whole block.
case("block_vote", "block-wide votes (__syncthreads_count, _and, _or)", [=[
extern "C" __global__ void block_vote(const int *in, int *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = i < n ? in[i] : 0;
  int count = __syncthreads_count(v > 0);
  int all = __syncthreads_and(v > -90);
  int any = __syncthreads_or(v > 95);
  if (threadIdx.x == 0) out[blockIdx.x] = count * 4 + all * 2 + any;
}]=], function(m, s)
  local n, b = 1000, 128
  local blocks = (n + b - 1) // b
  local v = ints(n, 142, -100, 100)
  local out = cuda.buffer("i32", blocks)
  m.block_vote:launch(s, blocks, b, cuda.buffer("i32", v), out, n)
  local want = {}
  for k = 0, blocks - 1 do
    local count, all, any = 0, 1, 0
    for t = 0, b - 1 do
      local x = v[k * b + t + 1] or 0
      if x > 0 then count = count + 1 end
      if x <= -90 then all = 0 end
      if x > 95 then any = 1 end
    end
    want[k + 1] = count * 4 + all * 2 + any
  end
  same(want, out:download())
end)

-- LSD radix sort, one bit a pass: each pass is a stable split by the bit,
-- placed by an exclusive prefix sum of the zero flags (Hillis-Steele in
-- shared memory); 16 passes sort 16-bit keys.
case("radix_sort", "radix sort, one prefix-sum split per bit", [=[
extern "C" __global__ void radix_split(const unsigned *in, unsigned *out, int bit, int n) {
  __shared__ int sc[1024];
  int t = threadIdx.x;
  unsigned key = t < n ? in[t] : 0u;
  int zero = t < n && ((key >> bit) & 1u) == 0u;
  sc[t] = zero;
  __syncthreads();
  for (int off = 1; off < (int)blockDim.x; off <<= 1) {
    int add = t >= off ? sc[t - off] : 0;
    __syncthreads();
    sc[t] += add;
    __syncthreads();
  }
  int before = sc[t] - zero;          // zeros before t: the exclusive scan
  int zeros = sc[blockDim.x - 1];
  if (t < n) out[zero ? before : zeros + t - before] = key;
}]=], function(m, s)
  local n = 1000
  local v = ints(n, 130, 0, 65535)
  local a, b = cuda.buffer("u32", v), cuda.buffer("u32", n)
  m.radix_split:launch(s, 1, 1024, a, b, 0, n)
  local split = {}
  for _, want in ipairs { 0, 1 } do
    for i = 1, n do if v[i] & 1 == want then split[#split + 1] = v[i] end end
  end
  same(split, b:download(), "one pass")
  for bit = 1, 15 do
    m.radix_split:launch(s, 1, 1024, b, a, bit, n)
    a, b = b, a
  end
  table.sort(v)
  same(v, b:download(), "sorted")
end)

-- SAXPY with a grid-stride loop: a grid smaller than the data. Exact:
-- 2.5 times k/16 plus k'/16.
case("saxpy", "SAXPY, grid-stride loop", [=[
extern "C" __global__ void saxpy(int n, float a, const float *x, float *y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    y[i] = a * x[i] + y[i];
}]=], function(m, s)
  local n = 10000
  local x, y = dyadic(n, 131, -1000, 1000, 16), dyadic(n, 132, -1000, 1000, 16)
  local yb = cuda.buffer("f32", y)
  m.saxpy:launch(s, 8, 128, n, 2.5, cuda.buffer("f32", x), yb)
  local want = {}
  for i = 1, n do want[i] = 2.5 * x[i] + y[i] end
  same(want, yb:download())
end)

-- Matrix-vector product, one warp a row, lanes striding the columns and a
-- shuffle reduction. Exact: entries k/4, sums far below 2^24 sixteenths.
case("matvec", "matrix-vector product, a warp per row", ([=[
extern "C" __global__ void matvec(const float *A, const float *x, float *y, int rows, int cols) {
  int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x & 31;
  if (row >= rows) return;        // the same for the whole warp
  float acc = 0.0f;
  for (int c = lane; c < cols; c += 32) acc += A[row * cols + c] * x[c];
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(%s, acc, o);
  if (lane == 0) y[row] = acc;
}]=]):format(FULL), function(m, s)
  local rows, cols = 50, 300
  local A, x = dyadic(rows * cols, 133, -8, 8, 4), dyadic(cols, 134, -8, 8, 4)
  local y = cuda.buffer("f32", rows)
  m.matvec:launch(s, (rows + 3) // 4, 128, cuda.buffer("f32", A), cuda.buffer("f32", x), y, rows, cols)
  local want = {}
  for r = 0, rows - 1 do
    local acc = 0
    for c = 0, cols - 1 do acc = acc + A[r * cols + c + 1] * x[c + 1] end
    want[r + 1] = acc
  end
  same(want, y:download())
end)

-- Block reductions shared by softmax and layer norm (power-of-two blocks
-- of at most 256 threads).
local BLOCK_REDUCE = [=[
__device__ float block_sum(float *red, float v) {
  int t = threadIdx.x;
  red[t] = v;
  __syncthreads();
  for (int h = blockDim.x / 2; h > 0; h >>= 1) {
    if (t < h) red[t] += red[t + h];
    __syncthreads();
  }
  float r = red[0];
  __syncthreads();
  return r;
}

__device__ float block_max(float *red, float v) {
  int t = threadIdx.x;
  red[t] = v;
  __syncthreads();
  for (int h = blockDim.x / 2; h > 0; h >>= 1) {
    if (t < h) red[t] = fmaxf(red[t], red[t + h]);
    __syncthreads();
  }
  float r = red[0];
  __syncthreads();
  return r;
}
]=]

-- Softmax of each row, a block a row: subtract the row's maximum, expf,
-- divide by the sum. Tolerance, relative: expf is within 2 ulps (the CUDA
-- guide), x - max rounds once (|x - max| <= 10: 6e-7 relative in exp),
-- the sum of 300 terms rounds about 10 times along its path (3 per thread,
-- 7 levels), the reciprocal and product twice more: below 2e-6; 1e-5.
case("softmax", "row softmax (max-subtract, exp, sum)", BLOCK_REDUCE .. [=[
extern "C" __global__ void softmax(const float *x, float *y, int cols) {
  __shared__ float red[256];
  const float *xr = x + blockIdx.x * cols;
  float *yr = y + blockIdx.x * cols;
  float mx = __int_as_float(0xff800000);   // -infinity
  for (int c = threadIdx.x; c < cols; c += blockDim.x) mx = fmaxf(mx, xr[c]);
  mx = block_max(red, mx);
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float e = expf(xr[c] - mx);
    yr[c] = e;
    s += e;
  }
  float inv = 1.0f / block_sum(red, s);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] *= inv;
}]=], function(m, s)
  local rows, cols = 6, 300
  local x = reals(rows * cols, 135, -5, 5)
  local y = cuda.buffer("f32", rows * cols)
  m.softmax:launch(s, rows, 128, cuda.buffer("f32", x), y, cols)
  local want = {}
  for r = 0, rows - 1 do
    local mx, total = -math.huge, 0
    for c = 1, cols do mx = math.max(mx, x[r * cols + c]) end
    for c = 1, cols do total = total + math.exp(x[r * cols + c] - mx) end
    for c = 1, cols do want[r * cols + c] = math.exp(x[r * cols + c] - mx) / total end
  end
  local got = y:download()
  near(want, got, function(_, w) return 1e-5 * w end, "softmax")
  for r = 0, rows - 1 do
    assert.is_true(math.abs(sum(got, r * cols + 1, (r + 1) * cols) - 1) < 1e-5, "row " .. r .. " sums to 1")
  end
end)

-- Layer norm of each row, a block a row: mean, variance (two passes),
-- rsqrtf(var + eps), then gamma and beta. Tolerance: the f32 sums of 512
-- values of magnitude <= 3 err by ~1e-6 at worst in the mean, the
-- variance and rsqrtf (2 ulps) by ~1e-6 relative, so |y| <= 3 errs by a
-- few 1e-6; 2e-5 (1 + |y|).
case("layer_norm", "layer norm (mean, variance, rsqrtf, gamma, beta)", BLOCK_REDUCE .. [=[
extern "C" __global__ void layer_norm(const float *x, const float *gamma, const float *beta, float *y,
                                      int cols, float eps) {
  __shared__ float red[256];
  const float *xr = x + blockIdx.x * cols;
  float *yr = y + blockIdx.x * cols;
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
  float mean = block_sum(red, s) / cols;
  float q = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) { float d = xr[c] - mean; q += d * d; }
  float inv = rsqrtf(block_sum(red, q) / cols + eps);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = (xr[c] - mean) * inv * gamma[c] + beta[c];
}]=], function(m, s)
  local rows, cols, eps = 4, 512, f32(1e-5)
  local x = reals(rows * cols, 136, -2, 2)
  for i = 1, #x do x[i] = f32(x[i] + ((i - 1) // cols) * 0.25) end -- rows of different means
  local gamma, beta = reals(cols, 137, 0.5, 1.5), reals(cols, 138, -0.5, 0.5)
  local y = cuda.buffer("f32", rows * cols)
  m.layer_norm:launch(s, rows, 256, cuda.buffer("f32", x), cuda.buffer("f32", gamma),
                      cuda.buffer("f32", beta), y, cols, eps)
  local want = {}
  for r = 0, rows - 1 do
    local mean, var = sum(x, r * cols + 1, (r + 1) * cols) / cols, 0
    for c = 1, cols do var = var + (x[r * cols + c] - mean) ^ 2 end
    local inv = 1 / math.sqrt(var / cols + eps)
    for c = 1, cols do want[r * cols + c] = (x[r * cols + c] - mean) * inv * gamma[c] + beta[c] end
  end
  near(want, y:download(), function(_, w) return 2e-5 * (1 + math.abs(w)) end, "layer norm")
end)

-- A kernel captured into a graph once and replayed: each replay reads the
-- DeviceScalars set just before it (a coefficient and a step number).
-- Exact: x is k/16, the coefficients halves.
case("graph_replay", "a captured graph replayed with a DeviceScalar set per replay", [=[
extern "C" __global__ void axpy_scalar(float *y, const float *x, const float *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += *a * x[i];
}

extern "C" __global__ void record_step(int *log, const int *step) {
  if (blockIdx.x == 0 && threadIdx.x == 0) log[*step] = *step * *step;
}]=], function(m, s)
  local n = 1000
  local x = dyadic(n, 139, -100, 100, 16)
  local xb, y, log = cuda.buffer("f32", x), cuda.buffer("f32", n):fill(1), cuda.buffer("i32", 8):fill(-1)
  local a, step = cuda.scalar("f32", 0), cuda.scalar("i32", 0)
  local g = s:capture(function()
    m.axpy_scalar:launch(s, (n + 127) // 128, 128, y, xb, a, n)
    m.record_step:launch(s, 1, 32, log, step)
  end)
  assert.equals(2, g:nodes())
  for r = 1, 6 do
    a:set(r / 2)
    step:set(r)
    g:launch()
  end
  s:synchronize()
  assert.equals(6, g:launches())
  local want = {}
  for i = 1, n do want[i] = 1 + 10.5 * x[i] end -- (1 + ... + 6) / 2
  same(want, y:download(), "y")
  same({ -1, 1, 4, 9, 16, 25, 36, -1 }, log:download(), "log")
end)

-- A cooperative launch: each block reduces its part, the whole grid meets
-- at cg::this_grid().sync(), then every thread reads all the partial sums.
case("grid_sync", "cooperative launch with a grid-wide sync", [=[
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void grid_total(const int *in, int *partial, int *out, int n) {
  __shared__ int s[256];
  cg::grid_group grid = cg::this_grid();
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  s[t] = i < n ? in[i] : 0;
  __syncthreads();
  for (int h = blockDim.x / 2; h > 0; h >>= 1) {
    if (t < h) s[t] += s[t + h];
    __syncthreads();
  }
  if (t == 0) partial[blockIdx.x] = s[0];
  grid.sync();
  int total = 0;
  for (int b = 0; b < (int)gridDim.x; b++) total += partial[b];
  if (i < n) out[i] = total - in[i];
}]=], function(m, s)
  local n, b = 1000, 256
  local v = ints(n, 140, -1000, 1000)
  local partial, out = cuda.buffer("i32", 4), cuda.buffer("i32", n)
  local k = m.grid_total:config { cooperative = true }
  k:launch(s, (n + b - 1) // b, b, cuda.buffer("i32", v), partial, out, n)
  local total, want = sum(v), {}
  for i = 1, n do want[i] = total - v[i] end
  same(block_sums(v, b), partial:download(), "partial sums")
  same(want, out:download(), "after the grid sync")
end)

--------------------------------------------------------------------------

describe("a corpus of well-known GPU kernels", function()
  if not (H.gpu or H.sim) then
    for _, c in ipairs(cases) do
      it(c.name .. ": " .. c.what, function()
        pending("needs its kernel run: the test double runs only host twins of the spec kernels")
      end)
    end
    return
  end

  local s
  setup(function() s = cuda.stream() end)

  it("has at least 26 kernels, each named once", function()
    local seen = {}
    for _, c in ipairs(cases) do
      assert.is_nil(seen[c.name], c.name)
      seen[c.name] = true
    end
    assert.is_true(#cases >= 26, #cases .. " cases")
    for name in pairs(SIM_REFUSES) do assert.is_true(seen[name], name) end
    for name in pairs(SIM_MAY_REFUSE) do assert.is_true(seen[name], name) end
  end)

  for _, c in ipairs(cases) do
    local refused = H.sim and SIM_REFUSES[c.name]
    local label = c.name .. ": " .. c.what .. (refused and " (refused by the simulator at load)" or "")
    it(label, function()
      local opts = { name = c.name .. ".cu", arch = ARCH, names = c.names }
      if refused then
        local err = H.error_of(cuda.compile, c.src, opts)
        assert.equals("CUDA_ERROR_INVALID_PTX", err.name)
        assert.matches(refused.message, tostring(err), 1, true)
        return
      end
      local ok, m = pcall(cuda.compile, c.src, opts)
      if not ok and H.sim and SIM_MAY_REFUSE[c.name] then
        assert.equals("CUDA_ERROR_INVALID_PTX", m.name, tostring(m))
        local known = false
        for _, message in ipairs(SIM_MAY_REFUSE[c.name]) do
          known = known or tostring(m):find(message, 1, true) ~= nil
        end
        assert.is_true(known, tostring(m))
        return
      end
      if not ok then error(m, 0) end
      c.run(m, s)
    end)
  end
end)
