-- model.lua: an MLP forward pass (256 -> 512 GELU -> 512 ReLU -> 10, softmax)
-- with its kernels in CUDA C compiled at run time, captured once into a CUDA
-- graph and replayed over a set of input batches. The batch is chosen by a
-- DeviceScalar that the first and last kernels read, so the graph never
-- changes. Prints the time per forward pass eager and as a graph, and checks
-- the first and last batch against a double-precision reference in Lua; exits
-- 1 when the maximum relative error is above 1e-4.
--
--   cugraph-lua examples/model.lua [weights.f32]
--   MODEL_REPS=20 cugraph-lua examples/model.lua   (20 timed passes)
--
-- Weights come from a fixed-seed xorshift generator, or from a raw
-- little-endian f32 file: W1 [256][512], b1 [512], W2 [512][512], b2 [512],
-- W3 [512][10], b3 [10], each row-major (input index first).
local cuda = require "cugraph"

local B, NB = 64, 16                      -- rows per batch, batches in the set
local D0, D1, D2, D3 = 256, 512, 512, 10  -- layer widths
local TOLERANCE = 1e-4
local TILE = 16

local source = [[
#define TILE 16

// y = act(x W + b) for x [rows][k], W [k][n], b [n], y [rows][n], row-major.
// Each thread owns one output; 16x16 tiles of x and W are staged in shared
// memory. ACT: 0 identity, 1 ReLU, 2 GELU (tanh form). Launch with 16x16
// blocks and a grid covering n (x) by rows (y).
template <int ACT>
__device__ void dense(const float *x, const float *w, const float *b,
                      float *y, int rows, int k, int n) {
  __shared__ float xs[TILE][TILE];
  __shared__ float ws[TILE][TILE];
  int tx = threadIdx.x, ty = threadIdx.y;
  int r = blockIdx.y * TILE + ty, c = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int t = 0; t < k; t += TILE) {
    xs[ty][tx] = r < rows && t + tx < k ? x[(size_t)r * k + t + tx] : 0.0f;
    ws[ty][tx] = t + ty < k && c < n ? w[(size_t)(t + ty) * n + c] : 0.0f;
    __syncthreads();
    for (int i = 0; i < TILE; i++) acc += xs[ty][i] * ws[i][tx];
    __syncthreads();
  }
  if (r >= rows || c >= n) return;
  acc += b[c];
  if (ACT == 1) acc = fmaxf(acc, 0.0f);
  if (ACT == 2)
    acc = 0.5f * acc *
          (1.0f + tanhf(0.7978845608f * (acc + 0.044715f * acc * acc * acc)));
  y[(size_t)r * n + c] = acc;
}

// Layer 1 reads batch *batch of the input set xs [batches][rows][k].
__global__ void dense_gelu_in(const float *xs, const unsigned *batch,
                              const float *w, const float *b, float *y,
                              int rows, int k, int n) {
  dense<2>(xs + (size_t)*batch * rows * k, w, b, y, rows, k, n);
}

__global__ void dense_relu(const float *x, const float *w, const float *b,
                           float *y, int rows, int k, int n) {
  dense<1>(x, w, b, y, rows, k, n);
}

__global__ void dense_linear(const float *x, const float *w, const float *b,
                             float *y, int rows, int k, int n) {
  dense<0>(x, w, b, y, rows, k, n);
}

// One thread per row: softmax of z [rows][n] into batch *batch of the output
// set ps [batches][rows][n]. The row maximum is subtracted before exp.
__global__ void softmax_out(const float *z, const unsigned *batch, float *ps,
                            int rows, int n) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float *zr = z + (size_t)r * n;
  float *p = ps + ((size_t)*batch * rows + r) * n;
  float m = zr[0];
  for (int j = 1; j < n; j++) m = fmaxf(m, zr[j]);
  float s = 0.0f;
  for (int j = 0; j < n; j++) {
    p[j] = expf(zr[j] - m);
    s += p[j];
  }
  for (int j = 0; j < n; j++) p[j] /= s;
}
]]

-- Host data, as f32 values held in doubles -------------------------------

local function f32(x) return (string.unpack("<f", string.pack("<f", x))) end

local seed = 0x2545F491
local function uniform() -- xorshift32: uniform in [-0.5, 0.5)
  seed = (seed ~ (seed << 13)) & 0xffffffff
  seed = seed ~ (seed >> 17)
  seed = (seed ~ (seed << 5)) & 0xffffffff
  return (seed >> 8) / 16777216 - 0.5
end

-- He-uniform scale (2 sqrt(6 / fan_in) on [-0.5, 0.5)) keeps activations of
-- order one through the layers, so the softmax is far from uniform.
local function random_layer(k, n)
  local w, b, scale = {}, {}, 2 * math.sqrt(6 / k)
  for i = 1, k * n do w[i] = f32(uniform() * scale) end
  for i = 1, n do b[i] = f32(uniform() * 0.1) end
  return w, b
end

local function read_weights(path)
  local f = assert(io.open(path, "rb"))
  local data = f:read("a")
  f:close()
  local want = 4 * (D0 * D1 + D1 + D1 * D2 + D2 + D2 * D3 + D3)
  if #data ~= want then
    error(("%s: %d bytes; expected %d (f32 W1, b1, W2, b2, W3, b3)")
          :format(path, #data, want), 0)
  end
  local pos = 1
  local function take(count)
    local t = {}
    for i = 1, count do t[i], pos = string.unpack("<f", data, pos) end
    return t
  end
  local w1, b1 = take(D0 * D1), take(D1)
  local w2, b2 = take(D1 * D2), take(D2)
  local w3, b3 = take(D2 * D3), take(D3)
  return { {w1, b1}, {w2, b2}, {w3, b3} }
end

local params
if arg and arg[1] then
  params = read_weights(arg[1])
else
  params = {}
  params[1] = { random_layer(D0, D1) }
  params[2] = { random_layer(D1, D2) }
  params[3] = { random_layer(D2, D3) }
end

local inputs = {}
for i = 1, NB * B * D0 do inputs[i] = f32(2 * uniform()) end

-- Reference: the same network in double precision -------------------------

local function gelu(x)
  local z = 0.7978845608028654 * (x + 0.044715 * x * x * x)
  local e = math.exp(-2 * math.abs(z))
  local t = (1 - e) / (1 + e)
  return 0.5 * x * (1 + (z < 0 and -t or t))
end

-- y [rows][n] = act(x [rows][k] W + b); x read from offset xoff (0-based).
local function dense_ref(x, xoff, w, b, rows, k, n, act)
  local y = {}
  for r = 0, rows - 1 do
    local row = {}
    for c = 1, n do row[c] = b[c] end
    for i = 0, k - 1 do
      local xi, wi = x[xoff + r * k + i + 1], i * n
      for c = 1, n do row[c] = row[c] + xi * w[wi + c] end
    end
    for c = 1, n do
      local v = row[c]
      if act == "relu" then v = v > 0 and v or 0
      elseif act == "gelu" then v = gelu(v) end
      y[r * n + c] = v
    end
  end
  return y
end

local function reference(batch)
  local h1 = dense_ref(inputs, batch * B * D0, params[1][1], params[1][2],
                       B, D0, D1, "gelu")
  local h2 = dense_ref(h1, 0, params[2][1], params[2][2], B, D1, D2, "relu")
  local z = dense_ref(h2, 0, params[3][1], params[3][2], B, D2, D3)
  local p = {}
  for r = 0, B - 1 do
    local m = -math.huge
    for j = 1, D3 do m = math.max(m, z[r * D3 + j]) end
    local s = 0
    for j = 1, D3 do
      p[r * D3 + j] = math.exp(z[r * D3 + j] - m)
      s = s + p[r * D3 + j]
    end
    for j = 1, D3 do p[r * D3 + j] = p[r * D3 + j] / s end
  end
  return p
end

-- Device -------------------------------------------------------------------

local m = cuda.compile(source, { name = "model.cu" })
local dev = cuda.device()
-- Timed passes: MODEL_REPS, else 2000 (3 on the PTX simulator, where a
-- pass takes a quarter of a second, not microseconds).
local REPS = tonumber(os.getenv("MODEL_REPS"))
             or (dev.name:find("simulator", 1, true) and 3 or 2000)
local WARMUP = math.min(50, REPS)
print(("device: %s (sm_%d%d)"):format(dev.name, dev.major, dev.minor))
local s = cuda.stream()
local x = cuda.buffer("f32", inputs)
local w1, b1 = cuda.buffer("f32", params[1][1]), cuda.buffer("f32", params[1][2])
local w2, b2 = cuda.buffer("f32", params[2][1]), cuda.buffer("f32", params[2][2])
local w3, b3 = cuda.buffer("f32", params[3][1]), cuda.buffer("f32", params[3][2])
local h1, h2 = cuda.buffer("f32", B * D1), cuda.buffer("f32", B * D2)
local z = cuda.buffer("f32", B * D3)
local out = cuda.buffer("f32", NB * B * D3)
local batch = cuda.scalar("u32", 0)
local t0, t1 = cuda.event(), cuda.event()

local block = { TILE, TILE }
local function grid(n, rows) return { (n + TILE - 1) // TILE, (rows + TILE - 1) // TILE } end
local g1, g2, g3 = grid(D1, B), grid(D2, B), grid(D3, B)
local k1, k2, k3, ksm = m.dense_gelu_in, m.dense_relu, m.dense_linear, m.softmax_out

-- One forward pass of batch `batch` on stream st: the same launches run
-- eagerly and under capture.
local function forward(st)
  k1:launch(st, g1, block, x, batch, w1, b1, h1, B, D0, D1)
  k2:launch(st, g2, block, h1, w2, b2, h2, B, D1, D2)
  k3:launch(st, g3, block, h2, w3, b3, z, B, D2, D3)
  ksm:launch(st, 1, B, z, batch, out, B, D3)
end

local graph = s:capture(forward)
local nodes, kinds = graph:nodes()
print(("graph: %d nodes (%s)"):format(nodes, table.concat(kinds, ", ")))

local function eager_pass(i) batch:set(i % NB); forward(s) end
local function graph_pass(i) batch:set(i % NB); graph:launch() end

-- Milliseconds per pass, timed on the stream after a warm-up.
local function time(pass)
  for i = 1, WARMUP do pass(i) end
  t0:record(s)
  for i = 1, REPS do pass(i) end
  t1:record(s)
  return t1:elapsed(t0) / REPS
end

local eager_ms = time(eager_pass)
local graph_ms = time(graph_pass)
-- on the simulator the times are its own clock's: the ratio is not a GPU's
print(("forward pass (batch %d, %d-%d-%d-%d): eager %.1f us, graph %.1f us, "
       .. "speed-up %.2fx%s"):format(B, D0, D1, D2, D3, eager_ms * 1000,
                                     graph_ms * 1000, eager_ms / graph_ms,
                                     dev.name:find("simulator") and " (the PTX simulator's clock, not a GPU's)" or ""))

-- Every batch, eagerly and through the graph, over a sentinel that no
-- softmax produces.
local function run_all(pass)
  out:fill(-1)
  for i = 0, NB - 1 do pass(i) end
  return out:download("string")
end
local eager_out, graph_out = run_all(eager_pass), run_all(graph_pass)

local ok = eager_out == graph_out
print("eager and graph outputs: " .. (ok and "identical" or "DIFFER"))

for _, b in ipairs({ 0, NB - 1 }) do
  local ref, worst = reference(b), 0
  local pos = b * B * D3 * 4 + 1
  for i = 1, B * D3 do
    local v
    v, pos = string.unpack("<f", graph_out, pos)
    local err = math.abs(v - ref[i]) / ref[i]
    if err > worst or err ~= err then worst = err end -- a NaN sticks
  end
  local good = worst <= TOLERANCE
  print(("batch %2d: max relative error %.3g (tolerance %g) %s")
        :format(b, worst, TOLERANCE, good and "ok" or "FAIL"))
  ok = ok and good
end

if not ok then os.exit(1, true) end
print("ok")
