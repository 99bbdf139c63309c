-- trade.lua: the script examples/embed/dlpack.c runs. The engine hands it
-- `field`, a Buffer over a DLPack tensor of the engine's memory (H x W
-- f32, which the Buffer owns: the engine's deleter runs when it goes).
-- setup() captures a graph that adds 1 to every element of the field and
-- writes its row sums, times the step, into `sums`, a buffer of the
-- script's own; step(i) sets the step and replays the graph; finish()
-- frees the graph and the field (the engine's deleter runs then) and
-- returns `sums` for the engine to take as a DLPack tensor.
-- luacheck: globals setup step finish, read globals field
local cuda = require "cugraph"

local m = cuda.compile([[
__global__ void bump(float *x, int n) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j < n) x[j] += 1.0f;
}
__global__ void row_sums(float *out, const float *x, const unsigned *k,
                         int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float s = 0.0f;
  for (int c = 0; c < cols; c++) s += x[r * cols + c];
  out[r] = s * (float)*k;
}]], { name = "trade.cu" })

local rows, cols = field:shape()
local n = #field
local s = cuda.stream()
local k = cuda.scalar("u32", 0)
local sums = cuda.buffer("f32", rows):fill(0)
local graph

function setup()
  assert(rows * cols == n, "the shape is the tensor's")
  graph = s:capture(function()
    m.bump:launch(s, (n + 255) // 256, 256, field, n)
    m.row_sums:launch(s, (rows + 127) // 128, 128, sums, field, k, rows, cols)
  end)
end

function step(i)
  k:set(i)
  graph:launch()
end

function finish()
  s:synchronize()
  -- a live graph pins the field: freeing it is refused, its tensor kept
  local ok, err = pcall(field.free, field)
  assert(not ok and tostring(err):find("used by live cugraph.Graph"), err)
  graph:free()
  field:free() -- the engine's deleter runs here
  print(("trade.lua: %d launches on a %dx%d field; returning sums[%d]")
        :format(graph:launches(), rows, cols, #sums))
  local out = sums
  sums = nil
  return out
end
