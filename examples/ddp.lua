-- ddp.lua: data-parallel training of the MLP of model.lua (256 -> 512 GELU
-- -> 512 ReLU -> 10, softmax) on every GPU the launcher gives it. Each rank
-- holds the same initial weights and its own shard of a fixed synthetic
-- data set (labels from a random linear teacher); one training step
-- (forward, cross-entropy, backward, the all-reduce of the gradients and
-- of the loss, the SGD update) is one CUDA graph per GPU, captured once and
-- replayed with the batch chosen by a DeviceScalar. Prints the mean loss
-- of each epoch; checks that it fell below half of the first epoch's, and
-- that the weights are identical on every rank at the end. Exits 1 if not.
--
--   cugraph-lua --nproc 2 examples/ddp.lua [epochs [width]]
--   cugraph-lua examples/ddp.lua [epochs [width]]  (one GPU)
-- width: of the two hidden layers (512; smaller on the PTX simulator).
local cuda = require "cugraph"

local B, NB = 64, 16                      -- rows per batch and rank, batches
local EPOCHS = math.tointeger(tonumber(arg and arg[1] or "")) or 20
local WIDTH = math.tointeger(tonumber(arg and arg[2] or "")) or 512
local D0, D1, D2, D3 = 256, WIDTH, WIDTH, 10 -- layer widths
local LR = 0.1

local source = [==[
// C[M][N] = op(A) op(B), K the inner size; op(A)(i, k) is A[i][k], or
// A[k][i] when ta; op(B)(k, j) is B[k][j], or B[j][k] when tb. One thread
// per output, 16x16 blocks.
__global__ void gemm(const float *A, const float *B, float *C, int M, int N,
                     int K, int ta, int tb) {
  int i = blockIdx.y * blockDim.y + threadIdx.y;
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= M || j >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; k++)
    acc += (ta ? A[(size_t)k * M + i] : A[(size_t)i * K + k]) *
           (tb ? B[(size_t)j * K + k] : B[(size_t)k * N + j]);
  C[(size_t)i * N + j] = acc;
}

// Batch *batch of this rank's set: rows of inputs and their labels.
__global__ void gather(const float *xs, const unsigned *ls,
                       const unsigned *batch, float *x, unsigned *l,
                       int rows, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows * k) x[i] = xs[(size_t)*batch * rows * k + i];
  if (i < rows) l[i] = ls[(size_t)*batch * rows + i];
}

__device__ float gelu(float v) {
  return 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
}

__device__ float gelu_grad(float v) {
  float t = tanhf(0.7978845608f * (v + 0.044715f * v * v * v));
  return 0.5f * (1.0f + t) +
         0.5f * v * (1.0f - t * t) * 0.7978845608f * (1.0f + 0.134145f * v * v);
}

// pre = y + b (b per column); y = act(pre). act: 0 none, 1 ReLU, 2 GELU.
__global__ void bias_act(float *y, const float *b, float *pre, int rows,
                         int n, int act) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows * n) return;
  float v = y[i] + b[i % n];
  pre[i] = v;
  y[i] = act == 1 ? fmaxf(v, 0.0f) : act == 2 ? gelu(v) : v;
}

// d *= act'(pre)
__global__ void act_back(float *d, const float *pre, int total, int act) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= total) return;
  d[i] *= act == 1 ? (pre[i] > 0.0f ? 1.0f : 0.0f) : gelu_grad(pre[i]);
}

// db[j] = sum over rows of d[r][j]
__global__ void colsum(const float *d, float *db, int rows, int n) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  float s = 0.0f;
  for (int r = 0; r < rows; r++) s += d[(size_t)r * n + j];
  db[j] = s;
}

// One thread per row: dz = (softmax(z) - onehot(label)) * scale, and
// loss += -log p[label] * scale.
__global__ void softmax_xent(const float *z, const unsigned *label,
                             float *dz, float *loss, int rows, int n,
                             float scale) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float *zr = z + (size_t)r * n;
  float m = zr[0], s = 0.0f;
  for (int j = 1; j < n; j++) m = fmaxf(m, zr[j]);
  for (int j = 0; j < n; j++) s += expf(zr[j] - m);
  for (int j = 0; j < n; j++) {
    float p = expf(zr[j] - m) / s;
    dz[(size_t)r * n + j] = (p - (j == (int)label[r] ? 1.0f : 0.0f)) * scale;
  }
  unsigned y = label[r];
  atomicAdd(loss, (logf(s) - (zr[y] - m)) * scale);
}

__global__ void sgd(float *p, const float *g, float lr, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] -= lr * g[i];
}

__global__ void probe(int *x) { *x = 42; }
]==]

local m = cuda.compile(source, { name = "ddp.cu" }) -- on this rank's device

-- The same weights and data on every rank --------------------------------

local function f32(x) return (string.unpack("<f", string.pack("<f", x))) end

local seed = 0x2545F491
local function uniform() -- xorshift32: uniform in [-0.5, 0.5)
  seed = (seed ~ (seed << 13)) & 0xffffffff
  seed = seed ~ (seed >> 17)
  seed = (seed ~ (seed << 5)) & 0xffffffff
  return (seed >> 8) / 16777216 - 0.5
end

local comm = cuda.comm_world()
local rank, world = comm:rank(), comm:size()
local function say(fmt, ...)
  if rank == 0 then print(fmt:format(...)) end
end

-- Parameters, flat: W1 [D0][D1], b1, W2 [D1][D2], b2, W3 [D2][D3], b3.
local layout, NP = {}, 0
for _, p in ipairs { { "w1", D0 * D1 }, { "b1", D1 }, { "w2", D1 * D2 }, { "b2", D2 },
                     { "w3", D2 * D3 }, { "b3", D3 } } do
  layout[p[1]] = { NP, p[2] }
  NP = NP + p[2]
end
local init = {}
for _, l in ipairs { { "w1", D0 }, { "w2", D1 }, { "w3", D2 } } do
  local first, count = table.unpack(layout[l[1]])
  local scale = 2 * math.sqrt(6 / l[2]) -- He-uniform, as model.lua
  for i = 1, count do init[first + i] = f32(uniform() * scale) end
end
for _, name in ipairs { "b1", "b2", "b3" } do
  local first, count = table.unpack(layout[name])
  for i = 1, count do init[first + i] = 0 end
end

-- The data set: world * NB * B rows; labels from a linear teacher. Rank r
-- keeps rows of its own shard.
local teacher = {}
for i = 1, D0 * D3 do teacher[i] = uniform() end
local xs, ls = {}, {}
for row = 0, world * NB * B - 1 do
  local x = {}
  for i = 1, D0 do x[i] = f32(2 * uniform()) end
  if row // (NB * B) == rank then
    local best, label = -math.huge, 0
    for c = 1, D3 do
      local v = 0
      for i = 1, D0 do v = v + x[i] * teacher[(i - 1) * D3 + c] end
      if v > best then best, label = v, c - 1 end
    end
    table.move(x, 1, D0, #xs + 1, xs)
    ls[#ls + 1] = label
  end
end

-- Device -------------------------------------------------------------------

local dev = cuda.device(cuda.current_device())
say("%d rank%s; rank 0 on %s", world, world == 1 and "" or "s", dev.name)
local s = cuda.stream()

-- Whether this driver runs compiled kernels at all (the test double of the
-- driver refuses them): without, only the collectives of a step run, and
-- the loss is not checked.
local probe = cuda.buffer("i32", 1):fill(0)
local computes = pcall(m.probe.launch, m.probe, s, 1, 1, probe)
s:synchronize()
computes = computes and probe:download()[1] == 42
local function launch(name, ...)
  if computes then m[name]:launch(...) end
end

local P = cuda.buffer("f32", init)
local G = cuda.buffer("f32", NP)
local function part(buf, name) return buf:view(table.unpack(layout[name])) end
local w1, b1, w2, b2, w3, b3 = part(P, "w1"), part(P, "b1"), part(P, "w2"),
                               part(P, "b2"), part(P, "w3"), part(P, "b3")
local gw1, gb1, gw2, gb2, gw3, gb3 = part(G, "w1"), part(G, "b1"), part(G, "w2"),
                                     part(G, "b2"), part(G, "w3"), part(G, "b3")
local X, L = cuda.buffer("f32", xs), cuda.buffer("u32", ls)
local x, l = cuda.buffer("f32", B * D0), cuda.buffer("u32", B)
local h1, a1 = cuda.buffer("f32", B * D1), cuda.buffer("f32", B * D1)
local h2, a2 = cuda.buffer("f32", B * D2), cuda.buffer("f32", B * D2)
local z, dz = cuda.buffer("f32", B * D3), cuda.buffer("f32", B * D3)
local d2, d1 = cuda.buffer("f32", B * D2), cuda.buffer("f32", B * D1)
local loss = cuda.buffer("f32", 1)
local batch = cuda.scalar("u32", 0)

local T = 16
local function grid2(n, rows) return { (n + T - 1) // T, (rows + T - 1) // T } end
local function grid1(n) return (n + 255) // 256 end
local function gemm(st, A, Bm, C, M, N, K, ta, tb)
  launch("gemm", st, grid2(N, M), { T, T }, A, Bm, C, M, N, K, ta, tb)
end

-- One training step on stream st.
local function step(st)
  loss:fill(0, st)
  launch("gather", st, grid1(B * D0), 256, X, L, batch, x, l, B, D0)
  gemm(st, x, w1, h1, B, D1, D0, 0, 0)
  launch("bias_act", st, grid1(B * D1), 256, h1, b1, a1, B, D1, 2)
  gemm(st, h1, w2, h2, B, D2, D1, 0, 0)
  launch("bias_act", st, grid1(B * D2), 256, h2, b2, a2, B, D2, 1)
  gemm(st, h2, w3, z, B, D3, D2, 0, 0)
  launch("bias_act", st, grid1(B * D3), 256, z, b3, z, B, D3, 0)
  launch("softmax_xent", st, 1, B, z, l, dz, loss, B, D3, 1 / (B * world))
  gemm(st, h2, dz, gw3, D2, D3, B, 1, 0)             -- dW3 = h2^T dz
  launch("colsum", st, 1, D3, dz, gb3, B, D3)
  gemm(st, dz, w3, d2, B, D2, D3, 0, 1)              -- dh2 = dz W3^T
  launch("act_back", st, grid1(B * D2), 256, d2, a2, B * D2, 1)
  gemm(st, h1, d2, gw2, D1, D2, B, 1, 0)
  launch("colsum", st, grid1(D2), 256, d2, gb2, B, D2)
  gemm(st, d2, w2, d1, B, D1, D2, 0, 1)
  launch("act_back", st, grid1(B * D1), 256, d1, a1, B * D1, 2)
  gemm(st, x, d1, gw1, D0, D1, B, 1, 0)
  launch("colsum", st, grid1(D1), 256, d1, gb1, B, D1)
  comm:all_reduce(G, G, "sum", st)                   -- the mean gradient
  comm:all_reduce(loss, loss, "sum", st)             -- the mean loss
  launch("sgd", st, grid1(NP), 256, P, G, LR, NP)
end

local graph = s:capture(step)
say("one step: a graph of %d nodes per GPU", (graph:nodes()))

local first, last
local t0, t1 = cuda.event():record(s), cuda.event()
for epoch = 1, EPOCHS do
  local sum = 0
  for i = 0, NB - 1 do
    batch:set(i)
    graph:launch()
    sum = sum + loss:download()[1]
  end
  local mean = sum / NB
  first, last = first or mean, mean
  say("epoch %2d: loss %.4f", epoch, mean)
end
t1:record(s)
s:synchronize()
say("%d steps in %.1f ms (%.1f us a step)", EPOCHS * NB, t1:elapsed(t0),
    t1:elapsed(t0) * 1000 / (EPOCHS * NB))

-- Identical weights: the elementwise max and min over the ranks equal ours.
local hi, lo = cuda.buffer("f32", NP), cuda.buffer("f32", NP)
comm:all_reduce(P, hi, "max")
comm:all_reduce(P, lo, "min")
local mine = P:download("string")
local same = hi:download("string") == mine and lo:download("string") == mine
local ok = same
say("weights identical on every rank: %s", same and "yes" or "NO")
if computes then
  local fell = last < 0.5 * first
  say("loss %.4f -> %.4f: %s", first, last, fell and "fell" or "did NOT fall enough")
  ok = ok and fell
else
  say("this driver does not run compiled kernels (the test double): only "
      .. "the collectives ran, the loss is not checked")
end
graph:free()
comm:free()
if not ok then os.exit(1, true) end
say("ok")
