-- The cost of g:profile's event nodes on a replay: chains of 10 and 100
-- dependent launches of a kernel that touches no memory
-- (examples/particles.lua prints its own frame's). For each chain, REPS
-- profiles of 50 replays each: the graph's own replay time back to back,
-- the instrumented copy's, their ratio, and the sum of the nodes' median
-- times; the median of each over the profiles. Then while loops over 10
-- such kernels, profiled by stamps (a graph with a conditional node).
--
--   make bench-profile      (build/cugraph-lua bench/profile.lua [reps])
local cuda = require "cugraph"
local stats = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/stats.lua")
local REPS = math.tointeger(tonumber(arg[1] or "7")) or 7
local m = cuda.compile([[extern "C" __global__ void nothing(int k) {}]])
local s = cuda.stream()

print(("%-22s %10s %12s %9s %12s"):format("graph", "us/replay", "profiled us",
      "overhead", "sum of nodes"))
for _, n in ipairs { 10, 100 } do
  local g = s:capture(function()
    for i = 1, n do m.nothing:launch(s, 1, 32, i) end
  end)
  local plain, with, ratio, sum = {}, {}, {}, {}
  for r = 1, REPS do
    local p = g:profile(50)
    local total = 0
    for _, nd in ipairs(p.nodes) do total = total + nd.us end
    plain[r], with[r], ratio[r], sum[r] = p.us, p.profiled_us, p.overhead, total
  end
  print(("%-22s %10.2f %12.2f %9.3f %12.2f"):format(n .. " empty kernels",
        stats.median(plain), stats.median(with), stats.median(ratio),
        stats.median(sum)))
  g:free()
end

-- A graph with a conditional node, timed by stamps (the default for such
-- a graph): a while loop of T turns over a body of 10 such kernels; "sum
-- of nodes" is the body's kernels over all their turns, "loop" the
-- conditional node's span, "stamp" a stamp's own time.
print(("%-22s %10s %12s %9s %12s %10s %8s"):format("loop", "us/replay",
      "profiled us", "overhead", "sum of nodes", "loop us", "stamp"))
for _, turns in ipairs { 1, 10, 100 } do
  local c = cuda.condition(1)
  local g = s:capture(function()
    s:loop_while(c, function()
      for i = 1, 10 do m.nothing:launch(s, 1, 32, i) end
      c:count_down(s, turns)
    end)
  end)
  local plain, with, ratio, sum, loop, stamp = {}, {}, {}, {}, {}, {}
  for r = 1, REPS do
    local p = g:profile(50)
    assert(p.method == "stamps", p.note)
    local total = 0
    for _, nd in ipairs(p.nodes) do
      if nd.kind == "kernel" and nd.depth == 1 and nd.name == "nothing" then
        assert(nd.runs == turns, "a body kernel ran other than once a turn")
        total = total + nd.us
      end
    end
    plain[r], with[r], ratio[r], sum[r], loop[r], stamp[r] = p.us,
      p.profiled_us, p.overhead, total, p.nodes[1].us, p.stamp_us
  end
  print(("%-22s %10.2f %12.2f %9.3f %12.2f %10.2f %8.2f"):format(
        ("10 kernels x %d turns"):format(turns), stats.median(plain),
        stats.median(with), stats.median(ratio), stats.median(sum),
        stats.median(loop), stats.median(stamp)))
  g:free()
end
