-- The all-reduce benchmark: bus bandwidth (algorithm bandwidth x 2(n-1)/n,
-- as nccl-tests reports it) of an in-place f32 sum over all ranks, for
-- sizes from 8 B to 1 GiB, through the binding (c:all_reduce eager, and a
-- captured graph of one all-reduce replayed) beside the same calls made
-- from C (bench/nccl_ref.c, a communicator of its own) in the same
-- processes. Run by the launcher, one rank per GPU (make bench-nccl):
--   build/cugraph-lua --nproc 2 bench/nccl.lua [--quick] [--markdown] [--max BYTES]
--
-- Method, as bench/bench.lua's: for each size and mode, pairs of timed
-- blocks, one of C then one of Lua (the order alternating pair by pair),
-- each block n iterations and a stream synchronize, in step on every rank
-- (the collectives keep them so); n is fixed by the size so that every
-- rank agrees. Each pair gives a ratio of times Lua/C; a row shows the
-- median bus bandwidth of each side and the median ratio with its
-- interquartile range. Rank 0 prints; build/bench/nccl.json gets the rows.
local here = arg[0]:match("^(.*)/[^/]*$") or "."
local build = os.getenv("CUGRAPH_LUA_BUILD") or here .. "/../build"
package.cpath = build .. "/bench/?.so;" .. package.cpath
local cuda = require "cugraph"
local ref = require "nccl_ref"

local quick, markdown, max = os.getenv("BENCH_QUICK") == "1", false, 1 << 30
do
  local i = 1
  while arg[i] do
    if arg[i] == "--quick" then quick = true
    elseif arg[i] == "--markdown" then markdown = true
    elseif arg[i] == "--max" then
      i = i + 1
      max = math.tointeger(tonumber(arg[i] or "")) or error("--max: bytes", 0)
    else
      io.stderr:write("usage: cugraph-lua --nproc N bench/nccl.lua [--quick] [--markdown] [--max BYTES]\n")
      os.exit(2)
    end
    i = i + 1
  end
end
if quick then max = math.min(max, 1 << 20) end

local PAIRS = quick and 3 or 15
local WARM = quick and 1 or 3

local comm = cuda.comm_world()
local rank, world = comm:rank(), comm:size()
local function say(...) if rank == 0 then print(string.format(...)) end end
if world < 2 then
  say("bench/nccl.lua: one rank: the all-reduce needs 2 GPUs or more (skipped)")
  return
end

-- The C side's communicator, from an id through a second file.
local rdv = assert(os.getenv("CUGRAPH_RENDEZVOUS"), "run by the launcher") .. ".ref"
local id = cuda.nccl_rendezvous(rdv, rank)
ref.open(id, world, rank, cuda.current_device(), max)
local s = cuda.stream()
local x = cuda.buffer("f32", max // 4):fill(0)
comm:all_reduce(x:view(0, 1), x:view(0, 1)) -- all ranks have opened the C side
if rank == 0 then os.remove(rdv) end

-- Iterations a block: about 20 ms at 100 us a call for small sizes,
-- 10 for large ones.
local function iterations(bytes)
  if quick then return bytes >= 1 << 20 and 2 or 20 end
  return math.max(5, math.min(200, (64 << 20) // bytes))
end

local now = require("clock").now

local function lua_block_eager(v, n)
  local t0 = now()
  for _ = 1, n do comm:all_reduce(v, v, "sum", s) end
  s:synchronize()
  return now() - t0
end

local function lua_block_graph(g, n)
  local t0 = now()
  for _ = 1, n do g:launch(s) end
  s:synchronize()
  return now() - t0
end

local stats = dofile(here .. "/stats.lua")
local function q(t, p) return stats.quantile(stats.sorted(t), p) end

local busfactor = 2 * (world - 1) / world
local rows = {}
local bytes = 8
while bytes <= max do
  local n = iterations(bytes)
  local v = x:view(0, bytes // 4)
  local g = s:capture(function() comm:all_reduce(v, v, "sum", s) end)
  ref.capture(bytes)
  for _, mode in ipairs { "eager", "graph" } do
    local cside = mode == "eager" and function() return ref.eager(bytes, n) end
                                  or function() return ref.replay(n) end
    local lside = mode == "eager" and function() return lua_block_eager(v, n) end
                                  or function() return lua_block_graph(g, n) end
    for _ = 1, WARM do cside(); lside() end
    local ct, lt, ratio = {}, {}, {}
    for p = 1, PAIRS do
      local c, l
      if p % 2 == 1 then c = cside(); l = lside() else l = lside(); c = cside() end
      ct[p], lt[p], ratio[p] = c / n, l / n, l / c
    end
    local c_us, l_us = q(ct, 0.5) * 1e6, q(lt, 0.5) * 1e6
    rows[#rows + 1] = {
      bytes = bytes, mode = mode, n = n, c_us = c_us, lua_us = l_us,
      c_busbw = bytes / (c_us * 1e-6) * busfactor / 1e9,
      lua_busbw = bytes / (l_us * 1e-6) * busfactor / 1e9,
      ratio = q(ratio, 0.5), ratio_q1 = q(ratio, 0.25), ratio_q3 = q(ratio, 0.75),
    }
  end
  g:free()
  bytes = bytes * 2
end
ref.close()

if rank ~= 0 then return end

local function size(b)
  if b >= 1 << 30 then return ("%d GiB"):format(b >> 30) end
  if b >= 1 << 20 then return ("%d MiB"):format(b >> 20) end
  if b >= 1 << 10 then return ("%d KiB"):format(b >> 10) end
  return ("%d B"):format(b)
end

-- Targets: Lua within 1.03 of C at 64 MiB and above, within 1.10 at 8 B;
-- the captured all-reduce no slower than eager (Lua's times).
local eager_us = {}
for _, r in ipairs(rows) do
  if r.mode == "eager" then eager_us[r.bytes] = r.lua_us end
end
local failed = 0
for _, r in ipairs(rows) do
  local note = ""
  local limit = r.bytes >= 64 << 20 and 1.03 or r.bytes == 8 and 1.10 or nil
  if limit then
    local good = r.ratio <= limit
    note = ("target <= %.2f %s"):format(limit, good and "met" or "MISSED")
    if not good then failed = failed + 1 end
  end
  if r.mode == "graph" and (r.bytes >= 64 << 20 or r.bytes == 8) then
    local good = r.lua_us <= eager_us[r.bytes] * 1.01
    note = note .. (", graph/eager %.3f %s"):format(r.lua_us / eager_us[r.bytes],
                                                   good and "met" or "MISSED")
    if not good then failed = failed + 1 end
  end
  r.note = note
end

local header = { "size", "mode", "C us", "Lua us", "C busbw GB/s", "Lua busbw GB/s",
                 "Lua/C", "IQR", "targets" }
local lines = {}
for _, r in ipairs(rows) do
  lines[#lines + 1] = { size(r.bytes), r.mode, ("%.1f"):format(r.c_us), ("%.1f"):format(r.lua_us),
                        ("%.2f"):format(r.c_busbw), ("%.2f"):format(r.lua_busbw),
                        ("%.3f"):format(r.ratio), ("%.3f-%.3f"):format(r.ratio_q1, r.ratio_q3),
                        r.note }
end
print(("all-reduce (f32 sum, in place), %d ranks, %s; %d pairs a row")
      :format(world, cuda.device().name, PAIRS))
if markdown then
  print("| " .. table.concat(header, " | ") .. " |")
  print("|" .. ("---|"):rep(#header))
  for _, l in ipairs(lines) do print("| " .. table.concat(l, " | ") .. " |") end
else
  local w = {}
  for i, h in ipairs(header) do
    w[i] = #h
    for _, l in ipairs(lines) do w[i] = math.max(w[i], #l[i]) end
  end
  local function row(t)
    local out = {}
    for i, v in ipairs(t) do out[i] = v .. (" "):rep(w[i] - #v) end
    print(table.concat(out, "  "))
  end
  row(header)
  for _, l in ipairs(lines) do row(l) end
end
print(failed == 0 and "all targets met" or ("%d target(s) missed"):format(failed))

local f = io.open(build .. "/bench/nccl.json", "w")
if f then
  local parts = {}
  for _, r in ipairs(rows) do
    parts[#parts + 1] = ('{"bytes":%d,"mode":"%s","iterations":%d,"c_us":%.3f,"lua_us":%.3f,'
      .. '"c_busbw_GBps":%.3f,"lua_busbw_GBps":%.3f,"ratio":%.4f,"ratio_q1":%.4f,"ratio_q3":%.4f}')
      :format(r.bytes, r.mode, r.n, r.c_us, r.lua_us, r.c_busbw, r.lua_busbw, r.ratio,
              r.ratio_q1, r.ratio_q3)
  end
  f:write('{"ranks":', world, ',"rows":[', table.concat(parts, ","), "]}\n")
  f:close()
end
