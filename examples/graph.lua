-- graph.lua: a multi-stream pipeline captured into one CUDA graph. The main
-- stream makes the input, two side streams fork from it (side:wait(s)) and
-- work in parallel, and the main stream joins them (s:wait(side)) before
-- combining their results:
--
--   reset (memset) -> iota -> square (side 1) --> combine
--                          \-> scale  (side 2) -/
--
-- Prints the graph's nodes, writes its Graphviz description with g:dot and,
-- when Graphviz is installed, renders it to PNG. Checks the result of a
-- replay in Lua and exits 1 on a mismatch.
--
--   cugraph-lua examples/graph.lua [out.dot]
local cuda = require "cugraph"

local N = 1 << 16
local path = arg and arg[1] or "graph.dot"

local m = cuda.compile([[
__global__ void iota(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = (float)i;
}

__global__ void square(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * x[i];
}

__global__ void scale(const float *x, float *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}

// out += a + b: out was reset by the memset at the start of the graph.
__global__ void combine(const float *a, const float *b, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] += a[i] + b[i];
}
]], { name = "pipeline.cu" })

local s, side1, side2 = cuda.stream(), cuda.stream(), cuda.stream()
local x, sq, sc = cuda.buffer("f32", N), cuda.buffer("f32", N), cuda.buffer("f32", N)
local out = cuda.buffer("f32", N)
local grid, block = (N + 255) // 256, 256

local g = s:capture(function()
  out:fill(0, s)
  m.iota:launch(s, grid, block, x, N)
  side1:wait(s) -- fork: the side streams join the capture after iota
  side2:wait(s)
  m.square:launch(side1, grid, block, x, sq, N)
  m.scale:launch(side2, grid, block, x, sc, 3, N)
  s:wait(side1) -- join: combine waits for both branches
  s:wait(side2)
  m.combine:launch(s, grid, block, sq, sc, out, N)
end)

local count, kinds = g:nodes()
print(("graph: %d nodes: %s"):format(count, table.concat(kinds, ", ")))

g:launch()
g:launch() -- a replay starts from the memset again, so twice is like once
-- The expected values, rounded to f32 where the kernels round.
local function f32(v) return (string.unpack("<f", string.pack("<f", v))) end
local y, bad = out:download(), 0
for i = 0, N - 1 do
  if y[i + 1] ~= f32(f32(i * i) + 3 * i) then bad = bad + 1 end
end
print(("result: %d of %d elements wrong"):format(bad, N))

g:dot(path)
print("wrote " .. path)
local image = path:gsub("%.dot$", "") .. ".png"
if os.execute("command -v dot >/dev/null 2>&1") then
  local function quote(str) return "'" .. str:gsub("'", "'\\''") .. "'" end
  if os.execute(("dot -Tpng %s -o %s"):format(quote(path), quote(image))) then
    print("wrote " .. image)
  else
    print("dot failed to render " .. path)
  end
else
  print(("Graphviz not installed: render with `dot -Tpng %s -o %s`"):format(path, image))
end

if bad > 0 then os.exit(1, true) end
print("ok")
