-- The benchmarks: each case's loop in Lua through the binding, against the
-- same driver calls made directly in C (build/bench-ref), in one table. From
-- the repository root (make bench does this):
--   build/cugraph-lua bench/bench.lua [--quick] [--markdown]
-- Both sides time the loop plus a final stream synchronize with
-- CLOCK_MONOTONIC and report microseconds per iteration, the median of R
-- runs after W untimed ones. Steady loops run with the collector stopped, so
-- their Lua allocation per iteration (which must be 0) is exact.
local here = arg[0]:match("^(.*)/[^/]*$") or "."
local build = os.getenv("CUGRAPH_LUA_BUILD") or here .. "/../build"
package.cpath = build .. "/bench/?.so;" .. package.cpath
local now = require("clock").now
local ref = require("ref") -- the C side of each case, in this process
local cuda = require "cugraph"

local quick, markdown, child_arch = false, false, nil
do
  local i = 1
  while arg[i] do
    local a = arg[i]
    if a == "--quick" then
      quick = true
    elseif a == "--markdown" then
      markdown = true
    elseif a == "--compile-child" then -- internal: see compile_child
      child_arch = math.tointeger(tonumber(arg[i + 1] or ""))
      if not child_arch then error("--compile-child: expected an arch", 0) end
      i = i + 1
    else
      io.stderr:write("usage: cugraph-lua bench/bench.lua [--quick] ",
                      "[--markdown]\n")
      os.exit(2)
    end
    i = i + 1
  end
end

local R = quick and 3 or 5            -- timed runs; the median is reported
local W = 1                           -- untimed warm-up runs before them
local N = quick and 100 or 10000      -- iterations of a launch loop
local NCAPTURE = quick and 10 or 2000 -- iterations of capture + instantiate
local NCACHED = quick and 10 or 200   -- compiles served from the cache
local SOURCE = here .. "/../spec/kernels/kernels.cu" -- what NVRTC compiles
local LUA = build .. "/cugraph-lua"
local REF = build .. "/bench-ref"
local PTX = build .. "/kernels.ptx"

local function q(str) return "'" .. str:gsub("'", "'\\''") .. "'" end

local function median(t)
  table.sort(t)
  local k = #t
  return k % 2 == 1 and t[(k + 1) // 2] or (t[k // 2] + t[k // 2 + 1]) / 2
end

-- Runs a shell command; returns its output, or nil and a message.
local function run(cmd)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = p:read("a")
  local ok, _, code = p:close()
  if ok then return out end
  return nil, ("%s: exit %s\n%s"):format(cmd, tostring(code), out)
end

-- The values of the "name value" lines of a child's output.
local function values(out)
  local t = {}
  for k, v in out:gmatch("(%S+) (%S+)") do t[k] = tonumber(v) end
  return t
end

local s -- the stream of the GPU cases; nil in the compile child

-- Microseconds per iteration of loop(iters), the final synchronize of s
-- included, and for a steady loop (run with the collector stopped) the Lua
-- bytes it allocated per iteration.
local function timed(loop, iters, steady)
  collectgarbage("collect")
  if steady then collectgarbage("stop") end
  local kb = collectgarbage("count")
  local t0 = now()
  loop(iters)
  if s then s:synchronize() end
  local t = now() - t0
  local bytes = (collectgarbage("count") - kb) * 1024 / iters
  collectgarbage("restart")
  return t * 1e6 / iters, steady and bytes or nil
end

-- The median of R timed runs after W untimed ones, and the most bytes per
-- iteration any run allocated (steady loops).
local function measure(loop, iters, steady)
  for _ = 1, W do timed(loop, iters, steady) end
  local t, most = {}, nil
  for r = 1, R do
    local us, bytes = timed(loop, iters, steady)
    t[r] = us
    if bytes then most = math.max(most or 0, bytes) end
  end
  return median(t), most
end

-- The compile cases, in a child whose XDG_CACHE_HOME is a fresh directory:
-- compiles without the cache, then compiles the cache serves after one warm
-- compile wrote the entry. Prints "compile_cold US" and "compile_cached US".
local function compile_child(arch)
  local f = assert(io.open(SOURCE, "rb"))
  local src = f:read("a")
  f:close()
  local cold_ptx, hit
  local cold = measure(function(iters)
    for _ = 1, iters do
      cold_ptx = cuda.ptx(src, {arch = arch, cache = false})
    end
  end, 1, false)
  local dir = cuda.compile_cache_dir()
  assert(dir == os.getenv("XDG_CACHE_HOME") .. "/cugraph-lua",
         "compile: the cache is not in XDG_CACHE_HOME")
  cuda.ptx(src, {arch = arch})
  assert(assert(run("ls " .. q(dir))):find("%.ptx\n"),
         "compile: no cache entry written")
  local cached = measure(function(iters)
    for _ = 1, iters do hit = cuda.ptx(src, {arch = arch}) end
  end, NCACHED, false)
  assert(hit == cold_ptx, "compile: the cache served other PTX")
  print(("compile_cold %.17g\ncompile_cached %.17g"):format(cold, cached))
end

if child_arch then return compile_child(child_arch) end

-- -- the GPU cases --------------------------------------------------------

local dev = cuda.device()
local m = cuda.module(PTX)
local inc, mark = m.inc_i32, m.mark_u32
s = cuda.stream()
local n = 256                       -- elements; one block of n threads
local x = cuda.buffer("i32", n)     -- inc_i32 adds 1 to each element
local out = cuda.buffer("u32", n)   -- mark_u32 writes out[pos] = pos + 1
local pos = cuda.scalar("u32", 0)
local g                             -- the graph of the case being run

-- nodes launches of inc_i32, then mark_u32 reading pos when with_mark.
local function graph(nodes, with_mark)
  return s:capture(function()
    for _ = 1, nodes do inc:launch(s, 1, n, x, n) end
    if with_mark then mark:launch(s, 1, 1, out, pos, n) end
  end)
end

local function ten() for _ = 1, 10 do inc:launch(s, 1, n, x, n) end end

local function launches(iters)
  local gr = g
  for _ = 1, iters do gr:launch() end
end

-- ref: bench-ref's case (the C side); nodes: inc_i32 nodes of the case's
-- graph; incs: inc_i32 launches per iteration (the check of the result);
-- steady: a loop that must allocate no Lua memory.
local cases = {
  {ref = "eager", label = "eager launch, inc_i32 chain", target = 1.10,
   iters = N, incs = 1, steady = true, loop = function(iters)
     local k, st, buf, len = inc, s, x, n
     for _ = 1, iters do k:launch(st, 1, len, buf, len) end
   end},
  {ref = "graph1", label = "graph replay, 1 node", target = 1.05, iters = N,
   nodes = 1, incs = 1, steady = true, loop = launches},
  {ref = "graph10", label = "graph replay, 10 nodes", target = 1.05,
   iters = N, nodes = 10, incs = 10, steady = true, loop = launches},
  {ref = "graph100", label = "graph replay, 100 nodes", target = 1.05,
   iters = N, nodes = 100, incs = 100, steady = true, loop = launches},
  {ref = "graph10", label = "g:replay(n), 10 nodes", target = 1.05,
   iters = N, nodes = 10, incs = 10, steady = true,
   loop = function(iters) g:replay(iters) end},
  {ref = "scalar", label = "scalar set + replay, 10 nodes", target = 1.03,
   iters = N, nodes = 9, mark = true, incs = 9, steady = true,
   loop = function(iters)
     local gr, sc = g, pos
     for i = 1, iters do sc:set(i); gr:launch() end
   end},
  {ref = "capture", label = "capture + instantiate, 10 nodes", target = 1.25,
   iters = NCAPTURE, incs = 0, loop = function(iters)
     local st, fn = s, ten
     for _ = 1, iters do st:capture(fn):free() end
   end},
}

-- One timed run of the C side of case c (after W untimed ones), in this
-- process: bench/ref.c's loop with its own objects in the same context.
local function c_once(c)
  return ref.run(c.ref, PTX, c.iters, W)
end

-- Runs c in C and in Lua, one repeat of each in turn so that both sides
-- see the same GPU state (clocks, other load), and checks the Lua side's
-- work ran. Returns the medians and the most Lua bytes per iteration.
local function run_case(c)
  x:fill(0)
  out:fill(0)
  if c.nodes then g = graph(c.nodes, c.mark) end
  local ct, lt, most = {}, {}, nil
  for r = 1, R do
    ct[r] = c_once(c) -- W untimed runs, then one timed, as here:
    for _ = 1, W do timed(c.loop, c.iters, c.steady) end
    local us, bytes = timed(c.loop, c.iters, c.steady)
    lt[r] = us
    if bytes then most = math.max(most or 0, bytes) end
  end
  local want = c.incs * c.iters * (W + 1) * R
  local got = x:download("table", 0, 1)[1]
  if got ~= want then
    error(("%s: x[0] is %d, not %d inc_i32 launches"):format(c.label, got,
                                                             want), 0)
  end
  if c.mark and (pos:get() ~= c.iters or out:download("table", 1, 1)[1] ~= 2)
  then
    error(c.label .. ": the graph did not see the scalar's values", 0)
  end
  if g then g:free() end
  g = nil
  return median(ct), median(lt), most
end

local rows, notes = {}, {}

for _, c in ipairs(cases) do
  local cu, lu, bytes = run_case(c)
  rows[#rows + 1] = {label = c.label, c = cu, lua = lu, target = c.target,
                     bytes = bytes}
end

-- -- process start to the first kernel result ----------------------------

-- Microseconds the shell command takes; it must succeed.
local function wall(cmd)
  local t0 = now()
  local ok, _, code = os.execute(cmd)
  local t = now() - t0
  if not ok then error(("%s: exit %s"):format(cmd, tostring(code)), 0) end
  return t * 1e6
end

local function cold(cmd)
  for _ = 1, W do wall(cmd) end
  local t = {}
  for r = 1, R do t[r] = wall(cmd) end
  return median(t)
end

rows[#rows + 1] = {
  label = "cold start to first result",
  c = cold(("%s --cold --ptx %s"):format(q(REF), q(PTX))),
  lua = cold(("%s %s %s"):format(q(LUA), q(here .. "/cold.lua"), q(PTX))),
}
notes[#notes + 1] = "cold start: one process per iteration, from the shell "
  .. "(build/cugraph-lua bench/cold.lua against bench-ref --cold)"

-- -- NVRTC ------------------------------------------------------------------

local arch = dev.major * 10 + dev.minor
local c_compile, c_err = run(("%s --case compile --source %s --arch %d "
                              .. "--n 1 --repeats %d --warmup %d"):format(
                             q(REF), q(SOURCE), arch, R, W))
local tmp = os.tmpname()
os.remove(tmp)
assert(os.execute("mkdir -m 700 " .. q(tmp)))
local l_compile, l_err = run(("XDG_CACHE_HOME=%s %s %s %s--compile-child %d")
                             :format(q(tmp), q(LUA), q(arg[0]),
                                     quick and "--quick " or "", arch))
os.execute("rm -rf " .. q(tmp))
local cv, lv = values(c_compile or ""), values(l_compile or "")
rows[#rows + 1] = {label = "NVRTC compile, no cache", c = cv.compile,
                   lua = lv.compile_cold}
rows[#rows + 1] = {label = "NVRTC compile, from the cache",
                   lua = lv.compile_cached}
notes[#notes + 1] = ("compile: spec/kernels/kernels.cu for compute_%d; C "
  .. "calls NVRTC directly; from the cache: C n/a (NVRTC has no cache), "
  .. "Lua after one warm compile"):format(arch)
if c_err then notes[#notes + 1] = "C compile failed: " .. c_err end
if l_err then notes[#notes + 1] = "Lua compile failed: " .. l_err end

-- -- the table --------------------------------------------------------------

local misses = 0
for _, r in ipairs(rows) do
  r.ratio = r.c and r.lua and r.lua / r.c
  if r.target and r.ratio then
    local ok = r.ratio <= r.target and (r.bytes == nil or r.bytes == 0)
    r.status = ok and "ok" or "MISS"
    if not ok then misses = misses + 1 end
  else
    r.status = "-"
  end
end

local function us(v) return v and ("%.2f"):format(v) or "n/a" end

local function cells(r)
  return {r.label, us(r.c), us(r.lua), r.ratio and ("%.3f"):format(r.ratio)
          or "-", r.target and ("≤ %.2f"):format(r.target) or "-",
          r.bytes and (r.bytes == 0 and "0" or ("%.1f"):format(r.bytes))
          or "-", r.status}
end

local summary = misses == 0 and "targets: all met"
  or ("targets: %d MISS"):format(misses)
local header = {"case", "C µs/iter", "Lua µs/iter", "Lua/C", "target",
                "Lua B/iter", "status"}
local v = dev.driver_version
local title = ("cugraph-lua bench: %s (cc %s), driver %d.%d, %s"):format(
  dev.name, dev.compute_capability, v // 1000, v % 1000 // 10,
  os.date("%Y-%m-%d %H:%M"))
local method = ("%d iterations a loop (capture %d, cached compile %d), "
  .. "median of %d runs after %d warm-up; wall clock per iteration%s"):format(
  N, NCAPTURE, NCACHED, R, W, quick and "; --quick" or "")

if markdown then
  print("### " .. title)
  print()
  print(method)
  print()
  print("| " .. table.concat(header, " | ") .. " |")
  print("|---|---:|---:|---:|---|---:|---|")
  for _, r in ipairs(rows) do
    print("| " .. table.concat(cells(r), " | ") .. " |")
  end
  print()
  print(summary)
  print()
  for _, note in ipairs(notes) do print("- " .. note) end
else
  local all = {header}
  for _, r in ipairs(rows) do all[#all + 1] = cells(r) end
  local width = {}
  for _, row in ipairs(all) do
    for j, cell in ipairs(row) do
      width[j] = math.max(width[j] or 0, utf8.len(cell))
    end
  end
  print(title)
  print(method)
  print()
  for _, row in ipairs(all) do
    local line = {}
    for j, cell in ipairs(row) do
      local pad = (" "):rep(width[j] - utf8.len(cell))
      line[j] = (j == 1 or j == #row) and cell .. pad or pad .. cell
    end
    print((table.concat(line, "  "):gsub("%s+$", "")))
  end
  print()
  print(summary)
  for _, note in ipairs(notes) do print(note) end
end
