-- The script's trace names every kernel a graph's replays run by the Lua
-- line that captured it (CUPTI's kernel activity records), writes the
-- table of CUPTI's ids beside it, and leaves g:profile's activity method
-- working meanwhile.
local H = require "spec.support.helper"

-- the kernel events of a trace: name, line, graph, node, and the rest
local function kernels(file)
  local ev = {}
  for line in assert(io.open(file)):lines() do
    if line:find('"cat": "graph kernel"', 1, true) then
      ev[#ev + 1] = {
        name = line:match('"name": "([^"]*)"'),
        line = line:match('"line": "([^"]*)"'),
        graph = line:match('"graph": "(#%d+)"'),
        node = tonumber(line:match('"node": (%d+)')),
        ts = tonumber(line:match('"ts": (%-?[%d.]+)')),
        dur = tonumber(line:match('"dur": ([%d.]+)')),
      }
    end
  end
  return ev
end

-- runs per "line name" of the events of graph id (any graph: nil)
local function tally(ev, graph)
  local n = {}
  for _, e in ipairs(ev) do
    if not graph or e.graph == graph then
      local k = e.line:match(":(%d+)$") .. " " .. e.name
      n[k] = (n[k] or 0) + 1
    end
  end
  return n
end

local function nodes_table(trace)
  local rows = {}
  local f = assert(io.open((trace:gsub("%.json$", "") .. "-nodes.tsv")))
  local head = f:read("l")
  for l in f:lines() do
    local id, exec, pos, graph, node, where, name = l:match(
      "^(%d+)\t(%d+)\t(%d+)\t(#%d+)\t(%d+)\t([^\t]*)\t(.*)$")
    rows[#rows + 1] = { id = id, exec = tonumber(exec), pos = tonumber(pos), graph = graph,
                        node = tonumber(node), line = tonumber(where:match(":(%d+)$")),
                        name = name }
  end
  f:close()
  return head, rows
end

describe("the script's trace names each graph kernel by its Lua line", function()
  -- a graph of three kernels and a while loop whose body has a kernel,
  -- launched three times; a graphed function called twice; then a
  -- profile by CUPTI's records inside the same run
  local src = [[
local cuda = require "cugraph"
local m = cuda.load_module(arg[1] .. "/kernels.ptx")
local s = cuda.stream()
local x, u, f = cuda.buffer("i32", 64):fill(0), cuda.buffer("u32", 64), cuda.buffer("f32", 64):fill(1)
local c = cuda.condition(1)
local g = s:capture(function()
  m.inc_i32:launch(s, 1, 64, x, 64)
  m.iota_u32:launch(s, 1, 64, u, 7, 64)
  m.saxpy:launch(s, 1, 64, 2.0, f, f, 64)
  s:loop_while(c, function()
    m.dims_u32:launch(s, 1, 64, u, 64)
    c:count_down(s, 2)
  end)
end)
for _ = 1, 3 do g:launch(s) end
local gf = cuda.graphed(function(st, a) m.inc_i32:launch(st, 1, 64, a, 64) end)
gf(s, x); gf(s, x)
local p = g:profile { n = 2, method = "activity" }
print(p.method, p.note, #p.nodes, p.nodes[5].name, p.nodes[5].runs)
print(x:download()[1])
]]

  it("on the replays of a graph, its loop's body and a graphed function, with the nodes table", function()
    if H.no_cupti then return pending(H.no_cupti) end
    local path, trace = os.tmpname(), os.tmpname() .. ".json"
    local f = assert(io.open(path, "w"))
    f:write(src)
    f:close()
    local code, out = H.run("--profile=" .. H.quote(trace) .. " " .. H.quote(path) .. " " .. H.quote(H.build))
    assert.equals(0, code, out)
    -- the profile inside the traced run worked, by CUPTI's records
    assert.matches("activity\tnil\t6\tdims_u32\t1", out)
    local ev = kernels(trace)
    local a = tally(ev, "#1")
    -- 3 launches, then g:profile's replays: at least 1 + 2 (n) more
    local runs = a["7 inc_i32"]
    assert.is_true(runs >= 6, out)
    assert.same({ ["7 inc_i32"] = runs, ["8 iota_u32"] = runs, ["9 saxpy"] = runs,
                  ["11 dims_u32"] = runs, ["12 cg_cond_countdown"] = runs }, a)
    -- the graphed function's graph: its two calls
    local others = {}
    for _, e in ipairs(ev) do
      if e.graph ~= "#1" then others[#others + 1] = e.line:match(":(%d+)$") .. " " .. e.name end
    end
    assert.same({ "17 inc_i32", "17 inc_i32" }, others)
    for _, e in ipairs(ev) do
      assert.equals(path, e.line:match("^(.*):%d+$"))
      assert.is_true(e.ts >= 0 and e.dur >= 0)
      if e.graph == "#1" then -- g:nodes' numbering
        assert.equals(({ inc_i32 = 1, iota_u32 = 2, saxpy = 3, dims_u32 = 5 })[e.name] or 6, e.node)
      end
    end
    local text = io.open(trace):read("a")
    assert.matches('"otherData": {"kernels": "' .. #ev .. ' graph kernel runs named, %d+ of other graphs, 0 dropped', text)
    assert.matches("cugraph%-lua: " .. #ev .. " graph kernel runs named", out)
    -- by line on stderr, the kernel runs too
    assert.matches("\n +" .. runs .. " +[%d.]+ +[%d.]+  [^\n]*:9  saxpy\n", out)
    -- the table beside the trace: one row a node of each instantiated graph
    local head, rows = nodes_table(trace)
    assert.equals("graphNodeId\tgraphExecId\tposition\tgraph\tnode\tline\tkernel", head)
    local got = {}
    for _, r in ipairs(rows) do
      got[#got + 1] = ("%s %d %d %s"):format(r.graph, r.node, r.line, r.name)
      -- CUPTI's id of the node's runs: the exec's id above its position
      assert.equals(string.format("%d", (r.exec << 32) | r.pos), r.id)
    end
    assert.same({ "#1 1 7 inc_i32", "#1 2 8 iota_u32", "#1 3 9 saxpy", "#1 4 10 conditional",
                  "#1 5 11 dims_u32", "#1 6 12 cg_cond_countdown", "#2 1 17 inc_i32" }, got)
    os.remove(path); os.remove(trace); os.remove((trace:gsub("%.json$", "") .. "-nodes.tsv"))
  end)

  it("on the launches of a C graph (cugraph_graph_launch)", function()
    if H.no_cupti then return pending(H.no_cupti) end
    local trace = os.tmpname() .. ".json"
    local ok, out = H.capi([[
      local cuda = require "cugraph"
      local m = cuda.load_module(os.getenv("CUGRAPH_LUA_BUILD") .. "/kernels.ptx")
      local s, x = cuda.stream(), cuda.buffer("i32", 64):fill(0)
      local g = s:capture(function()
        m.inc_i32:launch(s, 1, 64, x, 64)
        m.inc_i32:launch(s, 1, 64, x, 64)
      end)
      local h = capi.tograph(g)
      for _ = 1, 4 do assert(capi.launch(h) == nil) end
      assert(x:download()[1] == 8)
    ]], "CUGRAPH_LUA_BUILD=" .. H.quote(H.build) .. " CUGRAPH_LUA_PROFILE=" .. H.quote(trace))
    assert.is_true(ok, out)
    -- no Lua call: no replay of the trace's own, but every kernel named
    local lines = {}
    for _, e in ipairs(kernels(trace)) do
      assert.equals("inc_i32", e.name)
      assert.equals("#1", e.graph)
      lines[#lines + 1] = e.node .. "@" .. e.line:match(":(%d+)$")
    end
    assert.same({ "1@5", "2@6", "1@5", "2@6", "1@5", "2@6", "1@5", "2@6" }, lines)
    os.remove(trace); os.remove((trace:gsub("%.json$", "") .. "-nodes.tsv"))
  end)

  it("by the library call and its line for a library's kernels", function()
    if H.no_cupti then return pending(H.no_cupti) end
    local trace = os.tmpname() .. ".json"
    local code, out = H.script([[
      local cuda = require "cugraph"
      local m = cuda.load_module(os.getenv("CUGRAPH_LUA_BUILD") .. "/kernels.ptx")
      local s, x = cuda.stream(), cuda.buffer("i32", 64):fill(0)
      local blas = cuda.blas(s)
      local a, c = cuda.buffer("f32", 64 * 64):fill(1), cuda.buffer("f32", 64 * 64)
      local g = s:capture(function()
        m.inc_i32:launch(s, 1, 64, x, 64)
        blas:gemm(a, a, c, { m = 64, n = 64, k = 64 })
        m.inc_i32:launch(s, 1, 64, x, 64)
      end)
      g:launch(s); g:launch(s); s:synchronize()
      print(c:download()[1], x:download()[1])
    ]], "CUGRAPH_LUA_BUILD=" .. H.quote(H.build) .. " CUGRAPH_LUA_PROFILE=" .. H.quote(trace))
    assert.equals(0, code, out)
    assert.matches("64%.0\t4", out)
    local a = tally(kernels(trace))
    assert.equals(2, a["7 inc_i32"], out)
    assert.equals(2, a["9 inc_i32"], out)
    for k in pairs(a) do assert.matches("^%d+ ", k) end
    a["7 inc_i32"], a["9 inc_i32"] = nil, nil
    for k, runs in pairs(a) do -- the rest: cuBLAS's kernels, by the call
      assert.equals("8 blas:gemm", k)
      assert.is_true(runs >= 2)
    end
    if H.gpu then assert.is_not_nil(a["8 blas:gemm"], "no cuBLAS kernel named") end
    os.remove(trace); os.remove((trace:gsub("%.json$", "") .. "-nodes.tsv"))
  end)

  it("says why kernels go unnamed where CUPTI cannot be had", function()
    local trace = os.tmpname() .. ".json"
    local code, out = H.script([[
      local cuda = require "cugraph"
      local m = cuda.load_module(os.getenv("CUGRAPH_LUA_BUILD") .. "/kernels.ptx")
      local s, x = cuda.stream(), cuda.buffer("i32", 64):fill(0)
      local g = s:capture(function() m.inc_i32:launch(s, 1, 64, x, 64) end)
      g:launch(s); g:launch(s)
    ]], "CUGRAPH_LUA_BUILD=" .. H.quote(H.build) .. " CUGRAPH_LUA_PROFILE=" .. H.quote(trace)
        .. " CUGRAPH_LUA_LIBCUPTI=/nonexistent/libcupti.so")
    assert.equals(0, code, out)
    assert.same({}, kernels(trace))
    local text = io.open(trace):read("a")
    assert.matches('"kernels": "graph kernels not named: [^"]*CUPTI', text)
    assert.matches("3 calls, 0 not timed", text) -- the fill and the replays, as before
    assert.is_nil(io.open((trace:gsub("%.json$", "") .. "-nodes.tsv")))
    os.remove(trace)
  end)
end)
