-- Nodes as the graph knows them: records of captured work, rebinding by
-- object, per-node arguments and enabled flags, and memory graphs own.
local H = require "support.helper"
local cuda = H.cuda

local function host_jacobi(x, steps)
  local n = #x
  for _ = 1, steps do
    local y = {}
    for i = 1, n do
      y[i] = (i == 1 or i == n) and x[i] or 0.5 * (x[i - 1] + x[i + 1])
    end
    x = y
  end
  return x
end

describe("graph nodes", function()
  local m, s
  before_each(function()
    m = H.kernels()
    s = cuda.stream()
  end)

  it("are recorded with kind, kernel, arguments and source line", function()
    local x, y = cuda.buffer("f32", 8):fill(1), cuda.buffer("f32", 8):fill(0)
    local line
    local g = s:capture(function()
      line = debug.getinfo(1, "l").currentline + 1
      m.saxpy:launch(s, 1, 8, 2.0, x, y, 8)
      y:fill(3, s)
      x:copy(y, s)
    end)
    local n, list = g:nodes("detail")
    assert.equals(3, n)
    local k = list[1]
    assert.same({ "kernel", "fill", "copy" },
                { list[1].kind, list[2].kind, list[3].kind })
    assert.equals(1, k.index)
    assert.equals(m.saxpy, k.kernel)
    assert.equals("saxpy", k.name)
    assert.same({ 2.0, x, y, 8 }, k.args)
    assert.equals(line, k.line)
    assert.matches("33%-nodes_spec%.lua", k.source)
    assert.equals(line + 1, list[2].line)
    assert.equals(y, list[2].buffer)
    assert.equals(x, list[3].dst)
    assert.equals(y, list[3].src)
    assert.is_true(k.enabled)
    assert.equals(0, k.depth)
    -- today's shape stays
    local count, kinds = g:nodes()
    assert.equals(3, count)
    assert.same({ "kernel", "memset", "memcpy" }, kinds)
  end)

  it("are addressed by index or by the label given at capture", function()
    local x = cuda.buffer("i32", 4):fill(0)
    local g = s:capture(function()
      m.inc_i32:launch(s, 1, 4, x, 4)
      s:label("second", function() m.inc_i32:launch(s, 1, 4, x, 4) end)
    end)
    local a, b = g:node(1), g:node("second")
    assert.equals(1, a:index())
    assert.equals(2, b:index())
    assert.equals("second", b:info().label)
    assert.matches("cugraph.Node 2 of cugraph.Graph #%d+ %(kernel inc_i32 at .*33%-nodes_spec%.lua:%d+%)",
                   tostring(b))
    assert.has_error(function() g:node(3) end)
    assert.has_error(function() g:node("nothing") end,
                     "cugraph.Graph #" .. g:id() .. " has no node labelled 'nothing'")
    assert.has_error(function() s:label("x", function() end) end,
                     "s:label() outside a capture: labels name the nodes that a capture makes")
  end)

  it("label the graph's dot output with kernel names and source lines", function()
    local x = cuda.buffer("i32", 4):fill(0)
    local g = s:capture(function()
      s:label("bump", function() m.inc_i32:launch(s, 1, 4, x, 4) end)
      x:fill(0, s)
    end)
    local path = os.tmpname()
    g:dot(path)
    local f = assert(io.open(path))
    local dot = f:read("a")
    f:close()
    os.remove(path)
    assert.matches("digraph", dot)
    assert.matches("kernel inc_i32 %[bump%]\\n[^\"]*33%-nodes_spec%.lua:%d+", dot)
    assert.matches("n0 %-> n1", dot)
  end)

  describe("g:rebind", function()
    it("makes every node that used a buffer use another", function()
      local a, b = cuda.buffer("i32", 4):fill(0), cuda.buffer("i32", 4):fill(10)
      local g = s:capture(function()
        m.inc_i32:launch(s, 1, 4, a, 4)
        m.inc_i32:launch(s, 1, 4, a, 4)
      end)
      g:launch()
      assert.same({ 2, 2, 2, 2 }, a:download())
      assert.equals(g, g:rebind(a, b))
      g:launch()
      assert.same({ 2, 2, 2, 2 }, a:download())
      assert.same({ 12, 12, 12, 12 }, b:download())
      assert.same({ 12, 12, 12, 12 }, b:download())
      local _, list = g:nodes("detail")
      assert.equals(b, list[1].args[1])
      assert.equals(b, list[2].args[1])
    end)

    it("moves the pins from the old object to the new", function()
      local a, b = cuda.buffer("i32", 4):fill(0), cuda.buffer("i32", 4):fill(0)
      local g = s:capture(function() m.inc_i32:launch(s, 1, 4, a, 4) end)
      assert.has_error(function() a:free() end)
      g:rebind(a, b)
      a:free() -- no node uses it now
      assert.matches("used by live cugraph.Graph #" .. g:id(),
                     select(2, pcall(b.free, b)))
      g:free()
      b:free()
    end)

    it("changes fills and copies, and scalars", function()
      local a, b = cuda.buffer("u32", 4):fill(0), cuda.buffer("u32", 4):fill(0)
      local c, d = cuda.buffer("u32", 4):fill(0), cuda.buffer("u32", 4):fill(0)
      local p, q = cuda.scalar("u32", 1), cuda.scalar("u32", 2)
      local g = s:capture(function()
        a:fill(7, s)
        c:copy(a, s)
        m.mark_u32:launch(s, 1, 1, c, p, 4)
      end)
      g:rebind(a, b, c, d, p, q)
      g:launch()
      s:synchronize()
      assert.same({ 0, 0, 0, 0 }, a:download())
      assert.same({ 7, 7, 7, 7 }, b:download())
      assert.same({ 0, 0, 0, 0 }, c:download())
      assert.same({ 7, 7, 3, 7 }, d:download()) -- out[pos] = pos + 1
      q:set(3) -- the graph flushes the new scalar before launches
      g:launch()
      assert.same({ 7, 7, 7, 4 }, d:download())
    end)

    it("checks type, count and use before the driver", function()
      local a = cuda.buffer("i32", 4):fill(0)
      local g = s:capture(function() m.inc_i32:launch(s, 1, 4, a, 4) end)
      assert.error_matches(function() g:rebind(a, cuda.buffer("f32", 4)) end,
        "bad argument #2 to 'rebind' %(cugraph.Buffer of f32%[4%] cannot replace "
        .. "cugraph.Buffer of i32%[4%]: the kind, element type and count must match%)")
      assert.has_error(function() g:rebind(a, cuda.buffer("i32", 5)) end)
      assert.has_error(function() g:rebind(a, cuda.scalar("i32", 0)) end)
      assert.has_error(function() g:rebind(a) end)
      -- arguments are numbered as written, self not counted
      assert.error_matches(function() g:rebind(cuda.buffer("i32", 4), a) end,
        "bad argument #1 to 'rebind' %(not used by any node that cugraph.Graph #"
        .. g:id() .. " recorded%)")
      local freed = cuda.buffer("i32", 4)
      freed:free()
      assert.error_matches(function() g:rebind(a, freed) end,
        "bad argument #2 to 'rebind' %(attempt to use a freed cugraph.Buffer%)")
    end)

    it("refuses 2D fills, bodies of conditional nodes and updated graphs", function()
      local d = cuda.buffer("f64", 4)
      local g = s:capture(function() d:fill(1, s) end)
      assert.has_error(function() g:rebind(d, cuda.buffer("f64", 4)) end)
      local x, y = cuda.buffer("i32", 4):fill(0), cuda.buffer("i32", 4):fill(0)
      local g2 = s:capture(function() m.inc_i32:launch(s, 1, 4, x, 4) end)
      g2:update(function() m.inc_i32:launch(s, 1, 4, x, 4) end)
      assert.has_error(function() g2:rebind(x, y) end)
      local c = cuda.condition(0)
      local g3 = s:capture(function()
        s:loop_while(c, function() m.inc_i32:launch(s, 1, 4, x, 4) end)
      end)
      local _, list = g3:nodes("detail")
      assert.same({ "conditional", "kernel" }, { list[1].kind, list[2].kind })
      assert.same({ 0, 1 }, { list[1].depth, list[2].depth })
      assert.matches("node 2 is in the body of a conditional node",
                     select(2, pcall(g3.rebind, g3, x, y)))
      assert.matches("node 1 %(conditional%) cannot change in place",
                     select(2, pcall(function() g3:node(1):enable(false) end)))
    end)

    it("runs a Jacobi iteration by swapping x and x_new, as the host does", function()
      local n, steps = 33, 40
      local init = {}
      for i = 1, n do init[i] = (i == 1) and 1.0 or (i == n and -1.0 or 0.0) end
      local x, xn = cuda.buffer("f64", init), cuda.buffer("f64", n):fill(0)
      local g = s:capture(function() m.jacobi_f64:launch(s, 1, n, xn, x, n) end)
      for _ = 1, steps do
        g:launch()
        g:rebind(x, xn, xn, x) -- the next sweep reads what this one wrote
        x, xn = xn, x
      end
      s:synchronize()
      local want, got = host_jacobi(init, steps), x:download()
      for i = 1, n do assert.near(want[i], got[i], 1e-12) end
    end)
  end)

  describe("records of launches on the capture stream", function()
    -- what the double counted of each entry point, from CUDA_DOUBLE_TRACE
    local function calls(src)
      local trace = os.tmpname()
      local code, out = H.script("local cuda = require 'cugraph'\n"
        .. "local m = cuda.load_module(os.getenv('CUGRAPH_LUA_BUILD') .. '/kernels.ptx')\n"
        .. src, "CUDA_DOUBLE_TRACE=" .. H.quote(trace))
      assert.equals(0, code, out)
      local n = {}
      for line in io.lines(trace) do
        local name, k = line:match("^(%S+) (%d+)$")
        n[name] = tonumber(k)
      end
      os.remove(trace)
      return n
    end

    it("ask the driver nothing per launch, and find their nodes when asked", function()
      if not H.double then return end -- the software drivers count calls
      local src = [[
        local s, x = cuda.stream(), cuda.buffer("i32", 4):fill(0)
        local g = s:capture(function()
          for _ = 1, N do m.inc_i32:launch(s, 1, 4, x, 4) end
        end)
        g:launch()
        assert(x:download()[1] == N)
      ]]
      local ten = calls(src:gsub("N", "10"))
      local hundred = calls(src:gsub("N", "100"))
      assert.equals(ten.cuStreamGetCaptureInfo, hundred.cuStreamGetCaptureInfo)
      assert.is_nil(hundred.cuGraphKernelNodeGetParams) -- nothing asked yet
      local asked = calls(src:gsub("N", "100") .. "g:rebind(x, cuda.buffer('i32', 4))")
      assert.equals(100, asked.cuGraphKernelNodeGetParams)
    end)

    it("are found before and beside a fork from the capture stream, which does not end their chain", function()
      local a, b, c = cuda.buffer("i32", 4):fill(0), cuda.buffer("i32", 4):fill(0),
                      cuda.buffer("i32", 4):fill(0)
      local s2 = cuda.stream()
      local g = s:capture(function()
        m.inc_i32:launch(s, 1, 4, a, 4)     -- 1
        s2:wait(s)
        m.inc_i32:launch(s2, 1, 4, b, 4)    -- 2, on the fork
        m.inc_i32:launch(s, 1, 4, a, 4)     -- 3, beside it
        s:wait(s2)
        m.inc_i32:launch(s, 1, 4, a, 4)     -- 4
      end)
      g:rebind(a, c)
      g:launch()
      s:synchronize()
      assert.same({ 0, 0, 0, 0 }, a:download())
      assert.same({ 1, 1, 1, 1 }, b:download())
      assert.same({ 3, 3, 3, 3 }, c:download())
    end)

    it("find the nodes around joins and library calls", function()
      local a, b, c = cuda.buffer("i32", 4):fill(0), cuda.buffer("i32", 4):fill(0),
                      cuda.buffer("i32", 4):fill(0)
      local y, v = cuda.buffer("f32", 4):fill(0), cuda.buffer("f32", 4):fill(1)
      local s2, h = cuda.stream(), cuda.blas(s)
      local g = s:capture(function()
        m.inc_i32:launch(s, 1, 4, a, 4)     -- 1
        m.inc_i32:launch(s, 1, 4, b, 4)     -- 2
        h:axpy(1, v, y)                     -- a library's nodes between
        m.inc_i32:launch(s, 1, 4, a, 4)     -- 3
        s2:wait(s)
        m.inc_i32:launch(s2, 1, 4, b, 4)    -- 4, on the fork
        m.inc_i32:launch(s, 1, 4, a, 4)     -- 5, beside it
        s:wait(s2)
        m.inc_i32:launch(s, 1, 4, a, 4)     -- 6, after the join
      end)
      g:rebind(b, c) -- nodes 2 and 4 only
      g:launch()
      s:synchronize()
      assert.same({ 4, 4, 4, 4 }, a:download())
      assert.same({ 0, 0, 0, 0 }, b:download())
      assert.same({ 2, 2, 2, 2 }, c:download())
      assert.same({ 1, 1, 1, 1 }, y:download())
      g:node(3):set(c, 4) -- node 3 now adds to c as well
      g:launch()
      s:synchronize()
      assert.same({ 7, 7, 7, 7 }, a:download())
      assert.same({ 5, 5, 5, 5 }, c:download())
      local handles = {}
      for i = 1, 6 do
        handles[i] = g:node(i):handle()
        assert.is_true(handles[i] ~= 0)
        for j = 1, i - 1 do assert.is_true(handles[i] ~= handles[j]) end
      end
    end)
  end)

  describe("nodes", function()
    it("take new arguments with the launch's checks", function()
      local a, b = cuda.buffer("i32", 4):fill(0), cuda.buffer("i32", 4):fill(5)
      local g = s:capture(function() m.inc_i32:launch(s, 1, 4, a, 4) end)
      local node = g:node(1)
      assert.equals(node, node:set(b, 2))
      g:launch()
      assert.same({ 6, 6, 5, 5 }, b:download())
      assert.same({ 0, 0, 0, 0 }, a:download())
      assert.has_error(function() node:set(b) end, "inc_i32: expected 2 arguments, got 1")
      assert.has_error(function() node:set(b, "4") end)
      assert.has_error(function() node:set(b, 1.5) end)
      a:free() -- unused now
    end)

    it("can be disabled and enabled again", function()
      local a = cuda.buffer("i32", 4):fill(0)
      local g = s:capture(function()
        m.inc_i32:launch(s, 1, 4, a, 4)
        s:label("second", function() m.inc_i32:launch(s, 1, 4, a, 4) end)
      end)
      local node = g:node("second")
      assert.is_true(node:enabled())
      node:enable(false)
      assert.is_false(node:enabled())
      g:launch()
      assert.same({ 1, 1, 1, 1 }, a:download())
      node:enable(true)
      g:launch()
      assert.same({ 3, 3, 3, 3 }, a:download())
      assert.has_error(function() node:enable(1) end)
    end)

    it("outlive nothing: a freed graph makes its nodes unusable", function()
      local a = cuda.buffer("i32", 4):fill(0)
      local g = s:capture(function() m.inc_i32:launch(s, 1, 4, a, 4) end)
      local node = g:node(1)
      g:free()
      assert.has_error(function() node:enable(false) end)
    end)
  end)

  describe("graph memory", function()
    it("allocates and frees inside a capture as graph nodes", function()
      local x = cuda.buffer("i32", 4):fill(1)
      local tmp
      local g = s:capture(function()
        tmp = cuda.buffer("i32", 4, { stream = s })
        tmp:copy(x, s)
        m.inc_i32:launch(s, 1, 4, tmp, 4)
        x:copy(tmp, s)
        tmp:free(s)
      end)
      local _, kinds = g:nodes()
      assert.same({ "mem_alloc", "memcpy", "kernel", "memcpy", "mem_free" }, kinds)
      local _, list = g:nodes("detail")
      assert.equals("alloc", list[1].kind)
      assert.equals("free", list[5].kind)
      assert.has_error(function() tmp:download() end, "attempt to use a freed cugraph.Buffer")
      g:launch()
      g:launch()
      assert.same({ 3, 3, 3, 3 }, x:download())
    end)

    it("keeps the synchronous allocation refused inside captures", function()
      assert.has_error(function()
        s:capture(function() cuda.buffer("f32", 4) end)
      end)
      local plain = cuda.buffer("f32", 4)
      assert.has_error(function()
        s:capture(function() plain:free(s) end)
      end)
    end)

    it("guards a graph whose allocation is still live", function()
      local out
      local g = s:capture(function()
        out = cuda.buffer("i32", 4, { stream = s })
        out:fill(4, s)
      end)
      g:launch()
      assert.same({ 4, 4, 4, 4 }, out:download())
      assert.has_error(function() g:launch() end)
      out:free()
      g:launch()
      out:free(s)
      s:synchronize()
      assert.has_error(function() out:free() end)
      local o
      local g2 = s:capture(function()
        o = cuda.buffer("i32", 4, { stream = s })
        o:fill(1, s)
      end, { auto_free = true })
      g2:launch()
      g2:launch()
      o:free() -- the last launch's allocation: the driver leaves it to us
    end)

    it("is stream-ordered outside captures", function()
      local b = cuda.buffer("f32", 16, { stream = s }):fill(2, s)
      assert.equals(16, #b)
      s:synchronize()
      assert.same(2, b:download()[16])
      b:free(s)
      s:synchronize()
      assert.has_error(function() b:download() end)
    end)

    it("is reported by cuda.memory and given back by cuda.trim", function()
      local mem = cuda.memory()
      assert.is_true(mem.total > 0 and mem.free <= mem.total)
      assert.equals(mem.total - mem.free, mem.used)
      for _, part in ipairs { mem.graph, mem.pool } do
        for _, k in ipairs { "used", "used_high", "reserved", "reserved_high" } do
          assert.is_true(math.type(part[k]) == "integer" and part[k] >= 0)
        end
      end
      cuda.trim()
      cuda.trim(1024)
      assert.has_error(function() cuda.trim(-1) end)
    end)
  end)
end)

describe("rebinding copies", function()
  it("keeps a partial copy's offsets, and refuses a buffer a host copy reads", function()
    local s = cuda.stream()
    local a = cuda.buffer("i32", { 1, 2, 3, 4 })
    local a2 = cuda.buffer("i32", { 10, 20, 30, 40 })
    local d = cuda.buffer("i32", 6):fill(0)
    local g = s:capture(function()
      d:copy(a, { src_offset = 1, dst_offset = 2, count = 2 }, s)
    end)
    g:launch()
    s:synchronize()
    assert.same({ 0, 0, 2, 3, 0, 0 }, d:download())
    g:rebind(a, a2)
    g:launch()
    s:synchronize()
    assert.same({ 0, 0, 20, 30, 0, 0 }, d:download())
    local h = cuda.host_buffer("i32", 4)
    local b, b2 = cuda.buffer("i32", 4):fill(5), cuda.buffer("i32", 4):fill(6)
    local g2 = s:capture(function() b:download_into(h, s) end)
    assert.error_matches(function() g2:rebind(b, b2) end, "host copy%) cannot change in place")
    g2:launch()
    s:synchronize()
    assert.equals(5, h[0])
    g:free()
    g2:free()
  end)
end)
