-- Programmatic dependent launch on replays: chains of 10, 100 and 1000
-- dependent kernel nodes, each kernel launched ordinarily and with
-- k:config{programmatic = true} (a programmatic edge from the node
-- before it), in one graph each, replayed back to back and timed by a
-- pair of events around ITERS replays; µs a node, the median of REPS
-- timings after a warm-up replay.
--
-- Two kernels, both waiting (griddepcontrol.wait) before their first
-- global access and triggering (griddepcontrol.launch_dependents) after
-- their last write, which the runtime proves from their PTX:
--   empty     nothing else: the rows of the device's floor (the chain of
--             ordinary launches is that floor, measured the same way)
--   prologue  64 fused multiply-adds over a __constant__ table and its
--             parameters before the wait, then y[i] = x[i] + that sum
--             over 512 threads, the chain alternating x -> y -> x
-- Targets: a prologue chain replays at least 1.2x faster a node with
-- programmatic edges; an empty chain at or below its ordinary floor. The
-- last replays' results are compared with the ordinary chain's.
--
--   make bench-pdl          (build/cugraph-lua bench/pdl.lua [--quick])
local cuda = require "cugraph"
local stats = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/stats.lua")
local QUICK = arg[1] == "--quick"
local REPS = QUICK and 1 or 7
local N = 512

local m = cuda.compile([[
#define WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#define TRIGGER() asm volatile("griddepcontrol.launch_dependents;" ::: "memory")
__constant__ float table[256];
extern "C" {
__global__ void empty(float *x) {
  WAIT();
  TRIGGER();
}
__global__ void prologue(const float *x, float *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float acc = a;
  for (int k = 0; k < 64; k++) acc = fmaf(acc, table[(i + k) & 255], a);
  WAIT();
  if (i < n) y[i] = x[i] + acc;
  __syncthreads();
  TRIGGER();
}
}]], { arch = "sm_90" })
local SIM = cuda.device(0).name:find("simulator") ~= nil

local s = cuda.stream()
local x, y = cuda.buffer("f32", N), cuda.buffer("f32", N)
local e0, e1 = cuda.event(), cuda.event()

-- The graph of a chain of n launches of kernel kind, programmatic or not.
local function chain(kind, n, programmatic)
  local k = m[kind]
  local kp = programmatic and k:config { programmatic = true } or k
  return s:capture(function()
    for i = 1, n do
      local kk = i == 1 and k or kp -- the first follows no kernel
      if kind == "empty" then
        kk:launch(s, 4, 128, x)
      else
        local from, to = x, y
        if i % 2 == 0 then from, to = y, x end
        kk:launch(s, N // 128, 128, from, to, 0.5, N)
      end
    end
  end)
end

-- µs a node of g's replays, and the buffers' contents after them.
local function time(g, n)
  local iters = QUICK and 2 or math.max(20, 20000 // n)
  x:fill(1, s)
  y:fill(0, s)
  g:replay(1, s)
  local t = {}
  for r = 1, REPS do
    e0:record(s)
    g:replay(iters, s)
    e1:record(s)
    t[r] = 1e3 * e1:elapsed(e0) / (iters * n)
  end
  s:synchronize()
  return stats.median(t), table.concat(x:download(), ",") .. ";"
    .. table.concat(y:download(), ",")
end

print(("%-24s %12s %14s %9s %7s"):format("chain", "us/node", "programmatic",
      "speed-up", "target"))
local met, rows = 0, 0
for _, kind in ipairs { "empty", "prologue" } do
  for _, n in ipairs { 10, 100, 1000 } do
    local g0, g1 = chain(kind, n, false), chain(kind, n, true)
    local _, detail = g1:nodes("detail")
    local edges = 0
    for _, d in ipairs(detail) do edges = edges + (d.programmatic and 1 or 0) end
    assert(edges == n - 1, ("%s, %d nodes: %d programmatic edges"):format(kind, n, edges))
    local plain, out0 = time(g0, n)
    local prog, out1 = time(g1, n)
    assert(out0 == out1, ("%s, %d nodes: the programmatic chain's results differ"):format(kind, n))
    local up = plain / prog
    local ok = kind == "empty" and prog <= plain * 1.005 or kind == "prologue" and up >= 1.2
    met, rows = met + (ok and 1 or 0), rows + 1
    print(("%-24s %12.3f %14.3f %8.2fx %7s"):format(("%s, %d nodes"):format(kind, n),
          plain, prog, up, ok and "met" or "missed"))
    g0:free()
    g1:free()
  end
end
print(("targets: %d of %d met (prologue chains >= 1.2x a node; empty chains at or "
  .. "below their ordinary floor, within 0.5%%)%s"):format(met, rows,
  SIM and "; not a GPU: the times are the simulator's" or ""))
