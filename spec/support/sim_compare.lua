-- Runs every spec kernel and every example kernel once on fixed inputs and
-- writes what each leaves in its buffers to a file, as a Lua chunk that
-- returns { {case, buffer, type, bytes}, ... }. spec/71-sim_gpu_spec.lua
-- runs it on the GPU and on the simulator and compares the two.
--
--   cugraph-lua spec/support/sim_compare.lua OUT BUILD_DIR
--
-- Every module is loaded from PTX (the example sources through NVRTC for
-- sm_90), so both sides run the same PTX.
local cuda = require "cugraph"

local out_path, build = arg[1], arg[2] or "build"
local here = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/../.."

-- The CUDA C of each example: its script runs with cuda.compile stopping
-- it, as examples/check-kernels.lua does.
local STOP = setmetatable({}, { __tostring = function() return "stop" end })
local function example_source(script)
  local src
  package.loaded.cugraph = setmetatable({
    compile = function(source) src = source; error(STOP) end,
  }, { __index = function() error(STOP) end })
  package.preload.png = function() return {} end
  local saved = arg
  arg = { [0] = here .. "/examples/" .. script } -- luacheck: ignore 121
  local ok, err = pcall(dofile, arg[0])
  arg = saved -- luacheck: ignore 121
  package.loaded.cugraph = cuda
  assert(not ok and err == STOP and src, script .. ": no cuda.compile: " .. tostring(err))
  return src
end

local function load(source, name)
  return cuda.module(cuda.ptx(source, { arch = "sm_90", name = name }), name)
end

local s = cuda.stream()
local results = {}

-- Deterministic numbers in [0, 1).
local seed = 12345
local function rnd()
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed / 2147483648
end
local function reals(n, lo, hi)
  local t = {}
  for i = 1, n do t[i] = lo + (hi - lo) * rnd() end
  return t
end
local function ints(n, lo, hi)
  local t = {}
  for i = 1, n do t[i] = lo + math.floor((hi - lo + 1) * rnd()) end
  return t
end

-- Records the buffers of a case after it ran: bufs is { name = buffer }.
local function record(case, bufs)
  s:synchronize()
  local names = {}
  for name in pairs(bufs) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local b = bufs[name]
    results[#results + 1] = { case, name, b:type(), b:download("string") }
  end
end

-- The spec kernels -----------------------------------------------------------

local m = cuda.load_module(build .. "/kernels.ptx")
do
  local x, y = cuda.buffer("f32", reals(1000, -2, 2)), cuda.buffer("f32", reals(1000, -2, 2))
  m.saxpy:launch(s, 4, 256, 1.75, x, y, 1000)
  record("saxpy", { y = y })
  local y2 = cuda.buffer("f32", reals(1000, -2, 2))
  m._Z4axpyfPKfPfi:launch(s, 8, 128, -0.5, x, y2, 1000)
  record("axpy", { y = y2 })
  local u = cuda.buffer("u32", 700)
  m.iota_u32:launch(s, 3, 256, u, 4000000000, 700)
  record("iota_u32", { out = u })
  local f = cuda.buffer("f32", reals(300, 0, 1))
  m.add_scalar_f32:launch(s, 2, 256, f, cuda.scalar("f32", 0.375), 300)
  record("add_scalar_f32", { y = f })
  local mk = cuda.buffer("u32", 16):fill(0)
  m.mark_u32:launch(s, 1, 1, mk, cuda.scalar("u32", 5), 16)
  record("mark_u32", { out = mk })
  local xi = cuda.buffer("i32", ints(500, -1000, 1000))
  m.inc_i32:launch(s, 2, 256, xi, 500)
  record("inc_i32", { x = xi })
  local d, src = cuda.buffer("f64", 400), cuda.buffer("f64", reals(400, -1, 1))
  m.scale_f64:launch(s, 2, 256, d, src, 1.0 / 3.0, 400)
  record("scale_f64", { dst = d })
  local j = cuda.buffer("f64", 400)
  m.jacobi_f64:launch(s, 2, 256, j, src, 400)
  record("jacobi_f64", { out = j })
  local l, ls = cuda.buffer("i64", 300), cuda.buffer("i64", ints(300, -1000000, 1000000))
  m.add_i64:launch(s, 2, 256, l, ls, 1 << 40, 300)
  record("add_i64", { dst = l })
  local dm = cuda.buffer("u32", 2 * 3 * 4 * 4 * 2 * 2)
  m.dims_u32:launch(s, { 2, 3, 4 }, { 4, 2, 2 }, dm, 2 * 3 * 4 * 4 * 2 * 2)
  record("dims_u32", { out = dm })
  local sh = cuda.buffer("u32", 500)
  m.shared_u32:shared(256 * 4)
  m.shared_u32:launch(s, 2, 256, sh, 500)
  record("shared_u32", { out = sh })
  local ps = cuda.buffer("f64", 1)
  m.pair_sum:launch(s, 1, 1, ps, string.pack("<dd", 1.25, -7.5))
  record("pair_sum", { out = ps })
  m.noop:launch(s, 3, 64)
  record("noop", {})
  local count, c = cuda.buffer("u32", 1):fill(0), cuda.condition(1)
  s:capture(function()
    s:loop_while(c, function() m.count_to:launch(s, 1, 1, count, c, 12) end)
  end):launch()
  record("count_to", { x = count })
  local pick, hits, sc = cuda.buffer("u32", { 1 }), cuda.buffer("i32", 4):fill(0), cuda.condition(0)
  s:capture(function()
    m.set_cond:launch(s, 1, 1, sc, pick)
    s:branch(sc, function() m.inc_i32:launch(s, 1, 4, hits, 4) end)
  end):launch()
  record("set_cond", { x = hits })
end

-- The bench kernels ----------------------------------------------------------

do
  local f = assert(io.open(here .. "/bench/kernels.cu"))
  local bm = load(f:read("a"), "bench.cu")
  f:close()
  local x = cuda.buffer("i32", 256):fill(0)
  bm.args1:launch(s, 1, 256, x)
  bm.args2:launch(s, 1, 256, x, 3)
  bm.args4:launch(s, 1, 256, x, 1, 2, 3)
  bm.args8:launch(s, 1, 256, x, 1, 2, 3, 4, 5, 6, 7)
  bm.args16:launch(s, 1, 256, x, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
  local turns, c = cuda.buffer("u32", 1):fill(0), cuda.condition(1)
  s:capture(function()
    s:loop_while(c, function() bm.turn:launch(s, 1, 256, x, turns, 7, c) end)
  end):launch()
  record("bench", { x = x, turns = turns })
end

-- The examples' kernels ------------------------------------------------------

do -- model.lua: the MLP's layers and softmax
  local mm = load(example_source("model.lua"), "model.cu")
  local rows, k, n, n3 = 16, 40, 48, 10
  local xs = cuda.buffer("f32", reals(2 * rows * k, -1, 1))
  local batch = cuda.scalar("u32", 1)
  local w1, b1 = cuda.buffer("f32", reals(k * n, -0.2, 0.2)), cuda.buffer("f32", reals(n, -0.1, 0.1))
  local w2, b2 = cuda.buffer("f32", reals(n * n, -0.2, 0.2)), cuda.buffer("f32", reals(n, -0.1, 0.1))
  local w3, b3 = cuda.buffer("f32", reals(n * n3, -0.2, 0.2)), cuda.buffer("f32", reals(n3, -0.1, 0.1))
  local h1, h2, z = cuda.buffer("f32", rows * n), cuda.buffer("f32", rows * n), cuda.buffer("f32", rows * n3)
  local ps = cuda.buffer("f32", 2 * rows * n3):fill(-1)
  mm.dense_gelu_in:launch(s, { 3, 1 }, { 16, 16 }, xs, batch, w1, b1, h1, rows, k, n)
  mm.dense_relu:launch(s, { 3, 1 }, { 16, 16 }, h1, w2, b2, h2, rows, n, n)
  mm.dense_linear:launch(s, { 1, 1 }, { 16, 16 }, h2, w3, b3, z, rows, n, n3)
  mm.softmax_out:launch(s, 1, rows, z, batch, ps, rows, n3)
  record("model", { h1 = h1, h2 = h2, z = z, ps = ps })
end

do -- particles.lua: init, step, clear, splat, tonemap
  local pm = load(example_source("particles.lua"), "particles.cu")
  local n, w, h = 2000, 64, 64
  local pos, vel = cuda.buffer("f32", 2 * n), cuda.buffer("f32", 2 * n)
  pm.init:launch(s, 8, 256, pos, vel, n, 7)
  record("particles.init", { pos = pos, vel = vel })
  pm.step:launch(s, 8, 256, pos, vel, cuda.buffer("f32", { 1 / 60 }), cuda.buffer("u32", { 3 }), n)
  record("particles.step", { pos = pos, vel = vel })
  local density, rgba = cuda.buffer("u32", w * h):fill(7), cuda.buffer("u8", 4 * w * h)
  pm.clear:launch(s, 16, 256, density, w * h)
  pm.splat:launch(s, 8, 256, pos, density, n, w, h)
  pm.tonemap:launch(s, 16, 256, density, rgba, w * h, 0.4)
  record("particles.image", { density = density, rgba = rgba })
end

do -- graph.lua
  local gm = load(example_source("graph.lua"), "graph.cu")
  local n = 1000
  local x, y, z, o = cuda.buffer("f32", n), cuda.buffer("f32", n), cuda.buffer("f32", n),
                     cuda.buffer("f32", reals(n, 0, 1))
  gm.iota:launch(s, 4, 256, x, n)
  gm.square:launch(s, 4, 256, x, y, n)
  gm.scale:launch(s, 4, 256, x, z, 0.3, n)
  gm.combine:launch(s, 4, 256, y, z, o, n)
  record("graph", { x = x, y = y, z = z, out = o })
end

do -- cg.lua (solver.lua): start, step and, in a while node, step_loop
  local cm = load(dofile(here .. "/examples/cg.lua").source, "cg.cu")
  local n = 32
  local N = n * n
  local b = cuda.buffer("f64", reals(N, -1, 1))
  local x, p = cuda.buffer("f64", N), cuda.buffer("f64", N)
  local r, w, sb = cuda.buffer("f64", 2 * N), cuda.buffer("f64", 2 * N), cuda.buffer("f64", 2 * N)
  local d, sync, res = cuda.buffer("f64", 8):fill(0), cuda.buffer("u32", 2):fill(0), cuda.buffer("f64", 1)
  local blocks = (N + 255) // 256
  cm.start:launch(s, blocks, 256, b, x, p, r, w, sb, d, sync, res, n)
  for _ = 1, 3 do cm.step:launch(s, blocks, 256, x, p, r, w, sb, d, sync, res, n) end
  record("cg.step", { x = x, p = p, d = d, sync = sync, res = res })
  -- 40 turns of the while node on one block (tolerance 0 keeps it going:
  -- the count does not hang on rounding)
  n = 16
  N = n * n
  blocks = 1
  b = cuda.buffer("f64", reals(N, -1, 1))
  d:fill(0)
  sync:fill(0)
  cm.start:launch(s, blocks, 256, b, x, p, r, w, sb, d, sync, res, n)
  local c = cuda.condition(1)
  s:capture(function()
    s:loop_while(c, function()
      cm.step_loop:launch(s, blocks, 256, x, p, r, w, sb, d, sync, res, n, 0.0, 40, c)
    end)
  end):launch()
  record("cg.step_loop", { x = x, sync = sync, res = res })
end

do -- substeps.lua: fastest, plan, step, tick
  local sm = load(example_source("substeps.lua"), "substeps.cu")
  local n = 600
  local y, v = cuda.buffer("f64", reals(n, 0.2, 1)), cuda.buffer("f64", reals(n, -0.25, 0.25))
  local vmax, left = cuda.buffer("u64", 1):fill(0), cuda.buffer("u32", 1)
  local history, frame = cuda.buffer("u32", 4):fill(0), cuda.buffer("u32", { 2 })
  sm.fastest:launch(s, 3, 256, v, vmax, n)
  sm.plan:launch(s, 1, 1, vmax, left, history, frame, 1 / 60, 0.001, 8)
  local c = cuda.condition(1)
  s:capture(function()
    s:loop_while(c, function()
      sm.step:launch(s, 3, 256, y, v, history, frame, 1 / 60, -9.81, n)
      sm.tick:launch(s, 1, 1, left, c)
    end)
  end):launch()
  record("substeps", { y = y, v = v, vmax = vmax, left = left, history = history })
end

do -- embed/frame.lua
  local fm = load(example_source("embed/frame.lua"), "frame.cu")
  local x = cuda.buffer("f32", reals(300, 0, 10))
  fm.advance:launch(s, 2, 256, x, cuda.buffer("u32", { 9 }), 300)
  record("frame", { x = x })
end

local f = assert(io.open(out_path, "w"))
f:write("return {\n")
for _, r in ipairs(results) do
  f:write(("{%q, %q, %q, %q},\n"):format(r[1], r[2], r[3], r[4]))
end
f:write("}\n")
f:close()
print(("%d buffers written to %s"):format(#results, out_path))
