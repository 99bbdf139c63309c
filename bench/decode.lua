-- The decoder rows of `make bench`: examples/decode.lua (eager, one graph
-- replayed per token, the same graph with its one eligible edge made
-- programmatic, and the eager step wrapped by cuda.graphed) and the
-- same model in PyTorch (eager, and with torch.cuda.graphs;
-- bench/decode_torch.py), each timed by its own events around one decode
-- after a warm-up decode, run in alternation R times in one job; the table
-- gives the medians of the tokens/s and of the per-run ratios of the
-- captured Lua decoder to PyTorch's graph, and of the programmatic and the
-- graphed ones to the captured one.
--
--   cugraph-lua bench/decode.lua [R [tokens width batch]]    (5; 128 256 8)
local R = math.tointeger(tonumber(arg[1] or "5"))
local size = table.concat({ arg[2] or "128", arg[3] or "256", arg[4] or "8" }, " ")
local lua = arg[-1] or "cugraph-lua"

local function median(t)
  local s = { table.unpack(t) }
  table.sort(s)
  local n = #s
  return n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
end

local function run(cmd)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = p:read("a")
  local ok = p:close()
  return ok, out
end

local python = os.getenv("PYTHON") or "python3"
local has_torch = run(python .. " -c 'import torch; assert torch.cuda.is_available()'")
local rows = { eager = {}, graph = {}, graphed = {}, torch_eager = {}, torch_graph = {},
               ratio = {}, graphed_ratio = {}, pdl = {}, pdl_ratio = {} }
for _ = 1, R do
  local ok, out = run(lua .. " examples/decode.lua " .. size)
  assert(ok, "examples/decode.lua failed:\n" .. out)
  local e = tonumber(out:match("eager%s+(%d+) tokens/s"))
  local g = tonumber(out:match("captured%s+(%d+) tokens/s"))
  local gd = tonumber(out:match("graphed%s+(%d+) tokens/s"))
  local pd = tonumber(out:match("programmatic%s+(%d+) tokens/s"))
  table.insert(rows.pdl, pd)
  table.insert(rows.pdl_ratio, pd / g)
  table.insert(rows.eager, e)
  table.insert(rows.graph, g)
  table.insert(rows.graphed, gd)
  table.insert(rows.graphed_ratio, gd / g)
  if has_torch then
    local tok, tout = run(python .. " bench/decode_torch.py " .. size)
    assert(tok, "bench/decode_torch.py failed:\n" .. tout)
    local te = tonumber(tout:match('"torch_eager": ([%d.e+-]+)'))
    local tg = tonumber(tout:match('"torch_graph": ([%d.e+-]+)'))
    table.insert(rows.torch_eager, te)
    table.insert(rows.torch_graph, tg)
    table.insert(rows.ratio, g / tg)
  end
end

print(("decode (tokens, width, batch: %s), median of %d runs, tokens/s"):format(size, R))
print(("  %-34s %12.0f"):format("cugraph-lua eager", median(rows.eager)))
print(("  %-34s %12.0f  (%.2fx eager)"):format("cugraph-lua graph, one launch a token",
      median(rows.graph), median(rows.graph) / median(rows.eager)))
local pr = rows.pdl_ratio
table.sort(pr)
print(("  %-34s %12.0f  (%.3fx the graph; runs %.3f .. %.3f)"):format(
      "cugraph-lua graph, programmatic edge", median(rows.pdl), median(pr), pr[1], pr[#pr]))
local gr = rows.graphed_ratio
table.sort(gr)
print(("  %-34s %12.0f  (%.3fx the graph; runs %.3f .. %.3f; target >= 0.95)"):format(
      "cugraph-lua graphed eager step", median(rows.graphed), median(gr), gr[1], gr[#gr]))
if has_torch then
  print(("  %-34s %12.0f"):format("PyTorch eager", median(rows.torch_eager)))
  print(("  %-34s %12.0f"):format("PyTorch torch.cuda.graphs", median(rows.torch_graph)))
  local r = rows.ratio
  table.sort(r)
  print(("  cugraph-lua graph / PyTorch graph: %.3f (runs %.3f .. %.3f; target >= 1)"):format(
    median(r), r[1], r[#r]))
else
  print("  PyTorch: skipped (no torch with CUDA in " .. python .. ")")
end
