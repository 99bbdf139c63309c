-- frame.lua: the script examples/embed/engine.c runs. The engine hands it
-- two borrowed objects as globals: buf, its own f32 buffer, and stream, its
-- own CUDA stream. The first frame captures a graph on the engine's stream;
-- every frame sets a DeviceScalar and launches the graph, which adds
-- i + (j % 8) to buf[j] for frame i. shutdown() frees the graph, then calls
-- buf:free(), which only detaches the Lua object: the engine's memory stays.
-- luacheck: globals frame shutdown, read globals buf stream
local cuda = require "cugraph"

local m = cuda.compile([[
__global__ void advance(float *x, const unsigned *frame, int n) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j < n) x[j] += (float)(*frame + (unsigned)(j % 8));
}]], { name = "frame.cu" })

local n = #buf
local t = cuda.scalar("u32", 0)
local graph

function frame(i)
  if not graph then
    graph = stream:capture(function(s)
      m.advance:launch(s, (n + 255) // 256, 256, buf, t, n)
    end)
  end
  t:set(i)
  graph:launch()
end

function shutdown()
  -- A live graph pins what it captured: the buffer cannot be freed yet.
  local ok, err = pcall(buf.free, buf)
  assert(not ok and tostring(err):find("used by live cugraph.Graph"), err)
  graph:free()
  buf:free()
  assert(tostring(buf):find("freed"), tostring(buf))
  print("frame.lua: " .. graph:launches() .. " graph launches; buf freed on the "
        .. "Lua side (" .. tostring(buf) .. ")")
end
