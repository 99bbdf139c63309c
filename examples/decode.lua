-- A small transformer-style decoder, one token per step for a batch of
-- sequences, replayed from one CUDA graph. Each step embeds the last
-- token at the position held in a DeviceScalar, projects q, k and v with a
-- cuBLAS GEMM, appends k and v to a cache, attends over the cache up to
-- the position (two strided-batched GEMMs around a masked softmax), adds
-- the attention and an MLP (a cuBLASLt matmul with its relu fused, then a
-- GEMM) to the residual, projects to the vocabulary and samples the next
-- token with numbers from cuda.rng. The
-- weights are random, drawn from the generator too: the tokens mean
-- nothing, but every step does the work of a real decoder's.
--
-- The same step runs four ways: eagerly (every kernel and cuBLAS call
-- made from Lua each step), captured once, then `pos:set(t); g:launch()`
-- per token, captured again with `sample` configured for programmatic
-- launch (it waits on griddepcontrol.wait before it reads the draws, so
-- it may start while the generator's kernel before it ends: the step's
-- one pair of the runtime's kernels back to back), and written as plain
-- eager code with the position a number (kernels that take it by value)
-- and wrapped once with cuda.graphed, which replays a graph per token with
-- no capture and no DeviceScalar. All start
-- from the same generator state, so they must give the same tokens; the
-- script checks that and prints tokens per second each way. Exits 1 when
-- the tokens differ.
--
--   cugraph-lua examples/decode.lua [--profile] [tokens [width [batch]]]
--                                   (default 128 tokens, width 256, batch 8)
--
-- --profile adds where a replay's time goes (g:profile), by Lua line.
--   cugraph-lua --sim examples/decode.lua 12 32 2     (seconds on a CPU)
local cuda = require "cugraph"

local SRC = [==[
// x[:, b] = E[:, tok[b]] + P[:, pos]: column b of x (d x B) is sequence b
extern "C" __global__ void embed(float *x, const float *E, const float *P,
                                 const int *tok, const int *pos, int d, int B) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= d * B) return;
  int b = i / d, j = i % d;
  x[i] = E[tok[b] * d + j] + P[*pos * d + j];
}

// K[:, pos, b] and V[:, pos, b] from qkv[:, b] = (q, k, v)
extern "C" __global__ void store_kv(float *K, float *V, const float *qkv,
                                    const int *pos, int d, int T, int B) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= d * B) return;
  int b = i / d, j = i % d;
  K[(b * T + *pos) * d + j] = qkv[b * 3 * d + d + j];
  V[(b * T + *pos) * d + j] = qkv[b * 3 * d + 2 * d + j];
}

// s[:, b] = softmax(scale * s[0 .. pos, b]), zero past pos: one warp a column
extern "C" __global__ void softmax_upto(float *s, const int *pos, int T,
                                        float scale) {
  float *c = s + blockIdx.x * T;
  int n = *pos + 1, lane = threadIdx.x;
  float m = -1e30f;
  for (int t = lane; t < n; t += 32) m = fmaxf(m, c[t] * scale);
  for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float z = 0;
  for (int t = lane; t < n; t += 32) z += expf(c[t] * scale - m);
  for (int o = 16; o; o >>= 1) z += __shfl_xor_sync(0xffffffffu, z, o);
  for (int t = lane; t < T; t += 32) c[t] = t < n ? expf(c[t] * scale - m) / z : 0.f;
}

// tok[b] = a draw from softmax(logits[:, b]) by u[b]; out[b, pos] = tok[b].
// One warp a sequence, each lane over a run of V / 32 logits: the maximum
// and the sum of exponentials across the warp, then the lane whose run
// holds the point of the cumulative sum that u[b] names finds the token.
extern "C" __global__ void sample(int *tok, int *out, const float *logits,
                                  const float *u, const int *pos, int V, int T) {
  asm volatile("griddepcontrol.wait;" ::: "memory"); // the draws are written
  const float *l = logits + blockIdx.x * V;
  int lane = threadIdx.x, per = (V + 31) / 32;
  int lo = min(lane * per, V), hi = min(lo + per, V);
  float m = -1e30f;
  for (int v = lo; v < hi; v++) m = fmaxf(m, l[v]);
  for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float mine = 0;
  for (int v = lo; v < hi; v++) mine += expf(l[v] - m);
  float before = mine; // inclusive scan of the runs' sums over the lanes
  for (int o = 1; o < 32; o <<= 1) {
    float up = __shfl_up_sync(0xffffffffu, before, o);
    if (lane >= o) before += up;
  }
  float z = __shfl_sync(0xffffffffu, before, 31);
  float target = u[blockIdx.x] * z;
  before -= mine; // exclusive: the sum of the runs before this lane's
  unsigned ballot = __ballot_sync(0xffffffffu, before + mine >= target && hi > lo);
  int owner = ballot ? __ffs(ballot) - 1 : 31;
  if (lane != owner) return;
  int pick = hi > lo ? hi - 1 : V - 1;
  float acc = before;
  for (int v = lo; v < hi; v++) {
    acc += expf(l[v] - m);
    if (acc >= target) { pick = v; break; }
  }
  tok[blockIdx.x] = pick;
  out[blockIdx.x * T + *pos] = pick;
}
]==]
local k = cuda.compile(SRC, { name = "decode.cu" })
-- the same kernels taking the position by value, for the graphed step
local kv = cuda.compile((SRC:gsub("const int %*pos", "int pos"):gsub("%*pos", "pos")),
                        { name = "decode_by_value.cu" })

local profile = arg[1] == "--profile"
local args = { table.unpack(arg, profile and 2 or 1) }
local T = math.tointeger(tonumber(args[1] or "128"))
local d = math.tointeger(tonumber(args[2] or "256"))
local B = math.tointeger(tonumber(args[3] or "8"))
assert(T and T >= 2 and d and d >= 8 and d % 8 == 0 and B and B >= 1,
       "usage: decode.lua [tokens >= 2 [width, a multiple of 8 [batch]]]")
local V, H = 2 * d, 4 * d -- vocabulary and MLP width

local s = cuda.stream()
local blas = cuda.blas(s)
local rng = cuda.rng(2024)

-- the weights: normal, scaled by 1/sqrt(fan-in)
local function weights(rows, cols)
  local w = cuda.buffer("f32", rows * cols)
  rng:normal(w, 0, 1 / math.sqrt(cols), s)
  return w
end
local E, P = weights(V, d), weights(T, d) -- token and position embeddings
local Wqkv, Wo = weights(3 * d, d), weights(d, d)
local W1, W2, Wout = weights(H, d), weights(d, H), weights(V, d)

local x = cuda.buffer("f32", d * B)
local qkv = cuda.buffer("f32", 3 * d * B)
local K, Vc = cuda.buffer("f32", d * T * B), cuda.buffer("f32", d * T * B)
local sc = cuda.buffer("f32", T * B)
local att = cuda.buffer("f32", d * B)
local hid = cuda.buffer("f32", H * B)
local logits = cuda.buffer("f32", V * B)
local u = cuda.buffer("f32", B)
local tok = cuda.buffer("i32", B)
local out = cuda.buffer("i32", B * T)
local pos = cuda.scalar("i32", 0)
s:synchronize()

local grid = function(n) return (n + 127) // 128 end
local scale = 1 / math.sqrt(d)
local O_QKV = { m = 3 * d, n = B, k = d, transa = true, lda = d }
local O_SCORE = { m = T, n = 1, k = d, transa = true, lda = d, ldb = 3 * d, ldc = T,
                  batch = B, stride_a = d * T, stride_b = 3 * d, stride_c = T }
local O_ATT = { m = d, n = 1, k = T, lda = d, ldb = T, ldc = d,
                batch = B, stride_a = d * T, stride_b = T, stride_c = d }
local O_WO = { m = d, n = B, k = d, transa = true, lda = d, beta = 1 }
local O_W1 = { m = H, n = B, k = d, transa = true, lda = d, epilogue = "relu" }
local O_W2 = { m = d, n = B, k = H, transa = true, lda = H, beta = 1 }
local O_OUT = { m = V, n = B, k = d, transa = true, lda = d }

-- One step at the position pos holds. Each weight matrix is stored
-- row-major (rows x fan-in), so its column-major view is the transpose:
-- transa makes op(W) the matrix itself. qkv's q of sequence b starts at
-- column b of qkv (3d apart): the scores' batch reads it in place.
-- smp: the sampling kernel (k.sample, or it configured).
local function step_with(smp) return function()
  k.embed:launch(s, grid(d * B), 128, x, E, P, tok, pos, d, B)
  blas:gemm(Wqkv, x, qkv, O_QKV)
  k.store_kv:launch(s, grid(d * B), 128, K, Vc, qkv, pos, d, T, B)
  blas:gemm(K, qkv, sc, O_SCORE)                 -- s_b = K_b' q_b
  k.softmax_upto:launch(s, B, 32, sc, pos, T, scale)
  blas:gemm(Vc, sc, att, O_ATT)                  -- att_b = V_b s_b
  blas:gemm(Wo, att, x, O_WO)                    -- x += Wo att
  blas:matmul(W1, x, hid, O_W1)                  -- relu(W1 x), fused
  blas:gemm(W2, hid, x, O_W2)                    -- x += W2 relu(W1 x)
  blas:gemm(Wout, x, logits, O_OUT)
  rng:uniform(u, 0, 1, s)
  smp:launch(s, B, 32, tok, out, logits, u, pos, V, T)
end end
local step = step_with(k.sample)

-- Runs every position once by run(t); returns the tokens and tokens/s.
local function decode(run)
  rng:seed(7)                                    -- the same draws each time
  tok:fill(0)
  K:fill(0)
  Vc:fill(0)
  local t0, t1 = cuda.event(), cuda.event()
  t0:record(s)
  for t = 0, T - 1 do run(t) end
  t1:record(s)
  t1:synchronize()
  return out:download(), T * B / (t1:elapsed(t0) / 1000)
end

-- The step as eager code, the position a plain number: cuda.graphed
-- records each call's work and replays one graph, setting the nodes whose
-- position (and generator offset) changed.
local graphed_step = cuda.graphed(function(st, t)
  kv.embed:launch(st, grid(d * B), 128, x, E, P, tok, t, d, B)
  blas:gemm(Wqkv, x, qkv, O_QKV)
  kv.store_kv:launch(st, grid(d * B), 128, K, Vc, qkv, t, d, T, B)
  blas:gemm(K, qkv, sc, O_SCORE)
  kv.softmax_upto:launch(st, B, 32, sc, t, T, scale)
  blas:gemm(Vc, sc, att, O_ATT)
  blas:gemm(Wo, att, x, O_WO)
  blas:matmul(W1, x, hid, O_W1)
  blas:gemm(W2, hid, x, O_W2)
  blas:gemm(Wout, x, logits, O_OUT)
  rng:uniform(u, 0, 1, st)
  kv.sample:launch(st, B, 32, tok, out, logits, u, t, V, T)
end)

decode(function(t) pos:set(t); step() end)      -- warm-up: compiles, plans
local eager, eager_rate = decode(function(t) pos:set(t); step() end)
local g = s:capture(step)
local replayed, graph_rate = decode(function(t) pos:set(t); g:launch() end)
local gp = s:capture(step_with(k.sample:config { programmatic = true }))
local pdl, pdl_rate = decode(function(t) pos:set(t); gp:launch() end)
local edges = 0
for _, n in ipairs(select(2, gp:nodes("detail"))) do edges = edges + (n.programmatic and 1 or 0) end
decode(function(t) graphed_step(s, t) end)      -- warm-up: builds its graph
local graphed, graphed_rate = decode(function(t) graphed_step(s, t) end)

for i = 1, #eager do
  for way, got in pairs { ["the graph"] = replayed, ["the programmatic graph"] = pdl,
                          ["the graphed step"] = graphed } do
    if eager[i] ~= got[i] then
      print(("FAILED: token %d of sequence %d is %d eager, %d from %s"):format(
        (i - 1) % T, (i - 1) // T, eager[i], got[i], way))
      os.exit(1, true)
    end
  end
end
local first = {}
for i = 1, math.min(T, 12) do first[i] = eager[i] end
print(("decode: %d sequences x %d tokens, width %d, vocabulary %d, %d nodes a step"):format(
  B, T, d, V, (g:nodes())))
print(("  sequence 0: %s ..."):format(table.concat(first, " ")))
print(("  eager    %10.0f tokens/s"):format(eager_rate))
print(("  captured %10.0f tokens/s  (%.2fx), the same tokens"):format(graph_rate, graph_rate / eager_rate))
print(("  programmatic %6.0f tokens/s  (%.3fx of the captured), the same tokens, %d programmatic edge%s"):format(
  pdl_rate, pdl_rate / graph_rate, edges, edges == 1 and "" or "s"))
print(("  graphed  %10.0f tokens/s  (%.2fx of the captured), the same tokens, %d graph built"):format(
  graphed_rate, graphed_rate / graph_rate, graphed_step:stats().builds))

if profile then
  pos:set(T - 1) -- attention over the whole cache
  local p = g:profile(20)
  print(("  a replay: %.1f us (%.1f us with the profile's event nodes)"):format(p.us, p.profiled_us))
  local nodes = {}
  for _, n in ipairs(p.nodes) do nodes[#nodes + 1] = n end
  table.sort(nodes, function(p1, p2) return p1.us > p2.us end)
  for i = 1, math.min(#nodes, 10) do
    local n = nodes[i]
    print(("  %8.1f us  %-8s %-24s %s"):format(n.us, n.kind, n.name or "",
          n.line and n.line > 0 and "line " .. n.line or "(a library's node)"))
  end
end
