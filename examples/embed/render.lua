-- render.lua: the script examples/embed/render.c runs. The engine gives it
-- globals: stream (its CUDA stream, borrowed), VBO (the name of its GL
-- buffer object of 2 * N floats, the points it draws), N, KERNEL (a CUDA
-- source file the engine may rewrite while it runs) and PNG_PATH (where
-- build/examples/png.so is). The script compiles KERNEL, captures one step
-- of the simulation into a graph and hands the graph and its dt scalar to
-- the engine (setup() returns them), which replays it from C every frame.
-- poll() reloads KERNEL when the file changed: the engine's C graph
-- switches to the new code. present() writes the particles into the GL
-- buffer, device to device, inside a map scope; stamp() copies a mark into
-- the framebuffer's renderbuffer (RBO), mapped as an Array; save() writes a
-- PNG.
-- luacheck: globals setup poll present stamp save shutdown
-- luacheck: read globals stream VBO RBO N KERNEL PNG_PATH
local cuda = require "cugraph"
package.cpath = PNG_PATH .. "/?.so;" .. package.cpath
local png = require "png"

local function compile(path)
  local f = assert(io.open(path, "rb"))
  local src = f:read("a")
  f:close()
  return cuda.ptx(src, { name = path })
end

local m = cuda.module(compile(KERNEL), KERNEL)
local pos = cuda.buffer("f32", 2 * N)
local vel = cuda.buffer("f32", 2 * N)
local ticks = cuda.buffer("u32", 1):fill(0)
local dt = cuda.scalar("f32", 1 / 60)
local vbo = cuda.gl_buffer(VBO, "f32", "write_discard")
local image = cuda.gl_image(RBO, "renderbuffer")
local MARK = 16
local mark = cuda.buffer("u8", MARK * MARK * 4)
do -- opaque magenta
  local t = {}
  for i = 0, MARK * MARK - 1 do t[4 * i + 1], t[4 * i + 2], t[4 * i + 3], t[4 * i + 4] = 255, 0, 255, 255 end
  mark:upload(t)
end
local reloads, failures = 0, 0

local watch = cuda.watch(KERNEL, function(path)
  m:reload(compile(path), path)  -- a compile error raises: old code stays
  reloads = reloads + 1
end)

function setup()
  m.init:launch(stream, (N + 255) // 256, 256, pos, vel, N)
  local graph = stream:capture(function(s)
    m.step:launch(s, (N + 255) // 256, 256, pos, vel, dt, ticks, N)
  end)
  return graph, dt
end

function poll()
  local ok, err = watch()
  if ok == false then
    failures = failures + 1
    io.stderr:write("render.lua: reload failed, the old code keeps running:\n",
                    tostring(err), "\n")
  elseif ok then
    print("render.lua: reloaded " .. KERNEL)
  end
end

function present()
  vbo:map(stream, function(points) points:copy(pos, stream) end)
end

function stamp()
  image:map(stream, function(a) a:copy2d(mark, MARK, MARK, { stream = stream }) end)
end

function save(path, w, h, rgba)
  png.write(path, w, h, rgba)
end

-- The kernels' tick count, reloads and failed reloads.
function shutdown()
  stream:synchronize()
  local t = ticks:download()[1]
  vbo:free()
  image:free()
  return t, reloads, failures
end
