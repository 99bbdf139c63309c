-- frameloop.lua: the script of examples/embed/frameloop.c, an engine's
-- frame as one graph. The engine hands it two page-locked u64 counters of
-- its own, go and done, and its stream. The frame graph waits until go
-- reaches the frame number (a Scalar gives it at each launch), runs 48
-- kernels and writes the frame number to done: 50 nodes, fenced by the
-- engine's counters, replayed by C (cugraph_graph_launch) or by the
-- script (frame(f)).
-- luacheck: globals frame check graph value, read globals go done stream
local cuda = require "cugraph"

local KERNELS, N = 48, 32
-- named as the spec kernel whose host twin the software driver's test
-- double runs (spec/kernels/kernels.cu); the simulator and a GPU run this
local m = cuda.compile([[
extern "C" __global__ void inc_i32(int *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1;
}]], { name = "frameloop.cu" })

local x = cuda.buffer("i32", N):fill(0)
value = cuda.scalar("u64", 0)
graph = stream:capture(function(s)
  s:wait_value(go, value)
  for _ = 1, KERNELS do m.inc_i32:launch(s, 1, N, x, N) end
  s:write_value(done, value)
end)

-- one frame replayed by the script
function frame(f)
  value:set(f)
  graph:launch()
end

-- after `frames` frames in all: the kernels ran once a frame, the last
-- frame wrote its number; returns the graph's nodes
function check(frames)
  stream:synchronize()
  local got = x:download("table", 0, 1)[1]
  assert(got == KERNELS * frames, ("x[0] = %d after %d frames, expected %d")
         :format(got, frames, KERNELS * frames))
  assert(done[0] == frames, ("done = %d, expected %d"):format(done[0], frames))
  return (graph:nodes("detail"))
end
