-- Conjugate gradient on the 2-D Poisson problem (the 5-point Laplacian on
-- an n x n grid, zero on the boundary), run to convergence on the device in
-- one g:launch(): the iteration, one kernel (examples/cg.lua), is the body
-- of a while node, and the kernel clears the condition once the residual
-- is small enough. The same kernels then run host-driven (one graph launch
-- per iteration, the residual read back each time), for comparison.
--
--   cugraph-lua examples/solver.lua [n [tolerance [profile]]]  (default 256, 1e-10)
--   cugraph-lua examples/solver.lua --lua [n [tolerance]]
--
-- With "profile" the device loop's graph is profiled afterwards
-- (g:profile by stamps, 5 replays): its nodes, the while loop's among
-- them, and the body's kernels with their lines, each summed over its turns.
--
-- With --lua the same iterations run in Lua on the host instead (no GPU;
-- slow past n = 64): the iteration counts of the two should agree.
--
-- At the default size, the one `make bench` times, the 256 blocks of 256
-- threads of an iteration all fit on an H200 at once; 1024 runs too
-- (run-all.sh runs both). The right-hand side is A u* for a known u*, so
-- the answer is checked exactly: max |u - u*| / max |u*| must be below
-- 1e-5. Exits 1 otherwise.
local here = arg[0]:match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local cg = require "cg"

local lua_only = arg[1] == "--lua"
local first = lua_only and 2 or 1
local n = math.tointeger(tonumber(arg[first] or "256"))
local tol = tonumber(arg[first + 1] or "1e-10")
assert(n and n >= 8, "n: an integer of at least 8")
local MAXIT = 20 * n + 1000
local ustar, b = cg.problem(n)

-- Prints a run's line; returns max |u - u*| / max |u*|.
local function report(label, iters, res, u)
  local err, big = 0, 0
  for i = 1, n * n do
    err = math.max(err, math.abs(u[i] - ustar[i]))
    big = math.max(big, math.abs(ustar[i]))
  end
  print(("%-12s %6d iterations, relative residual %.2e, max error %.2e"):format(label, iters, res, err / big))
  return err / big
end

if lua_only then
  local u, iters, res = cg.host(n, b, tol, MAXIT)
  if report("Lua", iters, res, u) >= 1e-5 or iters >= MAXIT then
    print("FAILED: the answer does not match u*")
    os.exit(1, true)
  end
  return
end

local solver = cg.new(n, b, tol, MAXIT)
local cuda = require "cugraph"
local s = solver.stream

local t0, t1 = cuda.event(), cuda.event()
solver.solve:launch() -- warm-up
s:synchronize()
t0:record(s)
solver.solve:launch()
t1:record(s)
local device_ms = t1:elapsed(t0)
local iters = solver.iterations()
local err = report("device loop", iters, solver.res:get(), solver.x:download())

solver.drive() -- warm-up
t0:record(s)
local host_iters = solver.drive()
t1:record(s)
local host_ms = t1:elapsed(t0)
local herr = report("host loop", host_iters, solver.res:get(), solver.x:download())

-- on the simulator, the times are its own clock's: the ratio is not a GPU's
local sim = cuda.device().name:find("simulator") and " (the PTX simulator's clock, not a GPU's)" or ""
print(("%dx%d Poisson, CG to %.0e: device loop %.2f ms (%.2f us/iteration), "
       .. "host-driven %.2f ms (%.2f us/iteration): %.1fx%s"):format(n, n, tol,
  device_ms, device_ms * 1e3 / iters, host_ms, host_ms * 1e3 / host_iters,
  host_ms / device_ms, sim))
if arg[first + 2] == "profile" then
  print(solver.solve:profile(5)) -- a profile prints as its report
end
local ok = err < 1e-5 and herr < 1e-5 and iters == host_iters and iters < MAXIT
if not ok then
  print("FAILED: the answer does not match u*, or the two loops differ")
  os.exit(1, true)
end
