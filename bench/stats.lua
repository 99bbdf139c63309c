-- Order statistics of the benchmarks' samples (bench.lua, nccl.lua).
local stats = {}

-- The p-quantile of the sorted list t, interpolated.
function stats.quantile(t, p)
  local h = (#t - 1) * p + 1
  local lo = math.floor(h)
  return t[lo] + (h - lo) * ((t[lo + 1] or t[lo]) - t[lo])
end

-- A sorted copy of t.
function stats.sorted(t)
  local c = table.move(t, 1, #t, 1, {})
  table.sort(c)
  return c
end

function stats.median(t) return stats.quantile(stats.sorted(t), 0.5) end

return stats
