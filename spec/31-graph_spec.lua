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
                  conditions = 0, others = 0 }, mem.keeps)
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
end)
