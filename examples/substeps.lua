-- A frame loop whose number of simulation sub-steps is chosen on the device
-- each frame: a kernel finds the fastest particle and picks enough
-- sub-steps that none moves more than MAXMOVE in one (a CFL rule), and a
-- while node runs them; the host only sets the frame number and launches.
--
--   cugraph-lua examples/substeps.lua [frames [particles]]   (240, 4096)
--
-- Particles fall under gravity and bounce on the floor with some loss. The
-- run is checked against the same simulation in Lua (double precision
-- both): the sub-step counts must match exactly, positions to 1e-9.
local cuda = require "cugraph"

local FRAMES = math.tointeger(tonumber(arg[1] or "240"))
local NP = math.tointeger(tonumber(arg[2] or "4096"))
local DT, G, MAXMOVE, MAXSUB = 1 / 60, -9.81, 0.01, 64

local m = cuda.compile([[
#include <cuda_device_runtime_api.h> // cudaGraphSetConditional
extern "C" __global__ void fastest(const double *v, unsigned long long *vmax, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicMax(vmax, __double_as_longlong(fabs(v[i]))); // v >= 0 as bits
}
// sub-steps of this frame: the least k with vmax * dt / k <= maxmove
extern "C" __global__ void plan(const unsigned long long *vmax, unsigned *left,
                                unsigned *history, const unsigned *frame,
                                double dt, double maxmove, unsigned maxsub) {
  double v = __longlong_as_double((long long)*vmax);
  unsigned k = (unsigned)ceil(v * dt / maxmove);
  k = k < 1 ? 1 : k > maxsub ? maxsub : k;
  *left = k;
  history[*frame] = k;
}
extern "C" __global__ void step(double *y, double *v, const unsigned *history,
                                const unsigned *frame, double dt, double g, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double h = dt / history[*frame];
  double vi = v[i] + g * h, yi = y[i] + vi * h;
  if (yi < 0) { yi = -yi; vi = -0.9 * vi; }
  y[i] = yi;
  v[i] = vi;
}
// one sub-step done; the loop goes on while some are left
extern "C" __global__ void tick(unsigned *left, cudaGraphConditionalHandle h) {
  unsigned k = --*left;
  cudaGraphSetConditional(h, k != 0);
}
]], { name = "substeps.cu" })

local y0, v0 = {}, {}
for i = 1, NP do
  y0[i] = 0.2 + 0.8 * ((i * 7919) % NP) / NP
  v0[i] = 0.5 * (((i * 104729) % 1000) / 1000 - 0.5)
end

local s = cuda.stream()
local y, v = cuda.buffer("f64", y0), cuda.buffer("f64", v0)
local vmax = cuda.buffer("u64", 1)
local left = cuda.buffer("u32", 1)
local history = cuda.buffer("u32", FRAMES):fill(0)
local frame = cuda.scalar("u32", 0)
local c = cuda.condition(1)
local grid = (NP + 255) // 256

local g = s:capture(function()
  vmax:fill(0, s)
  m.fastest:launch(s, grid, 256, v, vmax, NP)
  m.plan:launch(s, 1, 1, vmax, left, history, frame, DT, MAXMOVE, MAXSUB)
  s:loop_while(c, function()
    m.step:launch(s, grid, 256, y, v, history, frame, DT, G, NP)
    m.tick:launch(s, 1, 1, left, c)
  end)
end)

local t0, t1 = cuda.event(), cuda.event()
t0:record(s)
for f = 0, FRAMES - 1 do
  frame:set(f)
  g:launch()
end
t1:record(s)
local ms = t1:elapsed(t0)

-- the same in Lua
local ys, vs, hist = {}, {}, {}
for i = 1, NP do ys[i], vs[i] = y0[i], v0[i] end
for f = 1, FRAMES do
  local top = 0
  for i = 1, NP do top = math.max(top, math.abs(vs[i])) end
  local k = math.max(1, math.min(MAXSUB, math.ceil(top * DT / MAXMOVE)))
  hist[f] = k
  local h = DT / k
  for _ = 1, k do
    for i = 1, NP do
      local vi = vs[i] + G * h
      local yi = ys[i] + vi * h
      if yi < 0 then yi, vi = -yi, -0.9 * vi end
      ys[i], vs[i] = yi, vi
    end
  end
end

local got, yd = history:download(), y:download()
local total, ok = 0, true
for f = 1, FRAMES do
  total = total + got[f]
  if got[f] ~= hist[f] then ok = false end
end
local err = 0
for i = 1, NP do err = math.max(err, math.abs(yd[i] - ys[i])) end
print(("%d frames of %d particles: %d sub-steps (%d..%d a frame), %.1f us a frame, max position error %.1e")
  :format(FRAMES, NP, total, math.min(table.unpack(got)), math.max(table.unpack(got)),
          ms * 1e3 / FRAMES, err))
if not ok or err > 1e-9 then
  print("FAILED: the device run differs from the Lua reference")
  os.exit(1, true)
end
