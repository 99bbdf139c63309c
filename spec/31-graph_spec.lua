-- Graphs: replay, scalars between replays, lifetime, update, inspection.
local H = require "support.helper"
local cuda = H.cuda

describe("cugraph.Graph", function()
  local m, s
  before_each(function()
    m = H.kernels()
    s = cuda.stream()
  end)

  it("replays captured work exactly as the host computes it", function()
    local n = 512
    local xs = {}
    for i = 1, n do xs[i] = (i % 17) * 0.5 end
    local x, y = cuda.buffer("f32", xs), cuda.buffer("f32", n):fill(1)
    local g = s:capture(function(stream)
      assert.equals(s, stream)
      m.saxpy:launch(stream, 2, 256, 2.0, x, y, n)
      y:fill(0, stream) -- the memset is recorded too, before the last launch
      m.saxpy:launch(stream, 2, 256, 1.0, x, y, n)
    end)
    assert.equals(0, g:launches())
    g:launch()
    g:launch(s)
    g:replay(3)
    s:synchronize()
    assert.equals(5, g:launches())
    local out = y:download()
    for i = 1, n do assert.equals(xs[i], out[i]) end
  end)

  it("gives each replay the scalar value set before it", function()
    local n = 64
    local out = cuda.buffer("u32", n):fill(0)
    local pos = cuda.scalar("u32", 0)
    local g = s:capture(function() m.mark_u32:launch(s, 1, 1, out, pos, n) end)
    for i = 0, n - 1 do
      pos:set(i)
      g:launch()
    end
    s:synchronize()
    local got = out:download()
    for i = 1, n do assert.equals(i, got[i]) end
    -- and on another stream than the capture's
    local other = cuda.stream()
    out:fill(0)
    pos:set(5)
    g:launch(other)
    pos:set(9)
    g:launch(other)
    other:synchronize()
    got = out:download()
    assert.equals(6, got[6])
    assert.equals(10, got[10])
    assert.equals(0, got[7])
  end)

  it("keeps its buffers alive when Lua drops them", function()
    local weak = setmetatable({}, { __mode = "v" })
    local g
    do
      local x = cuda.buffer("i32", 128):fill(0)
      local pos = cuda.scalar("f32", 1)
      weak.x, weak.pos = x, pos
      g = s:capture(function() m.inc_i32:launch(s, 1, 128, x, 128) end)
    end
    collectgarbage()
    collectgarbage()
    g:replay(7)
    s:synchronize()
    assert.is_nil(weak.pos) -- not captured: collected
    assert.is_not_nil(weak.x)
    assert.equals(7, weak.x:download()[128])
    g = nil -- luacheck: ignore
    collectgarbage()
    collectgarbage()
    assert.is_nil(weak.x) -- the graph gone, the buffer goes too
  end)

  it("holds only what its own capture used, after freed graphs and updates", function()
    -- a freed or updated graph's set of pins serves the next capture, emptied
    local weak = setmetatable({}, { __mode = "v" })
    local y = cuda.buffer("i32", 64):fill(0)
    local g2, g3
    do
      local x = cuda.buffer("i32", 64):fill(0)
      local u = cuda.buffer("i32", 64):fill(0)
      weak.x, weak.u = x, u
      s:capture(function() m.inc_i32:launch(s, 1, 64, x, 64) end):free()
      g2 = s:capture(function() m.inc_i32:launch(s, 1, 64, y, 64) end)
      g3 = s:capture(function() m.inc_i32:launch(s, 1, 64, u, 64) end)
      g3:update(function() m.inc_i32:launch(s, 1, 64, y, 64) end)
    end
    local g4
    do -- a graph freed inside a capture leaves that capture's pins alone
      local old = s:capture(function() m.inc_i32:launch(s, 1, 64, y, 64) end)
      local z = cuda.buffer("i32", 64):fill(0)
      weak.z = z
      g4 = s:capture(function()
        old:free()
        m.inc_i32:launch(s, 1, 64, z, 64)
      end)
    end
    collectgarbage()
    collectgarbage()
    assert.is_nil(weak.x) -- not in g2's pins
    assert.is_nil(weak.u) -- not in g3's after its update
    assert.is_not_nil(weak.z) -- g4 holds it
    g2:launch(); g3:launch(); g4:launch()
    assert.equals(2, y:download()[64])
    assert.equals(1, weak.z:download()[64])
    assert.has_error(function() weak.z:free() end,
      ("cannot free cugraph.Buffer: it is used by live cugraph.Graph #%d; "
       .. "free the graph first"):format(g4:id()))
    g2:free(); g3:free(); g4:free()
    collectgarbage()
    collectgarbage()
    assert.is_nil(weak.z)
  end)

  it("refuses to free what a live graph uses, naming the graph", function()
    local x = cuda.buffer("i32", 32):fill(0)
    local sc = cuda.scalar("u32")
    local mod = cuda.module(H.build .. "/kernels.ptx")
    local g = s:capture(function()
      mod.mark_u32:launch(s, 1, 1, x, sc, 32)
    end)
    local id = g:id()
    assert.has_error(function() s:capture(function() error("fails, taking an id") end) end)
    assert.has_error(function() s:capture(function() mod.mark_u32:launch(s, 1, 1, x, sc, 32); error("x") end) end)
    for _, obj in ipairs { x, sc, mod, s } do
      assert.error_matches(function() obj:free() end,
                           "used by live cugraph%.Graph #" .. id .. "; free the graph first")
    end
    local g2 = s:capture(function() x:fill(0, s) end)
    g:free()
    assert.error_matches(function() x:free() end, "used by 1 live cugraph.Graph; free them first")
    g2:free()
    assert.equals("cugraph.Graph (freed)", tostring(g))
    x:free()
    sc:free()
    mod:free()
    s:free()
    assert.equals("cugraph.Buffer (freed)", tostring(x))
  end)

  it("counts its nodes and their kinds", function()
    local x = cuda.buffer("i32", 32)
    local y = cuda.buffer("i32", 32)
    local g = s:capture(function()
      x:fill(1, s)
      m.inc_i32:launch(s, 1, 32, x, 32)
      y:copy(x, s)
    end)
    local n, kinds = g:nodes()
    assert.equals(3, n)
    table.sort(kinds)
    assert.same({ "kernel", "memcpy", "memset" }, kinds)
    assert.matches("^cugraph%.Graph #%d+ %(3 nodes, 0 launches%)$", tostring(g))
  end)

  it("writes a DOT file", function()
    local x = cuda.buffer("i32", 32)
    local g = s:capture(function() m.inc_i32:launch(s, 1, 32, x, 32) end)
    local path = os.tmpname()
    g:dot(path)
    local f = assert(io.open(path))
    local dot = f:read("a")
    f:close()
    os.remove(path)
    assert.matches("digraph", dot)
    assert.matches("inc_i32", dot)
    assert.has_error(function() g:dot("/no/such/dir/g.dot") end)
  end)

  it("updates in place when the topology matches", function()
    local a = cuda.buffer("i32", 64):fill(0)
    local b = cuda.buffer("i32", 64):fill(0)
    local g = s:capture(function() m.inc_i32:launch(s, 1, 64, a, 64) end)
    g:launch()
    g:update(function() m.inc_i32:launch(s, 1, 64, b, 64) end)
    g:launch()
    g:launch()
    s:synchronize()
    assert.equals(1, a:download()[64])
    assert.equals(2, b:download()[64])
    a:free() -- no longer used by the graph
    assert.error_matches(function() b:free() end, "used by live cugraph.Graph")
  end)

  it("updates a kernel node to another function", function()
    local a = cuda.buffer("u32", 64):fill(0)
    local g = s:capture(function() m.inc_i32:launch(s, 1, 64, a, 64) end)
    g:update(function() m.iota_u32:launch(s, 1, 64, a, 100, 64) end)
    g:launch()
    s:synchronize()
    assert.equals(163, a:download()[64])
  end)

  it("says why an update cannot apply, and keeps the old graph", function()
    local a = cuda.buffer("i32", 64):fill(0)
    local g = s:capture(function() m.inc_i32:launch(s, 1, 64, a, 64) end)
    local err = H.error_of(g.update, g, function()
      m.inc_i32:launch(s, 1, 64, a, 64)
      m.inc_i32:launch(s, 1, 64, a, 64)
    end)
    assert.equals("cuGraphExecUpdate", err.api)
    assert.matches("graph update failed: .*capture a new graph instead", err.message)
    err = H.error_of(g.update, g, function() a:fill(0, s) end)
    assert.matches("graph update failed", tostring(err))
    err = H.error_of(g.update, g, function() error("no update") end)
    assert.matches("no update", err)
    g:launch()
    s:synchronize()
    assert.equals(1, a:download()[1])
  end)

  it("keeps naming itself after a failed update", function()
    local a = cuda.buffer("i32", 64):fill(0)
    local g = s:capture(function() m.inc_i32:launch(s, 1, 64, a, 64) end)
    assert.has_error(function()
      g:update(function() m.inc_i32:launch(s, 1, 64, a, 64); error("boom") end)
    end)
    assert.error_matches(function() a:free() end, "used by live cugraph%.Graph #" .. g:id() .. ";")
  end)

  it("survives being freed inside its own update", function()
    local a = cuda.buffer("i32", 64):fill(0)
    local g = s:capture(function() m.inc_i32:launch(s, 1, 64, a, 64) end)
    assert.error_matches(function()
      g:update(function() m.inc_i32:launch(s, 1, 64, a, 64); g:free() end)
    end, "cugraph.Graph #%d+ was freed inside its own update")
    assert.equals("cugraph.Graph (freed)", tostring(g))
    a:free()
    s:synchronize()
  end)

  it("keeps memory it reads when the collector takes its objects first", function()
    local code, out = H.script([[
      local cuda = require "cugraph"
      local m = cuda.module(os.getenv("CUGRAPH_LUA_BUILD") .. "/kernels.ptx")
      local s = cuda.stream()
      local result
      do -- finalized in reverse order of creation: x1, p1, then KEEP, then g
        local x0, p0 = cuda.buffer("u32", 16):fill(0), cuda.scalar("u32", 1)
        local g = s:capture(function() m.mark_u32:launch(s, 1, 1, x0, p0, 16) end)
        local x1
        KEEP = setmetatable({}, { __gc = function()
          g:launch()                       -- the graph, resurrected
          s:synchronize()
          result = x1:download("table", 7, 1)[1]
        end })
        x1 = cuda.buffer("u32", 1 << 16):fill(0)
        local p1 = cuda.scalar("u32", 7)
        g:update(function() m.mark_u32:launch(s, 1, 1, x1, p1, 16) end)
      end
      KEEP = nil
      collectgarbage(); collectgarbage()
      print("result", result, cuda.status().poisoned)
    ]])
    assert.equals(0, code, out)
    assert.matches("result\t8\tnil", out)
  end)

  it("honours instantiate options", function()
    local a = cuda.buffer("i32", 64):fill(0)
    local g = s:capture(function() m.inc_i32:launch(s, 1, 64, a, 64) end,
                        { auto_free = true, upload = true })
    g:upload()
    g:launch()
    s:synchronize()
    assert.equals(1, a:download()[1])
  end)

  it("frees three ways and refuses use after free", function()
    local a = cuda.buffer("i32", 64)
    local g = s:capture(function() m.inc_i32:launch(s, 1, 64, a, 64) end)
    g:free()
    g:free()
    g:close()
    for _, call in ipairs { function() g:launch() end, function() g:replay(1) end,
                            function() g:nodes() end, function() g:upload() end,
                            function() g:update(function() end) end,
                            function() g:dot("x") end } do
      assert.error_matches(call, "attempt to use a freed cugraph.Graph")
    end
    do local _ <close> = s:capture(function() m.inc_i32:launch(s, 1, 64, a, 64) end) end
    a:free()
  end)

  it("replays with no Lua garbage: set then launch", function()
    local out = cuda.buffer("u32", 16):fill(0)
    local pos = cuda.scalar("u32")
    local g = s:capture(function() m.mark_u32:launch(s, 1, 1, out, pos, 16) end)
    assert.equals(0, H.garbage(function(i) pos:set(i & 15); g:launch() end, 10000))
    assert.equals(0, H.garbage(function() g:replay(10) end, 1000))
    s:synchronize()
  end)
end)

describe("g:memory()", function()
  it("counts the graph's allocations and what its nodes keep alive, each object once", function()
    local s = cuda.stream()
    local x = cuda.buffer("f32", 1024):fill(0)
    local v = x:view(16, 32)
    local h = cuda.host_buffer("f32", 64)
    local c = cuda.scalar("f32", 0)
    local m = H.kernels()
    local g = s:capture(function()
      local t = cuda.buffer("f32", 256, { stream = s })
      t:fill(1, s)
      x:copy(t, { count = 256 }, s)
      v:fill(2, s)                 -- a view: its buffer counts, once
      x:upload(h, s)
      m.add_scalar_f32:launch(s, 1, 32, x, c, 32)   -- x again: not counted twice
      t:free(s)
    end)
    local mem = g:memory()
    assert.equals(1024, mem.allocations)
    assert.same({ device = 4096 + 8, host = 256, buffers = 1, host_buffers = 1, scalars = 1,
                  conditions = 0, arrays = 0, others = 0 }, mem.keeps)
    assert.is_nil(mem.instance)
    local err = H.error_of(g.memory, g, true)
    assert.matches("a graph with allocation nodes cannot be instantiated a second time", tostring(err))
    local g2 = s:capture(function() x:fill(0, s) end)
    local m2 = g2:memory(true)
    assert.is_true(math.type(m2.instance) == "integer" and m2.instance >= 0)
    assert.same({ allocations = 0, keeps = m2.keeps, instance = m2.instance }, m2)
    local list = cuda.memory().graphs
    assert.equals(g:id(), list[1].id)   -- the largest first
    assert.equals(1024, list[1].allocations)
    assert.equals(4096 + 8, list[1].keeps)
    local ids = {}
    for _, e in ipairs(list) do ids[e.id] = true end
    assert.is_true(ids[g2:id()])
    g:free()
    for _, e in ipairs(cuda.memory().graphs) do assert.is_true(e.id ~= g:id()) end
    assert.error_matches(function() s:capture(function() g2:memory() end) end,
                         "g:memory%(%) .*capture")
  end)

  it("walks the open graphs while the collector finalizes unreachable ones", function()
    -- each cuda.memory() walks graphs no one holds any more, whose
    -- finalizers the walk's own allocations may run (seen on an H200: the
    -- records of such a graph freed under the walk)
    local s, m = cuda.stream(), H.kernels()
    local x = cuda.buffer("i32", 64):fill(0)
    local function capture()
      return s:capture(function()
        local t = cuda.buffer("i32", 64, { stream = s })
        t:copy(x, s)
        for _ = 1, 8 do m.inc_i32:launch(s, 1, 64, t, 64) end
        x:copy(t, s)
        t:free(s)
      end)
    end
    local kept = capture() -- one that every walk must find
    for _ = 1, 60 do
      for _ = 1, 4 do capture() end
      local found
      for _, e in ipairs(cuda.memory().graphs) do
        if e.id == kept:id() then found = e.allocations end
      end
      assert.equals(256, found)
    end
    kept:free()
    collectgarbage(); collectgarbage() -- the graphs go before the cap's spec
  end)

  it("refuses, under cuda.graph_memory_cap, a graph that takes the open graphs past it", function()
    local s = cuda.stream()
    local line -- of the capture
    local function allocating(n)
      line = debug.getinfo(1, "l").currentline + 1
      return s:capture(function()
        local b = cuda.buffer("i32", n, { stream = s })
        b:fill(1, s)
        b:free(s)
      end)
    end
    assert.is_nil(cuda.graph_memory_cap(10000))
    local a, b = allocating(1024), allocating(512)          -- 4096 + 2048 bytes
    local before = #cuda.memory().graphs
    local ok, err = pcall(allocating, 1024)
    assert.is_false(ok)
    assert.matches(("%%d+ allocates 4096 bytes, and with the 6144 bytes the open graphs allocate that " ..
                    "passes the cap of 10000; the most: #%d %%(4096 bytes%%), #%d %%(2048 bytes%%)")
                   :format(a:id(), b:id()), err)
    assert.matches(":" .. line .. ":", err, 1, true)
    assert.equals(before, #cuda.memory().graphs) -- the refused graph is gone
    local y = cuda.buffer("i32", 8)
    local plain = s:capture(function() y:fill(0, s) end) -- allocates nothing
    assert.is_truthy(plain)
    a:free()
    local c = allocating(1024)                             -- fits now
    assert.equals(10000, cuda.graph_memory_cap(false))
    assert.is_nil(cuda.graph_memory_cap())
    local d = allocating(4096)                             -- no cap
    for _, k in ipairs { 0, -1, 1.5, "x" } do
      assert.has_error(function() cuda.graph_memory_cap(k) end)
    end
    assert.error_matches(function() cuda.graph_memory_cap(0) end, "a positive number of bytes, or false")
    b:free(); c:free(); d:free(); plain:free()
  end)

  it("refuses, under cuda.graph_memory_cap, an update past it as it refuses a capture", function()
    local s = cuda.stream()
    local function body()
      local b = cuda.buffer("i32", 1024, { stream = s })
      b:fill(1, s)
      b:free(s)
    end
    local g, h = s:capture(body), s:capture(body)              -- 4096 bytes each
    assert.is_nil(cuda.graph_memory_cap(6000))                 -- a cap below them
    assert.error_matches(function() s:capture(body) end, "passes the cap of 6000")
    local line
    local ok, err = pcall(function()
      line = debug.getinfo(1, "l").currentline + 1
      g:update(body)
    end)
    assert.is_false(ok)
    assert.matches("spec/31%-graph_spec.lua:" .. line .. ": cuda.graph_memory_cap: cugraph.Graph #"
                   .. g:id() .. " allocates 4096 bytes, and with the 4096 bytes the open graphs "
                   .. "allocate that passes the cap of 6000", err)
    h:free()                                                   -- fits now: the
    err = H.error_of(function() g:update(body) end)            -- driver's turn,
    assert.matches("cuGraphExecUpdate", err)                   -- which updates no
    assert.not_matches("graph_memory_cap", err)                -- memory nodes
    g:launch()
    s:synchronize()
    assert.equals(6000, cuda.graph_memory_cap(false))
    g:free()
  end)
end)

describe("g:profile()", function()
  local m, s
  before_each(function()
    m = H.kernels()
    s = cuda.stream()
  end)

  -- The nodes p.lines counts, and the trace at path (removed) with the
  -- number of its events.
  local function line_nodes(p)
    local n = 0
    for _, l in ipairs(p.lines) do n = n + l.nodes end
    return n
  end
  local function trace_of(path)
    local text = assert(io.open(path)):read("a")
    os.remove(path)
    local _, events = text:gsub('"ph": "X"', "")
    return text, events
  end

  it("times each node of a copy, names its kind, kernel, label and line, and sums the lines", function()
    local x, y = cuda.buffer("i32", 1024):fill(0), cuda.buffer("f32", 256):fill(0)
    local k = cuda.scalar("f32", 2)
    local here = debug.getinfo(1, "S").source:gsub("^@", "")
    local lineA
    local g = s:capture(function()
      for _ = 1, 3 do m.inc_i32:launch(s, 4, 256, x, 1024) end lineA = debug.getinfo(1, "l").currentline
      s:label("add", function() m.add_scalar_f32:launch(s, 1, 256, y, k, 256) end)
      x:view(0, 1):fill(7, s)
    end)
    local p = g:profile(4)
    assert.equals(4, p.replays)
    assert.is_true(p.us > 0 and p.profiled_us > 0 and p.overhead > 0)
    assert.equals(5, #p.nodes)
    local kinds, starts = {}, {}
    for i, nd in ipairs(p.nodes) do
      assert.equals(i, nd.index)
      assert.equals(here, nd.source)
      kinds[i] = nd.kind .. (nd.name and ":" .. nd.name or "") .. (nd.label and "[" .. nd.label .. "]" or "")
      -- its first event records before it starts, its second after it
      assert.is_true(nd.min_us >= 0 and nd.min_us <= nd.us and nd.us <= nd.max_us, nd.kind)
      starts[i] = nd.start_us
    end
    assert.same({ "kernel:inc_i32", "kernel:inc_i32", "kernel:inc_i32",
                  "kernel:add_scalar_f32[add]", "memset" }, kinds)
    assert.equals(lineA, p.nodes[1].line)
    assert.equals(lineA, p.nodes[3].line)
    assert.equals(lineA + 1, p.nodes[4].line)
    for i = 2, 5 do -- a chain: each starts when the one before has ended
      assert.is_true(starts[i] >= starts[i - 1], "node " .. i .. " starts before node " .. i - 1)
    end
    -- the lines: the three launches of line A as one, the most time first
    local sums = {}
    for i, l in ipairs(p.lines) do
      sums[l.line] = l
      if i > 1 then assert.is_true(l.us <= p.lines[i - 1].us) end
    end
    assert.equals(3, sums[lineA].nodes)
    assert.near(p.nodes[1].us + p.nodes[2].us + p.nodes[3].us, sums[lineA].us, 1e-3)
    -- the work ran 3n + 2 times, the scalar's value in every replay
    assert.equals(3 * 3 * 4 + 3 * 2, x:download()[2])
    assert.equals(7, x:download()[1])
    assert.equals(2 * (3 * 4 + 2), y:download()[256])
  end)

  it("writes the last replay as a Chrome trace", function()
    local x = cuda.buffer("i32", 64):fill(0)
    local g = s:capture(function()
      s:label('say "hi"', function() m.inc_i32:launch(s, 1, 64, x, 64) end)
      m.inc_i32:launch(s, 1, 64, x, 64)
    end)
    local path = os.tmpname()
    local p = g:profile { n = 2, trace = path }
    assert.equals(path, p.trace)
    local f = assert(io.open(path))
    local text = f:read("a")
    f:close()
    os.remove(path)
    assert.matches('^{"displayTimeUnit": "ns", "traceEvents": %[', text)
    local _, events = text:gsub('"ph": "X"', "")
    assert.equals(2, events)
    assert.matches('"label": "say \\"hi\\""', text, 1, true)
    assert.matches('"name": "inc_i32", "cat": "kernel"', text, 1, true)
    assert.matches("%]}\n$", text)
    assert.error_matches(function() g:profile { trace = "/nonexistent/dir/t.json" } end,
      "g:profile: cannot open /nonexistent/dir/t.json")
  end)

  it("times each branch of a fork and the node that joins them", function()
    local x, y = cuda.buffer("i32", 64):fill(0), cuda.buffer("i32", 64):fill(0)
    local s2 = cuda.stream()
    local g = s:capture(function()
      m.inc_i32:launch(s, 1, 64, x, 64)      -- a
      s2:wait(s)
      m.inc_i32:launch(s2, 1, 64, y, 64)     -- b, beside c
      m.inc_i32:launch(s, 1, 64, x, 64)      -- c
      s:wait(s2)
      m.inc_i32:launch(s, 1, 64, x, 64)      -- d, after b and c
    end)
    local p = g:profile(3)
    assert.equals(4, #p.nodes)
    for _, nd in ipairs(p.nodes) do
      assert.is_true(nd.min_us >= 0 and nd.min_us <= nd.us and nd.us <= nd.max_us)
    end
    local a, d = p.nodes[1], p.nodes[4]
    assert.equals(0, a.start_us)
    assert.is_true(d.start_us >= p.nodes[2].start_us and d.start_us >= p.nodes[3].start_us)
    assert.equals(3 * (3 * 3 + 2), x:download()[1])
    assert.equals(3 * 3 + 2, y:download()[1])
  end)

  it("times a child graph and each of its nodes", function()
    local x = cuda.buffer("i32", 64):fill(0)
    local line0 = debug.getinfo(1, "l").currentline
    local inmost = s:capture(function() m.inc_i32:launch(s, 1, 64, x, 64) end)
    local inner = s:capture(function()
      m.inc_i32:launch(s, 1, 64, x, 64)
      s:label("deeper", function() inmost:launch(s) end)
    end)
    local g = s:capture(function() inner:launch(s); m.inc_i32:launch(s, 1, 64, x, 64) end)
    local p = g:profile(2)
    local got = {}
    for i, nd in ipairs(p.nodes) do
      got[i] = ("%s %s %s %s %s"):format(nd.kind, nd.line - line0, nd.depth or 0,
                                         nd.parent or "-", nd.children or "-")
      assert.is_true(nd.min_us >= 0 and nd.us <= nd.max_us)
    end
    -- the child graph, its nodes (the deeper child's after it), then the rest
    assert.same({ "graph 6 0 - 2", "kernel 3 1 1 -", "graph 4 1 1 1",
                  "kernel 1 2 3 -", "kernel 6 0 - -" }, got)
    assert.equals(inner:id(), p.nodes[1].graph)
    assert.equals(inmost:id(), p.nodes[3].graph)
    assert.equals("deeper", p.nodes[3].label)
    assert.equals("inc_i32", p.nodes[2].name)
    assert.equals(1, p.nodes[1].node)      -- the graph's own nodes only
    assert.is_nil(p.nodes[2].node)
    local nlines = 0 -- the lines count the nodes that are no child graphs
    for _, l in ipairs(p.lines) do nlines = nlines + l.nodes end
    assert.equals(3, nlines)
    assert.equals(3 * (3 * 2 + 2), x:download()[1])
  end)

  it("times the kernels of a graph with conditional nodes from CUPTI's records, and the loop as a whole", function()
    if H.no_cupti then return pending(H.no_cupti) end
    local x = cuda.buffer("i32", 64):fill(0)
    local c = cuda.condition(1)
    H.settle()
    local line0 = debug.getinfo(1, "l").currentline
    local g = s:capture(function()
      m.inc_i32:launch(s, 1, 64, x, 64)
      s:loop_while(c, function()
        m.inc_i32:launch(s, 1, 64, x, 64)
        c:count_down(s, 3)                 -- three turns a replay
      end)
    end)
    local path = os.tmpname()
    local p = g:profile { n = 3, trace = path, cupti = true }
    assert.equals("activity", p.method)
    assert.is_nil(p.note)
    local got = {}
    for i, nd in ipairs(p.nodes) do
      got[i] = ("%s %s %d %s %s"):format(nd.kind, nd.line - line0, nd.depth, tostring(nd.runs),
                                         tostring(nd.children))
      assert.is_true(nd.us > 0 and nd.min_us <= nd.us and nd.us <= nd.max_us, got[i])
    end
    -- one record a node a replay (the last turn's), the loop's own span
    assert.same({ "kernel 2 0 1 nil", "conditional 3 0 nil 2", "kernel 4 1 1 nil",
                  "kernel 5 1 1 nil" }, got)
    assert.equals("inc_i32", p.nodes[3].name)
    assert.is_true(p.nodes[2].us >= p.nodes[3].us + p.nodes[4].us)
    assert.is_true(p.us > 0 and p.profiled_us > 0 and p.overhead > 0)
    assert.equals(3, line_nodes(p))      -- the kernels' lines, not the loop's
    local text, events = trace_of(path)
    assert.equals(3, events)             -- the last replay's kernel records
    assert.matches('"name": "inc_i32", "cat": "kernel"', text)
    -- 1 + 3 + 3 replays with activity, 1 + 3 without, four incs each
    assert.equals(11 * 4, x:download()[1])
  end)

  it("times a graph with conditional nodes as a whole where CUPTI cannot be had", function()
    local code, out = H.script([[
      local cuda = require "cugraph"
      local m = cuda.load_module(os.getenv("CUGRAPH_LUA_BUILD") .. "/kernels.ptx")
      local s, x, c = cuda.stream(), cuda.buffer("i32", 64):fill(0), cuda.condition(1)
      local g = s:capture(function()
        s:branch(c, function() m.inc_i32:launch(s, 1, 64, x, 64) end)
      end)
      local q = g:profile { n = 3, cupti = true }
      print(q.note)
      print(q.us > 0, q.nodes[1].kind, q.nodes[1].us, q.lines, q.method)
      print(g:profile(2).method) -- by default: stamps, no tool needed
    ]], "CUGRAPH_LUA_LIBCUPTI=/nonexistent/libcupti.so")
    assert.equals(0, code, out)
    assert.matches("cannot be timed by CUPTI's kernel records %(.*CUPTI.*%): they come without times", out)
    assert.matches("true\tconditional\tnil\tnil\tnil", out)
    assert.matches("\nstamps\n", out)
  end)

  it("times every turn of a loop's body by stamps, the loop as a whole, and the lines", function()
    local x = cuda.buffer("i32", 64):fill(0)
    local c = cuda.condition(1)
    local line0 = debug.getinfo(1, "l").currentline
    local g = s:capture(function()
      m.inc_i32:launch(s, 1, 64, x, 64)
      s:loop_while(c, function()
        m.inc_i32:launch(s, 1, 64, x, 64)
        s:label("twice", function() m.inc_i32:launch(s, 1, 64, x, 64) end)
        c:count_down(s, 3)                 -- three turns a replay
      end)
      x:view(1, 1):fill(5, s)
    end)
    local path = os.tmpname()
    local p = g:profile { n = 4, trace = path }
    assert.equals("stamps", p.method)
    assert.is_nil(p.note)
    local got = {}
    for i, nd in ipairs(p.nodes) do
      got[i] = ("%s %d %d %s %s"):format(nd.kind, nd.line - line0, nd.depth, tostring(nd.runs),
                                         tostring(nd.children))
      assert.is_true(nd.us >= 0 and nd.min_us <= nd.us and nd.us <= nd.max_us, got[i])
    end
    -- every turn counts: three runs a replay of each body node
    assert.same({ "kernel 2 0 1 nil", "conditional 3 0 nil 3", "kernel 4 1 3 nil",
                  "kernel 5 1 3 nil", "kernel 6 1 3 nil", "fill 8 0 1 nil" }, got)
    assert.equals("twice", p.nodes[4].label)
    assert.equals("cg_cond_countdown", p.nodes[5].name)
    local body = p.nodes[3].us + p.nodes[4].us + p.nodes[5].us
    assert.is_true(body > 0 and p.nodes[2].us >= body * 0.9, "the loop spans its turns")
    assert.is_true(p.stamp_us >= 0 and p.stamp_us < p.nodes[2].us)
    assert.is_true(p.us > 0 and p.profiled_us > 0 and p.overhead > 0)
    assert.equals(5, line_nodes(p)) -- the body's lines count, not the loop's
    -- g:dot shades the loop and its body's nodes by these times
    local dot = os.tmpname()
    g:dot(dot, { profile = p })
    local f = assert(io.open(dot))
    local drawn = f:read("a")
    f:close()
    os.remove(dot)
    local _, shaded = drawn:gsub('%d+%.%d us", style=filled, fillcolor="#ff%x%x%x%x"', "")
    assert.equals(6, shaded, drawn)
    assert.matches('conditional\\n[^"]*%d+%.%d us", style=filled', drawn)
    -- a profile prints as its report, a line a node, the body's indented
    local report = tostring(p)
    assert.matches("^profile %(stamps%): %d+%.%d us a replay, %d+%.%d profiled %(%d+%.%d+x%)", report)
    assert.matches("\n  conditional +line %d+ +%d+%.%d us  %(its body's 3 nodes below%)", report)
    assert.matches("\n    kernel +inc_i32 +line %d+ +%d+%.%d us  in 3 runs", report)
    if H.sim then -- the simulator's clock, and its count of a replay's instructions
      assert.matches("on the PTX simulator: its own clock, not a GPU's timings; %d+ thread%-instructions a replay",
                     report)
      assert.is_true(math.type(p.instructions) == "integer" and p.instructions > 0)
    else
      assert.is_nil(report:find("simulator"))
    end
    local text, events = trace_of(path)
    assert.equals(6, events)               -- each node's last run
    assert.matches('"label": "twice"', text, 1, true)
    -- 1 + 4 replays of the graph, 1 + 4 + 4 of the copy: 7 incs each
    assert.equals(14 * 7, x:download()[1])
    assert.equals(5, x:download()[2])
  end)

  it("profiles by stamps nested bodies, forks, kernels given a condition, and the graph's current buffers", function()
    local x, y = cuda.buffer("u32", 64):fill(0), cuda.buffer("u32", 64):fill(0)
    local z, w = cuda.buffer("u32", 64):fill(0), cuda.buffer("u32", 64):fill(0)
    local outer, inner = cuda.condition(1), cuda.condition(1)
    local s2 = cuda.stream()
    local g = s:capture(function()
      s2:wait(s)
      m.iota_u32:launch(s2, 1, 64, y, 0, 64)          -- beside the loop
      s:loop_while(outer, function()
        s:branch(inner, function() m.count_to:launch(s, 1, 1, x, inner, 1000) end)
        outer:count_down(s, 2)
      end)
      s:wait(s2)
      m.count_to:launch(s, 1, 1, z, outer, 1000)       -- outer's handle, in the top
    end)
    g:rebind(z, w)                                      -- the copy follows
    local p = g:profile(2)
    assert.equals("stamps", p.method)
    local got = {}
    for i, nd in ipairs(p.nodes) do
      got[i] = ("%s %d %s"):format(nd.name or nd.kind, nd.depth, tostring(nd.runs or nd.children))
      assert.is_true(nd.us >= 0, got[i]) -- a GPU's timer ticks coarsely
    end
    assert.same({ "iota_u32 0 1", "conditional 0 3", "conditional 1 1", "count_to 2 2",
                  "cg_cond_countdown 1 2", "count_to 0 1" }, got)
    assert.is_true(p.nodes[2].us > 0)
    -- 1 + 2 replays of the graph, 1 + 2 + 2 of the copy: two turns each
    -- in the body, and the top's count_to in w since the rebind
    assert.equals(8 * 2, x:download()[1])
    assert.equals(0, z:download()[1])
    assert.equals(8, w:download()[1])
    assert.equals(63, y:download()[64])
  end)

  it("says why a closure that records other work now cannot be profiled by stamps", function()
    local x = cuda.buffer("i32", 64):fill(0)
    local c = cuda.condition(1)
    local k = 1
    local g = s:capture(function()
      s:loop_while(c, function()
        for _ = 1, k do m.inc_i32:launch(s, 1, 64, x, 64) end
        c:count_down(s, 2)
      end)
    end)
    k = 2
    local p = g:profile(2)
    assert.matches("cannot be timed by stamps %(its closure, captured again, recorded 4 nodes, not 3", p.note)
    assert.is_nil(p.nodes[1].us)
    k = 1
    assert.equals("stamps", g:profile(2).method)
    local boom, xb = true, cuda.buffer("i32", 64):fill(0)
    local gb = s:capture(function() -- a closure that raises when run again
      s:loop_while(c, function()
        if not boom then error("boom") end
        m.inc_i32:launch(s, 1, 64, xb, 64)
        c:count_down(s, 2)
      end)
    end)
    boom = false
    assert.error_matches(function() gb:profile(1) end, "boom")
    boom = true
    assert.equals(2, gb:profile(1).nodes[2].runs)
    gb:free()
    xb:free() -- nothing of the failed profile's capture holds it
    local a, z = cuda.buffer("i64", 4):fill(0), cuda.buffer("i64", 4):fill(0)
    local gv = s:capture(function() m.add_i64:launch(s, 1, 4, a, z, 5, 4) end)
    gv:node(1):set(a, z, 7, 4) -- an 8-byte value the copy follows too
    assert.equals("stamps", gv:profile { n = 1, method = "stamps" }.method)
    assert.equals(7, a:download()[4])
    local blas = cuda.blas(s) -- nodes the runtime did not record
    local bx, by = cuda.buffer("f32", 64):fill(1), cuda.buffer("f32", 64):fill(0)
    local gl = s:capture(function() blas:axpy(2, bx, by, s) end)
    assert.matches("by stamps %(its capture recorded none of its nodes%)",
                   gl:profile { n = 1, method = "stamps" }.note)
    assert.error_matches(function() g:profile { method = "events" } end,
      "cugraph.Graph #" .. g:id() .. " has conditional nodes, which the driver does not copy")
    assert.error_matches(function() g:profile { method = "clock" } end, "invalid option 'clock'")
    local h = s:capture(function() m.inc_i32:launch(s, 1, 64, x, 64) end)
    local q = h:profile { n = 2, method = "stamps" }  -- any graph, asked
    assert.equals("stamps", q.method)
    assert.equals(1, q.nodes[1].runs)
    local line = debug.getinfo(1, "l").currentline
    h:update(function() m.inc_i32:launch(s, 1, 32, x, 64) end)
    q = h:profile { n = 2, method = "stamps" }       -- the closure it took last
    assert.equals(line + 1, q.nodes[1].line)
    assert.is_true(q.nodes[1].us > 0)
  end)

  it("leaves a node that node:enable(false) turned off out of the copy's replays too", function()
    local x = cuda.buffer("i32", 64):fill(0)
    local g = s:capture(function()
      m.inc_i32:launch(s, 1, 64, x, 64)
      m.inc_i32:launch(s, 1, 64, x, 64)
    end)
    g:node(2):enable(false)
    local p = g:profile(2)
    assert.is_nil(p.nodes[1].enabled)
    assert.is_false(p.nodes[2].enabled)
    assert.equals(3 * 2 + 2, x:download()[1]) -- 3n + 2 replays, one launch each
  end)

  it("counts each node's thread-instructions on the simulator, and only there", function()
    local x = cuda.buffer("i32", 1024):fill(0)
    local g = s:capture(function()
      m.inc_i32:launch(s, 4, 256, x, 1024)
      m.inc_i32:launch(s, 1, 32, x, 1024)
      x:fill(3, s)
    end)
    local p = g:profile(3)
    if not H.sim then
      for _, nd in ipairs(p.nodes) do assert.is_nil(nd.instructions) end
      assert.is_nil(p.lines[1].instructions)
      return
    end
    local big, small, fill = p.nodes[1].instructions, p.nodes[2].instructions, p.nodes[3].instructions
    assert.is_true(small > 0)
    assert.equals(32 * small, big)   -- the same code on 32 times the threads
    assert.equals(0, fill)           -- a memset runs no kernel
    local sum = 0
    for _, l in ipairs(p.lines) do sum = sum + l.instructions end
    assert.equals(big + small, sum)
  end)

  it("shades g:dot's nodes by a profile's times, and renders PNG and SVG with Graphviz", function()
    local x = cuda.buffer("i32", 1024):fill(0)
    local g = s:capture(function()
      m.inc_i32:launch(s, 4, 256, x, 1024)
      s:label("two", function() m.inc_i32:launch(s, 4, 256, x, 1024) end)
    end)
    local p = g:profile(2)
    local path = os.tmpname()
    g:dot(path, { profile = p })
    local f = assert(io.open(path))
    local text = f:read("a")
    f:close()
    local _, shaded = text:gsub('%d+%.%d us", style=filled, fillcolor="#ff%x%x%x%x"', "")
    assert.equals(2, shaded)
    assert.error_matches(function() g:dot(path, { prof = p }) end, "unknown option 'prof'")
    assert.error_matches(function() g:dot(path, { profile = 1 }) end, "table expected")
    assert.error_matches(function() g:dot(path, { profile = {} }) end,
      "opts.profile must be what g:profile returned")
    os.remove(path)
    -- images: by Graphviz's dot; without it, a message that says so
    local code, out = H.script(([[
      local cuda = require "cugraph"
      local s = cuda.stream()
      local b = cuda.buffer("i32", 4)
      local g = s:capture(function() b:fill(0, s) end)
      print(select(2, pcall(g.dot, g, %q)))
    ]]):format(path .. ".png"), "CUGRAPH_LUA_DOT=/nonexistent/dot")
    assert.equals(0, code, out)
    assert.matches("writing " .. path:gsub("%p", "%%%0") .. "%.png needs Graphviz's dot, which is not installed", out)
    if not os.execute("command -v dot >/dev/null 2>&1") then
      pending("Graphviz's dot is not installed")
      return
    end
    for _, ext in ipairs { ".png", ".svg" } do
      g:dot(path .. ext, { profile = p })
      f = assert(io.open(path .. ext, "rb"))
      local head = f:read(8)
      f:close()
      os.remove(path .. ext)
      assert.equals(ext == ".png" and "\137PNG\r\n\26\n" or "<?xml ve", head)
    end
    assert.error_matches(function() g:dot("/no/such/dir/g.png") end, "g:dot: dot could not render /no/such/dir/g.png")
  end)

  it("refuses what it cannot profile, naming why", function()
    local g = s:capture(function()
      local b = cuda.buffer("i32", 16, { stream = s })
      b:fill(0, s)
      b:free(s)
    end)
    assert.error_matches(function() g:profile() end,
      "g:profile: cugraph.Graph #" .. g:id() .. " allocates or frees memory in its nodes")
    local x = cuda.buffer("i32", 16):fill(0)
    local h = s:capture(function() m.inc_i32:launch(s, 1, 16, x, 16) end)
    assert.error_matches(function() h:profile(0) end, "the number of replays must be 1 to 100000")
    assert.error_matches(function() h:profile { m = 2 } end, "unknown option 'm'")
    assert.error_matches(function() h:profile { stream = 3 } end, "cugraph.Stream expected")
    assert.error_matches(function() h:profile { trace = 1 } end, "opts.trace must be a path")
    assert.error_matches(function() h:profile { trace = "t\0.json" } end,
      "opts.trace contains a NUL byte")
    assert.error_matches(function() s:capture(function() h:profile() end) end,
      "g:profile%(%) inside a graph capture")
    h:free()
    assert.error_matches(function() h:profile() end, "freed")
    assert.equals(0, x:download()[1])
  end)
end)

describe("the script's trace (cugraph-lua --profile) and NVTX ranges", function()
  -- a child script: eager launches, a fill, copies, a capture and two
  -- replays; its lines are those below
  local src = [[
local cuda = require "cugraph"
local m = cuda.load_module(arg[1] .. "/kernels.ptx")
local s = cuda.stream()
local x, y = cuda.buffer("i32", 64):fill(0), cuda.buffer("i32", 64)
for _ = 1, 3 do m.inc_i32:launch(s, 1, 64, x, 64) end
local g = s:capture(function() s:label("step", function() m.inc_i32:launch(s, 1, 64, x, 64) end) end)
g:launch(s); g:launch(s)
y:copy(x, s)
print(y:download()[1])
]]
  local function child(opts, env)
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write(src)
    f:close()
    -- NVTX's tool is the process's one injection: no compute-sanitizer then
    local code, out = H.run(opts .. " " .. H.quote(path) .. " " .. H.quote(H.build), env,
                            { plain = env ~= nil and env:find("NVTX_INJECTION64_PATH", 1, true) ~= nil })
    return code, out, path
  end
  local function events(file)
    local ev = {}
    for line in assert(io.open(file)):lines() do
      if line:find('"ph": "X"', 1, true) and not line:find('"graph kernel"', 1, true) then
        local e = {}
        e.name = line:match('"name": "([^"]*)"')
        e.cat = line:match('"cat": "([^"]*)"')
        e.tid = tonumber(line:match('"tid": (%d+)'))
        e.ts = tonumber(line:match('"ts": ([%d.]+)'))
        e.dur = tonumber(line:match('"dur": ([%d.]+)'))
        e.line = line:match('"line": "([^"]*)"')
        e.instructions = tonumber(line:match('"instructions": (%d+)'))
        ev[#ev + 1] = e
      end
    end
    return ev
  end

  it("times every eager launch, fill, copy and replay of a script with its Lua line", function()
    local trace = os.tmpname()
    local code, out, script = child("--profile=" .. H.quote(trace))
    assert.equals(0, code, out)
    assert.matches("\n?5\n", out)
    assert.matches("profile of 8 calls written to " .. trace:gsub("%p", "%%%0"), out)
    -- by line and name on stderr: the three launches of line 5 as one row
    assert.matches("calls +total us +mean us +line", out)
    assert.matches("\n +3 +[%d.]+ +[%d.]+  [^\n]*:5  inc_i32\n", out)
    assert.matches("\n +2 +[%d.]+ +[%d.]+  [^\n]*:7  graph #1\n", out)
    local ev = events(trace)
    local got = {}
    for i, e in ipairs(ev) do
      got[i] = e.cat .. ":" .. e.name .. "@" .. e.line:match(":(%d+)$")
      assert.equals(script, e.line:match("^(.*):%d+$"))
      assert.is_true(e.ts >= 0 and e.dur >= 0, got[i])
    end
    -- the capture's launch is no call of its own: the replays are
    assert.same({ "fill:fill@4", "kernel:inc_i32@5", "kernel:inc_i32@5", "kernel:inc_i32@5",
                  "graph:graph #1@7", "graph:graph #1@7", "copy:copy@8", "copy:download@9" }, got)
    for i = 3, 6 do -- one stream: each call starts after the one before ended
      assert.equals(ev[2].tid, ev[i].tid)
      assert.is_true(ev[i].ts >= ev[i - 1].ts + ev[i - 1].dur - 1e-3, got[i])
    end
    assert.matches('"process_name".*8 calls, 0 not timed', io.open(trace):read("a"))
    if H.sim then -- the simulator's counts: the same launch, the same count
      assert.is_true(ev[2].instructions > 0)
      assert.equals(ev[2].instructions, ev[4].instructions)
      assert.equals(ev[2].instructions, ev[5].instructions) -- a replay of one such launch
      assert.equals(0, ev[1].instructions)
    else
      assert.is_nil(ev[2].instructions)
    end
    os.remove(trace)
    os.remove(script)
  end)

  it("takes the file from CUGRAPH_LUA_PROFILE, names a default, and says when it cannot write", function()
    local trace = os.tmpname()
    local code, out, script = child("", "CUGRAPH_LUA_PROFILE=" .. H.quote(trace))
    assert.equals(0, code, out)
    assert.equals(8, #events(trace))
    code, out = child("", "CUGRAPH_LUA_PROFILE=/nonexistent/dir/t.json")
    assert.equals(0, code, out) -- the script's own result stands
    assert.matches("cannot write the profile /nonexistent/dir/t.json", out)
    code, out = H.run("--profile= " .. H.quote(script))
    assert.equals(1, code)
    assert.matches("unrecognized option '%-%-profile='", out)
    assert.matches("%-%-profile%[=path%]", select(2, H.run("-h")))
    os.remove(trace)
    os.remove(script)
  end)

  it("gives each rank of a job a file of its own", function()
    local trace = os.tmpname()
    local paths = {}
    for r = 0, 1 do
      local code, out, script = child("--profile=" .. H.quote(trace .. ".json"),
                                      "CUGRAPH_LUA_DEVICE=0 CUGRAPH_RANK=" .. r .. " CUGRAPH_WORLD_SIZE=2")
      assert.equals(0, code, out)
      paths[r] = trace .. "-rank" .. r .. ".json"
      assert.matches("written to " .. paths[r]:gsub("%p", "%%%0"), out)
      assert.equals(8, #events(paths[r]))
      os.remove(script)
    end
    assert.is_nil(io.open(trace .. ".json"))
    os.remove(paths[0]); os.remove(paths[1]); os.remove(trace)
  end)

  it("pops the NVTX range of a call the driver failed", function()
    if H.gpu then return pending("the test double's injected faults") end
    local log = os.tmpname()
    local script = "local cuda = require 'cugraph'\nlocal x = cuda.buffer('i32', 64)\n"
                   .. "print(pcall(x.fill, x, 1))\nx:fill(2)\nprint(x:download()[1])\n"
    local code, out = H.script(script, "CUDA_DOUBLE_FAULT=cuMemsetD32Async:1:2 NVTX_INJECTION64_PATH="
                               .. H.quote(H.build .. "/libnvtx-tool.so") .. " NVTX_TOOL_LOG=" .. H.quote(log),
                               { plain = true })
    assert.equals(0, code, out)
    assert.matches("false\t.-CUDA_ERROR_OUT_OF_MEMORY.-\n2\n", out)
    local lines = {}
    for l in assert(io.open(log)):lines() do lines[#lines + 1] = (l:gsub("%(.-:(%d+)%)", "(:%1)")) end
    os.remove(log)
    assert.same({ "push fill (:3)", "pop", "push fill (:4)", "pop", "push copy download (:5)", "pop" }, lines)
  end)

  it("puts each call in an NVTX range named by its kernel and Lua line, in captures too", function()
    local log = os.tmpname()
    local code, out, script = child("", "NVTX_INJECTION64_PATH=" .. H.quote(H.build .. "/libnvtx-tool.so")
                                    .. " NVTX_TOOL_LOG=" .. H.quote(log))
    assert.equals(0, code, out)
    local lines = {}
    for l in assert(io.open(log)):lines() do lines[#lines + 1] = (l:gsub(script:gsub("%p", "%%%0"), "@")) end
    local k = "push kernel inc_i32 (@:5)"
    assert.same({ "push fill (@:4)", "pop", k, "pop", k, "pop", k, "pop",
                  "push step", "push kernel inc_i32 (@:6)", "pop", "pop", -- at capture
                  "push graph #1 (@:7)", "pop", "push graph #1 (@:7)", "pop",
                  "push copy (@:8)", "pop", "push copy download (@:9)", "pop" }, lines)
    os.remove(log)
    os.remove(script)
  end)
end)
