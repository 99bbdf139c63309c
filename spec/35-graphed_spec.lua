-- cuda.graphed: a function written as eager code whose calls replay CUDA
-- graphs. A call records its work (no work is sent), compares it with the
-- graphs of its key, sets the nodes whose parameters changed in place, and
-- launches; other work builds a new graph from the record.
local H = require "support.helper"
local cuda = H.cuda

local m = H.kernels()
local N = 1024

-- y = a * x + y over the first n elements, on s.
local function saxpy(s, a, x, y, n)
  m.saxpy:launch(s, (n + 255) // 256, 256, a, x, y, n)
end

local function ramp(n, k)
  local t = {}
  for i = 1, n do t[i] = (i * k) % 17 end
  return t
end

describe("cuda.graphed", function()
  local s
  before_each(function() s = cuda.stream() end)

  it("gives the eager results, setting nodes in place for other buffers and numbers", function()
    local f = cuda.graphed(function(st, a, x, y, n)
      saxpy(st, a, x, y, n)
      y:fill(0, st) -- the same work on another buffer below: its node too
      saxpy(st, 2 * a, y, x, n)
    end)
    local sets = {}
    for i = 1, 2 do sets[i] = { cuda.buffer("f32", ramp(N, i)), cuda.buffer("f32", N) } end
    local ref = { cuda.buffer("f32", N), cuda.buffer("f32", N) }
    for call = 1, 8 do
      local x, y = sets[call % 2 + 1][1], sets[call % 2 + 1][2]
      ref[1]:copy(x); ref[2]:copy(y)
      local a = call * 0.25
      saxpy(s, a, ref[1], ref[2], N); ref[2]:fill(0, s); saxpy(s, 2 * a, ref[2], ref[1], N)
      f(s, a, x, y, N)
      s:synchronize()
      assert.same(ref[1]:download(), x:download())
      assert.same(ref[2]:download(), y:download())
    end
    local st = f:stats()
    assert.equals(8, st.calls)
    assert.equals(1, st.builds) -- one graph, its nodes set by the seven others
    assert.equals(1, st.graphs)
    assert.is_true(st.set >= 7 * 2)
  end)

  it("takes another size without a new graph when only parameters change", function()
    local f = cuda.graphed(function(st, x, y, n) saxpy(st, 1.5, x, y, n) end)
    local x, y = cuda.buffer("f32", ramp(N, 3)), cuda.buffer("f32", N):fill(0)
    local rx, ry = cuda.buffer("f32", N), cuda.buffer("f32", N)
    for i = 1, 100 do -- 100 sizes, the grid following n
      local n = (i * 10 + i % 7) % N + 1
      rx:copy(x); ry:copy(y)
      saxpy(s, 1.5, rx, ry, n)
      f(s, x, y, n)
      s:synchronize()
      assert.same(ry:download(), y:download(), "n = " .. n)
    end
    assert.equals(1, f:stats().builds)
  end)

  it("keeps a graph per key and per work, up to opts.graphs, the least recently used going", function()
    local f = cuda.graphed(function(st, x, twice)
      m.inc_i32:launch(st, 1, 64, x, 64)
      if twice then m.inc_i32:launch(st, 1, 64, x, 64) end
    end, { graphs = 2 })
    local a, b = cuda.buffer("i32", 64):fill(0), cuda.buffer("u32", 64):fill(0)
    f(s, a, false)
    local first = f:graphs()[1]
    f(s, a, true)                  -- two graphs: the key has the boolean
    assert.equals(2, #f:graphs())
    local newest = f:graphs()[1]
    f(s, b, false)                 -- a u32 buffer: another key, a third graph
    assert.equals(2, #f:graphs())  -- the least recently used went
    assert.equals(newest, f:graphs()[2])
    assert.matches("%(freed%)", tostring(first))
    s:synchronize()
    assert.equals(3, a:download()[1])
    assert.equals(1, b:download()[64])
    assert.equals(3, f:stats().builds)
  end)

  it("keys by what opts.key returns", function()
    local f = cuda.graphed(function(st, x, reps)
      for _ = 1, reps do m.inc_i32:launch(st, 1, 64, x, 64) end
    end, { key = function(_, _, reps) return reps end })
    local x = cuda.buffer("i32", 64):fill(0)
    for _ = 1, 3 do f(s, x, 1); f(s, x, 2); f(s, x, 3) end
    s:synchronize()
    assert.equals(3 * 6, x:download()[1])
    local st = f:stats()
    assert.equals(3, st.graphs)
    assert.equals(3, st.builds)
  end)

  it("builds the graph again when a call's work changes where no node takes it in place", function()
    local f = cuda.graphed(function(st, x, y, extra)
      y:copy(x, st)
      if extra then m.inc_i32:launch(st, 1, 64, y, 64) end
    end, { key = function() return 0 end })
    local x, y = cuda.buffer("i32", 64):fill(5), cuda.buffer("i32", 64):fill(0)
    f(s, x, y, false); f(s, x, y, true); f(s, x, y, true)
    s:synchronize()
    assert.equals(6, y:download()[64])
    assert.equals(2, f:stats().builds) -- the second work's graph, kept beside
    assert.equals(2, f:stats().graphs)
  end)

  it("makes library calls and forks again when it builds", function()
    local blas = cuda.blas(s)
    local f = cuda.graphed(function(st, a, b, c, side)
      blas:gemm(a, b, c, { m = 4, n = 4, k = 4 }, st)
      st:wait(st) -- a join on itself: recorded, made again
      side:wait(st)
      m.inc_i32:launch(side, 1, 16, c:view(0, 16, "i32"), 0) -- a view a call
      st:wait(side)
    end)
    local a = cuda.buffer("f32", 16):fill(1)
    local b = cuda.buffer("f32", 16):fill(2)
    local c1, c2 = cuda.buffer("f32", 16):fill(0), cuda.buffer("f32", 16):fill(0)
    local side = cuda.stream()
    f(s, a, b, c1, side); f(s, a, b, c1, side)
    s:synchronize()
    assert.equals(8, c1:download()[16])
    assert.equals(1, f:stats().builds) -- the same operands: nothing to build
    f(s, a, b, c2, side) -- other operands: a library call's node is opaque
    s:synchronize()
    assert.equals(8, c2:download()[1])
    assert.equals(2, f:stats().builds)
    -- operands that come back get a graph of their own, then no builds
    -- (views made once: a view made anew is another object each call)
    local g = cuda.graphed(function(st, c, v)
      blas:gemm(a, b, c, { m = 4, n = 4, k = 4 }, st)
      m.inc_i32:launch(st, 1, 16, v, 0)
    end)
    local v1, v2 = c1:view(0, 16, "i32"), c2:view(0, 16, "i32")
    for _ = 1, 5 do g(s, c1, v1); g(s, c2, v2) end
    assert.same({ 3, 2 }, { g:stats().builds, g:stats().graphs })
    s:synchronize()
    assert.equals(8, c1:download()[1])
    assert.equals(8, c2:download()[16])
  end)

  it("records conditional nodes and labels, their bodies made again when it builds", function()
    if not pcall(cuda.condition, 1) then return pending("conditional nodes need CUDA 12.4") end
    local c = cuda.condition(1)
    local f = cuda.graphed(function(st, x, turns)
      st:label("loop", function()
        st:loop_while(c, function(bs)
          m.inc_i32:launch(bs, 1, 64, x, 64)
          c:count_down(bs, turns)
        end)
      end)
    end)
    local x = cuda.buffer("i32", 64):fill(0)
    H.settle()
    f(s, x, 3); f(s, x, 3)
    s:synchronize()
    assert.equals(6, x:download()[1])
    assert.equals(1, f:stats().builds)
    f(s, x, 4) -- a body's parameter: built again
    s:synchronize()
    assert.equals(10, x:download()[1])
    assert.equals(2, f:stats().builds)
    local _, nodes = f:graphs()[1]:nodes("detail")
    assert.equals("loop", nodes[1].label)
  end)

  it("refuses what a graph cannot hold, at the line of the call", function()
    local x = cuda.buffer("f32", 64):fill(0)
    local function refused(pattern, body, ...)
      local f = cuda.graphed(body)
      local err = tostring(H.error_of(f, ...))
      assert.matches(pattern, err)
      assert.matches("35%-graphed_spec%.lua:%d+:", err) -- the line in fn
    end
    refused("download inside a graph capture", function(_, b) b:download() end, s, x)
    refused("synchronize", function(st) st:synchronize() end, s)
    refused("allocate buffers before", function() return cuda.buffer("f32", 4) end, s)
    refused("cannot be recorded in a graphed function",
            function(st) return cuda.buffer("f32", 4, { stream = st }) end, s)
    local f
    f = cuda.graphed(function(_, b) b:fill(1) end)
    assert.matches("fill without a stream in a graphed function", tostring(H.error_of(f, s, x)))
    local other = cuda.stream()
    f = cuda.graphed(function(_, b) saxpy(other, 1, b, b, 64) end)
    assert.matches("not part of the graphed function's work", tostring(H.error_of(f, s, x)))
    f = cuda.graphed(function(b) return b end)
    assert.matches("needs a cugraph.Stream", tostring(H.error_of(f, x)))
    -- the error of fn itself, with the stream left usable
    f = cuda.graphed(function(st, b) saxpy(st, 1, b, b, 64); error("mine") end)
    assert.matches("mine", tostring(H.error_of(f, s, x)))
    s:synchronize()
    assert.is_false(cuda.status().capturing)
    assert.equals(0, x:download()[1]) -- nothing was sent
  end)

  it("takes opts.stream, and refuses bad options", function()
    local x = cuda.buffer("i32", 64):fill(0)
    local f = cuda.graphed(function(b) m.inc_i32:launch(s, 1, 64, b, 64) end, { stream = s })
    f(x); f(x)
    s:synchronize()
    assert.equals(2, x:download()[1])
    assert.error_matches(function() cuda.graphed(f) end, "function expected")
    assert.error_matches(function() cuda.graphed(print, { graph = 2 }) end,
                         "unknown option 'graph' %(valid: graphs, key, stream, eager%)")
    assert.error_matches(function() cuda.graphed(print, { graphs = 0 }) end, "from 1 to 64")
    assert.error_matches(function() cuda.graphed(print, { key = 1 }) end, "must be a function")
    assert.error_matches(function() cuda.graphed(print, { stream = 1 }) end, "cugraph.Stream")
  end)

  it("runs fn itself under opts.eager and CUGRAPH_LUA_EAGER", function()
    local x = cuda.buffer("i32", 64):fill(0)
    local f = cuda.graphed(function(st, b) m.inc_i32:launch(st, 1, 64, b, 64); return 7 end,
                           { eager = true })
    assert.equals(7, f(s, x))
    s:synchronize()
    assert.equals(1, x:download()[1])
    assert.equals(0, f:stats().builds)
    assert.matches("eager", tostring(f))
    local code, out = H.script([[
      local cuda = require "cugraph"
      local f = cuda.graphed(function(st) return st end)
      local s = cuda.stream()
      assert(f(s) == s)
      print(tostring(f), f:stats().builds)
    ]], "CUGRAPH_LUA_EAGER=1")
    assert.equals(0, code, out)
    assert.matches("eager%)\t0", out)
  end)

  it("returns fn's results and allocates nothing on steady calls", function()
    local x, y = cuda.buffer("f32", N):fill(1), cuda.buffer("f32", N):fill(0)
    local x2 = cuda.buffer("f32", N):fill(2)
    local f = cuda.graphed(function(st, a, b, n) saxpy(st, 0.5, a, b, n); return n, b end)
    local n, b = f(s, x, y, N)
    assert.equals(N, n)
    assert.equals(y, b)
    local bufs, c = { x, x2 }, 0
    -- nodes set on every call (no size comes back within 97 calls)
    assert.equals(0, H.garbage(function()
      c = c + 1
      f(s, bufs[c % 2 + 1], y, N - c % 97)
    end, 1000))
    assert.equals(1, f:stats().builds)
    -- two graphs, each launched as it is
    assert.equals(0, H.garbage(function(i) f(s, bufs[i % 2 + 1], y, N) end, 1000))
    assert.equals(2, f:stats().builds)
  end)

  it("gives parameters that come back a graph of their own, while it has room", function()
    local f = cuda.graphed(function(st, x) m.inc_i32:launch(st, 1, 64, x, 64) end,
                           { graphs = 3 })
    local bufs = {}
    for i = 1, 4 do bufs[i] = cuda.buffer("i32", 64):fill(0) end
    f(s, bufs[1]); f(s, bufs[2])  -- one graph, its node set for the second
    assert.same({ 1, 1, 0 }, { f:stats().builds, f:stats().set, f:stats().same })
    f(s, bufs[1])                 -- the first's buffer again: a graph of its own
    assert.same({ 2, 2 }, { f:stats().builds, f:stats().graphs })
    for _ = 1, 10 do f(s, bufs[1]); f(s, bufs[2]) end
    local st = f:stats()          -- each call found its graph: nothing set
    assert.same({ 2, 1, 20 }, { st.builds, st.set, st.same })
    for _ = 1, 5 do
      for i = 1, 4 do f(s, bufs[i]) end
    end
    st = f:stats()                -- four buffers in turn, room for three
    assert.same({ 3, 3 }, { st.builds, st.graphs })
    s:synchronize()
    assert.same({ 17, 16, 5, 5 }, { bufs[1]:download()[1], bufs[2]:download()[1],
                                    bufs[3]:download()[1], bufs[4]:download()[64] })
  end)

  it("builds again a graph freed through f:graphs(), whose nodes only its calls set", function()
    local x = cuda.buffer("i32", 64):fill(0)
    local f = cuda.graphed(function(st, b) m.inc_i32:launch(st, 1, 64, b, 64) end)
    f(s, x); f(s, x)
    local g, y = f:graphs()[1], cuda.buffer("i32", 64):fill(0)
    -- its nodes are the calls' to set
    assert.error_matches(function() g:rebind(x, y) end, "g:rebind: cugraph.Graph #%d+ is a graphed function's")
    assert.error_matches(function() g:node(1):set(y, 64) end, "is a graphed function's")
    assert.error_matches(function() g:update(function() end) end, "g:update: .* call the function")
    g:free()
    f(s, x)
    s:synchronize()
    assert.equals(3, x:download()[1])
    assert.same({ 2, 1 }, { f:stats().builds, f:stats().graphs })
  end)

  it("lists its graphs in cuda.memory() and frees them with itself", function()
    local x = cuda.buffer("i32", 64):fill(0)
    local f = cuda.graphed(function(st, b) m.inc_i32:launch(st, 1, 64, b, 64) end)
    f(s, x)
    local g = f:graphs()[1]
    local found = false
    for _, e in ipairs(cuda.memory().graphs) do found = found or e.id == g:id() end
    assert.is_true(found)
    assert.has_error(function() x:free() end) -- the graph keeps it
    f:free()
    assert.matches("%(freed%)", tostring(g))
    assert.matches("%(freed%)", tostring(f))
    assert.error_matches(function() f(s, x) end, "attempt to use a freed cugraph.Graphed")
    x:free()
  end)

  it("keeps working over its module's reload", function()
    local src = io.open(H.build .. "/kernels.ptx"):read("a")
    local mod = cuda.module(src, "k.ptx")
    local f = cuda.graphed(function(st, b) mod.inc_i32:launch(st, 1, 64, b, 64) end)
    local x = cuda.buffer("i32", 64):fill(0)
    f(s, x)
    mod:reload(src, "again.ptx")
    f(s, x); f(s, x)
    s:synchronize()
    assert.equals(3, x:download()[1])
  end)
end)
