-- Soak: `pos:set(i); g:launch()` for arg[1] iterations (default 10e6) on a
-- 10-node graph that reads the scalar pos (9 inc_i32, then mark_u32). Every
-- arg[2] iterations (default 1e6) it samples the host RSS, the Lua heap
-- after a full collection and the device's free memory, and fails (exit 1)
-- when one has grown since the first sample past its tolerance: RSS 1 MiB,
-- heap 0, device memory 0. The stream is synchronized every 100k
-- iterations, so the queue stays bounded.
local here = arg[0]:match("^(.*)/[^/]*$") or "."
local build = os.getenv("CUGRAPH_LUA_BUILD") or here .. "/../build"
local cuda = require "cugraph"

local count = math.tointeger(tonumber(arg[1] or 10e6))
local every = math.tointeger(tonumber(arg[2] or 1e6))
if not (count and every and count > 0 and count < 1 << 31 and every > 0) then
  io.stderr:write("usage: cugraph-lua bench/soak.lua [count [sample_every]]\n")
  os.exit(2)
end
local sync_every = math.min(100000, every)
local RSS_SLACK = 1 << 20 -- bytes

local page = 4096
do
  local p = io.popen("getconf PAGESIZE 2>/dev/null")
  page = math.tointeger(tonumber(p:read("a"))) or page
  p:close()
end

local function rss()
  local f = assert(io.open("/proc/self/statm"))
  local _, resident = f:read("n", "n")
  f:close()
  return resident * page
end

local m = cuda.load_module(build .. "/kernels.ptx")
local s = cuda.stream()
local n = 256
local x = cuda.buffer("i32", n):fill(0)
local out = cuda.buffer("u32", n):fill(0)
local pos = cuda.scalar("u32", 0)
local g = s:capture(function()
  for _ = 1, 9 do m.inc_i32:launch(s, 1, n, x, n) end
  m.mark_u32:launch(s, 1, 1, out, pos, n)
end)

-- The samples, preallocated: storing a number in them allocates nothing.
local nsamples = count // every + 1
local at, host, heap, free = {}, {}, {}, {}
for k = 1, nsamples do at[k], host[k], heap[k], free[k] = 0, 0, 0, 0 end

-- Sample k at iteration i; the heap is read right after a full collection,
-- before the other readings make garbage.
local function sample(k, i)
  s:synchronize()
  collectgarbage("collect")
  heap[k] = math.floor(collectgarbage("count") * 1024)
  at[k] = i
  host[k] = rss()
  free[k] = cuda.device().free_memory
end

local function row(k)
  print(("%12d  %10d  %+9d  %11d  %+9d  %12d  %+12d"):format(at[k],
        host[k] // 1024, (host[k] - host[1]) // 1024, heap[k],
        heap[k] - heap[1], free[k] // 1024, free[1] - free[k]))
end

local function check(k)
  local function fail(what, grew, slack)
    error(("soak: %s grew by %d bytes after %d iterations (tolerance %d)")
          :format(what, grew, at[k], slack), 0)
  end
  local grew = host[k] - host[1]
  if grew > RSS_SLACK then fail("RSS", grew, RSS_SLACK) end
  if heap[k] > heap[1] then fail("the Lua heap", heap[k] - heap[1], 0) end
  if free[k] < free[1] then
    fail("device memory in use", free[1] - free[k], 0)
  end
end

-- Warm-up: the same loop, then a sample thrown away, so that the baseline
-- follows every first-use allocation.
local warm = sync_every
for i = 1, warm do pos:set(i); g:launch() end
sample(1, 0)

print(("soak: %d iterations of pos:set(i); g:launch(), 10 nodes; a sample "
       .. "every %d"):format(count, every))
print(("%12s  %10s  %9s  %11s  %9s  %12s  %12s"):format("iterations",
      "RSS KiB", "+KiB", "Lua heap B", "+B", "dev free KiB", "dev used +B"))
sample(1, 0)
row(1)
local k = 1
for i = 1, count do
  pos:set(i)
  g:launch()
  if i % every == 0 then
    k = k + 1
    sample(k, i)
    row(k)
    check(k)
  elseif i % sync_every == 0 then
    s:synchronize()
  end
end

-- The work ran: every inc_i32 counted, the last value of pos seen.
s:synchronize()
local incs = 9 * (warm + count)
assert(incs >= 1 << 31 or x:download("table", 0, 1)[1] == incs,
       "soak: x[0] is not the number of inc_i32 launches")
assert(pos:get() == count, "soak: the scalar is not the last value set")
print(("soak: ok, %d iterations, %d samples"):format(count, k))
