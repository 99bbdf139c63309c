-- The binding's own host instructions a call, on the test double under
-- callgrind: deterministic, so two builds compare without a GPU, where
-- bench.lua's times need one. For each case, callgrind counts the
-- instructions of two runs of its loop (n1 and n2 iterations), once in
-- all and once only inside the driver's cu* entry points; the difference
-- per iteration is the interpreter's and the binding's (the bare row: the
-- same Lua loop calling a C method that does nothing, the interpreter's
-- alone). From the repository root (make bench-ir does this):
--   build/cugraph-lua bench/ir.lua [case ...]
-- With --run CASE N it runs one case's loop N times (callgrind's child).
local here = arg[0]:match("^(.*)/[^/]*$") or "."
local build = os.getenv("CUGRAPH_LUA_BUILD") or here .. "/../build"
local N1, N2 = 200, 2200

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

if arg[1] == "--run" then
  package.cpath = build .. "/bench/?.so;" .. package.cpath
  local cuda = require "cugraph"
  local m = cuda.load_module(build .. "/kernels.ptx")
  local inc, s, n = m.inc_i32, cuda.stream(), 256
  local x, ra, rb = cuda.buffer("i32", n), cuda.buffer("i32", n),
    cuda.buffer("i32", n)
  local pos = cuda.scalar("u32", 0)
  local function capture(k)
    local function fn() for _ = 1, k do inc:launch(s, 1, n, x, n) end end
    return function(iters)
      local st, f = s, fn
      for _ = 1, iters do st:capture(f):free() end
    end
  end
  local g1 = s:capture(function() inc:launch(s, 1, n, x, n) end)
  local g10 = s:capture(function()
    for _ = 1, 9 do inc:launch(s, 1, n, x, n) end
    inc:launch(s, 1, n, ra, n)
  end)
  local nothing = require("ref").nothing()
  -- K inc_i32 on one buffer, the buffer alternating call by call: graphed,
  -- and eagerly (bench.lua's graphedK and eagerkK rows)
  local function alt(k, graphed)
    local function fn(st, b) for _ = 1, k do inc:launch(st, 1, n, b, n) end end
    local f = graphed and cuda.graphed(fn) or fn
    local bufs = {ra, rb}
    if graphed then f(s, ra) end
    return function(iters)
      local call, st, b = f, s, bufs
      for i = 1, iters do call(st, b[i % 2 + 1]) end
    end
  end
  local loops = {
    eager = function(iters)
      local k, st, buf, len = inc, s, x, n
      for _ = 1, iters do k:launch(st, 1, len, buf, len) end
    end,
    bare = function(iters)
      local k, st, buf, len = nothing, s, x, n
      for _ = 1, iters do k:launch(st, 1, len, buf, len) end
    end,
    replay1 = function(iters)
      local gr = g1
      for _ = 1, iters do gr:launch() end
    end,
    scalar = function(iters)
      local gr, sc = g1, pos
      for i = 1, iters do sc:set(i); gr:launch() end
    end,
    capture1 = capture(1), capture10 = capture(10), capture100 = capture(100),
    -- made only when their case runs: a graphed function's graph pins ra,
    -- which would make the rebind case's pin set take its slow path
    graphed10 = function(iters) alt(10, true)(iters) end,
    graphed100 = function(iters) alt(100, true)(iters) end,
    eager10 = alt(10, false), eager100 = alt(100, false),
    rebind = function(iters) -- bench.lua's rebind0: one node of ten
      local gr, cur, other = g10, ra, rb
      for _ = 1, iters do
        gr:rebind(cur, other)
        cur, other = other, cur
      end
    end,
  }
  local loop = assert(loops[arg[2]], "no such case")
  loop(math.tointeger(tonumber(arg[3])))
  s:synchronize()
  return
end

local CASES = {"bare", "eager", "replay1", "scalar", "rebind", "capture1",
               "capture10", "capture100", "graphed10", "eager10",
               "graphed100", "eager100"}
local LUA = build .. "/cugraph-lua"
local DOUBLE = build .. "/libcuda-double.so"

-- Instructions callgrind collected for case c run n times (only: only
-- inside the functions that pattern names, e.g. the driver's "cu*").
local function collected(c, n, only)
  local toggles = ""
  for f in (only or ""):gmatch("%S+") do
    toggles = toggles .. "--toggle-collect=" .. f .. " "
  end
  local cmd = ("CUGRAPH_LUA_LIBCUDA=%s CUGRAPH_LUA_BUILD=%s valgrind "
    .. "--tool=callgrind --callgrind-out-file=/dev/null %s%s %s --run %s %d "
    .. "2>&1"):format(q(DOUBLE), q(build), toggles, q(LUA), q(arg[0]), c, n)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  local got = out:match("Collected : (%d+)")
  if not got then error(c .. ": callgrind failed:\n" .. out, 0) end
  return tonumber(got)
end

-- Per iteration: the difference between N2 and N1 iterations.
local function per(c, only)
  return (collected(c, N2, only) - collected(c, N1, only)) / (N2 - N1)
end

local want = #arg > 0 and arg or CASES
print(("%-12s %12s %12s %12s"):format("case", "all/it", "driver/it",
                                      "binding/it"))
local binding = {}
for _, c in ipairs(want) do
  local all, driver = per(c), per(c, "cu*")
  binding[c] = all - driver
  print(("%-12s %12.0f %12.0f %12.0f"):format(c, all, driver, all - driver))
end

-- Capture + instantiate, a node: the binding's instructions a node past
-- the tenth (capture100 less capture10, over 90), less the interpreter's
-- call (bare) and the line lookup (lua_getstack and lua_getinfo, which
-- the capture calls once a node). What stays is the binding's own,
-- argument reads included (inlined in the launch: callgrind cannot part
-- them). Target: at most 400.
if binding.capture10 and binding.capture100 and binding.bare then
  local node = (binding.capture100 - binding.capture10) / 90
  local lookup = (per("capture100", "lua_getstack lua_getinfo")
    - per("capture10", "lua_getstack lua_getinfo")) / 90
  local own = node - binding.bare - lookup
  print(("capture, a node: %.0f binding instructions = %.0f the "
    .. "interpreter's call + %.0f the line lookup + %.0f its own, argument "
    .. "reads included (target at most 400: %s)"):format(node, binding.bare,
    lookup, own, own <= 400 and "met" or "MISS"))
end
