-- Conditional nodes (while, if/else, switch) with Lua closures as bodies,
-- conditions, the built-in setters, and child graphs.
local H = require "support.helper"
local cuda = H.cuda

describe("conditional nodes", function()
  local m, s, x
  before_each(function()
    m = H.kernels()
    s = cuda.stream()
    x = cuda.buffer("i32", 8):fill(0)
    H.settle()
  end)

  local function usable(stream)
    assert.is_false(cuda.status().capturing)
    stream:synchronize()
    m.inc_i32:launch(stream, 1, 8, x, 8)
    stream:synchronize()
  end

  local function inc(stream, buf, n) m.inc_i32:launch(stream, 1, n or 1, buf, n or 1) end

  describe("while", function()
    it("repeats its body while a kernel keeps the condition set", function()
      local count = cuda.buffer("u32", 1):fill(0)
      local c = cuda.condition(1)
      local g = s:capture(function()
        s:loop_while(c, function() m.count_to:launch(s, 1, 1, count, c, 10) end)
      end)
      g:launch()
      s:synchronize()
      assert.equals(10, count:download()[1])
      -- the default starts every launch: the body runs once more at least
      g:launch()
      s:synchronize()
      assert.equals(11, count:download()[1])
      count:fill(3)
      g:launch()
      s:synchronize()
      assert.equals(10, count:download()[1])
    end)

    it("counts down n turns at every launch with count_down", function()
      local c = cuda.condition(1)
      local g = s:capture(function()
        s:loop_while(c, function()
          inc(s, x)
          c:count_down(s, 25)
        end)
        inc(s, x, 2) -- after the loop, once
      end)
      for _ = 1, 3 do g:launch() end
      s:synchronize()
      local got = x:download()
      assert.equals(78, got[1])
      assert.equals(3, got[2])
    end)

    it("does not run a body whose condition starts at 0", function()
      local c = cuda.condition(0)
      local g = s:capture(function()
        s:loop_while(c, function() inc(s, x) end)
        inc(s, x, 2)
      end)
      g:launch()
      s:synchronize()
      assert.same({ 1, 1, 0, 0, 0, 0, 0, 0 }, x:download())
    end)
  end)

  describe("branch", function()
    it("runs then_fn when buffer[i] compares as asked (set_when)", function()
      local r = cuda.buffer("f32", { 0.5, 2 })
      local c = cuda.condition()
      local g = s:capture(function()
        c:set_when(s, r, ">", 0.25)
        s:branch(c, function() inc(s, x) end)
      end)
      g:launch()
      r:upload({ 0.125 })
      g:launch()
      s:synchronize()
      assert.equals(1, x:download()[1])
    end)

    it("runs else_fn otherwise", function()
      local r = cuda.buffer("i32", { 3, 7 })
      local c = cuda.condition(0)
      local g = s:capture(function()
        c:set_when(s, r, "==", 7, 1) -- element 1 (0-based)
        s:branch(c, function() inc(s, x) end, function() inc(s, x, 2) end)
      end)
      g:launch()
      r:upload({ 3, 8 })
      g:launch()
      s:synchronize()
      assert.same({ 2, 1, 0, 0, 0, 0, 0, 0 }, x:download())
    end)

    it("compares every element type with every operator", function()
      local cases = {
        { "f64", 1.5, "<", 2, 1 }, { "f64", 2, "<=", 2, 1 }, { "f32", -1, ">", 0, 0 },
        { "i8", -3, ">=", -3, 1 }, { "u8", 200, ">", 100, 1 }, { "i16", -2, "==", -2, 1 },
        { "u16", 7, "~=", 7, 0 }, { "i32", -5, "<", -4, 1 }, { "u32", 4000000000, ">", 1, 1 },
        { "i64", -(1 << 40), "<", 0, 1 }, { "u64", -1, ">", 1, 1 }, { "i32", 1, "!=", 2, 1 },
      }
      local c = cuda.condition(0)
      for i, k in ipairs(cases) do
        local b = cuda.buffer(k[1], { k[2] })
        local g = s:capture(function()
          c:set_when(s, b, k[3], k[4])
          s:branch(c, function() inc(s, x) end)
        end)
        x:fill(0)
        g:launch()
        s:synchronize()
        assert.equals(k[5], x:download()[1], "case " .. i)
      end
    end)
  end)

  describe("switch", function()
    it("runs the case the condition names, and none past the last", function()
      local sel = cuda.buffer("u32", 1)
      local c = cuda.condition(0)
      local g = s:capture(function()
        m.set_cond:launch(s, 1, 1, c, sel)
        s:switch(c, {
          function() inc(s, x, 1) end,
          function() inc(s, x, 2) end,
          function() inc(s, x, 3) end,
        })
      end)
      for _, v in ipairs { 2, 0, 1, 5, 2 } do
        sel:upload({ v })
        g:launch()
      end
      s:synchronize()
      assert.same({ 4, 3, 2, 0, 0, 0, 0, 0 }, x:download())
    end)

    it("takes its value from c:set", function()
      local c = cuda.condition()
      local g = s:capture(function()
        c:set(s, 1)
        s:switch(c, { function() inc(s, x, 1) end, function() inc(s, x, 2) end })
      end)
      g:launch()
      s:synchronize()
      assert.same({ 1, 1, 0, 0, 0, 0, 0, 0 }, x:download())
    end)
  end)

  it("nests to any depth: an if in a while in a while", function()
    local outer, inner, odd = cuda.condition(1), cuda.condition(1), cuda.condition(0)
    local i = cuda.buffer("u32", 1):fill(0)
    local par = cuda.buffer("i32", 1)
    local g = s:capture(function()
      s:loop_while(outer, function()
        inner:set(s, 1) -- a default starts a launch, not each turn
        s:loop_while(inner, function()
          inc(s, x)
          inner:count_down(s, 3)
        end)
        m.count_to:launch(s, 1, 1, i, outer, 4) -- outer turns
        m.inc_i32:launch(s, 1, 1, par, 1)
        odd:set_when(s, par, ">", 2)
        s:branch(odd, function() inc(s, x, 2) end)
      end)
    end)
    par:fill(0)
    g:launch()
    s:synchronize()
    local got = x:download()
    assert.equals(12 + 2, got[1]) -- 4 outer turns of 3, and turns 3 and 4
    assert.equals(2, got[2])
    assert.equals(4, i:download()[1])
    local n, list = g:nodes(true)
    assert.equals(1, n)
    assert.equals("conditional", list[1].kind)
    assert.equals("while", list[1].type)
    local body = list[1].bodies[1]
    assert.equals("while", body[2].type)
    assert.same({ "kernel", "kernel" }, body[2].bodies[1])
    local kinds = {}
    for _, k in ipairs(body) do kinds[#kinds + 1] = type(k) == "table" and k.type or k end
    table.sort(kinds)
    assert.same({ "if", "kernel", "kernel", "kernel", "kernel", "while" }, kinds)
    assert.same({ "conditional" }, select(2, g:nodes()))
  end)

  it("writes bodies into the Graphviz file", function()
    local c = cuda.condition(1)
    local g = s:capture(function()
      s:loop_while(c, function()
        inc(s, x)
        c:count_down(s, 2)
      end)
    end)
    local path = os.tmpname()
    g:dot(path)
    local f = assert(io.open(path))
    local dot = f:read("a")
    f:close()
    os.remove(path)
    assert.matches("digraph", dot)
    assert.matches("inc_i32", dot)
  end)

  describe("conditions", function()
    it("show their default, and are freed like any object", function()
      local c = cuda.condition(3)
      assert.equals(3, c:default())
      assert.equals("cugraph.Condition (default 3)", tostring(c))
      assert.is_nil(cuda.condition():default())
      c:free()
      c:free()
      assert.equals("cugraph.Condition (freed)", tostring(c))
      assert.error_matches(function() c:default() end, "attempt to use a freed cugraph.Condition")
      assert.error_matches(function() cuda.condition(-1) end, "0..4294967295")
      assert.error_matches(function() cuda.condition(1.5) end, "number has no integer representation")
      assert.equals("cugraph.Condition", getmetatable(c))
    end)

    it("are kernel arguments of type cudaGraphConditionalHandle", function()
      local k = m:kernel("set_cond", "cudaGraphConditionalHandle h, const unsigned *v")
      assert.equals("set_cond(u64, const u32*)", k:signature())
      local one = cuda.buffer("u32", { 1 })
      local c = cuda.condition(0)
      local g = s:capture(function()
        k:launch(s, 1, 1, c, one)
        s:branch(c, function() inc(s, x) end)
      end)
      g:launch()
      s:synchronize()
      assert.equals(1, x:download()[1])
      assert.error_matches(function() k:launch(s, 1, 1, c, one) end,
                           "a cugraph.Condition is a kernel argument only inside a capture")
    end)
  end)

  describe("child graphs", function()
    it("embeds a graph launched inside a capture, and pins it", function()
      local weak = setmetatable({}, { __mode = "v" })
      local outer
      do
        local y = cuda.buffer("i32", 4):fill(0)
        local inner = s:capture(function() inc(s, y, 4) end)
        weak.y, weak.inner = y, inner
        outer = s:capture(function()
          inner:launch()
          inner:launch(s)
          inc(s, x)
        end)
        assert.error_matches(function() inner:free() end,
                             "cannot free cugraph.Graph: it is used by live cugraph.Graph #" .. outer:id())
      end
      collectgarbage()
      collectgarbage()
      assert.same({ "graph", "graph", "kernel" }, select(2, outer:nodes()))
      local _, deep = outer:nodes(true)
      assert.same({ kind = "graph", type = "graph", bodies = { { "kernel" } } }, deep[1])
      outer:launch()
      outer:launch()
      s:synchronize()
      assert.same({ 4, 4, 4, 4 }, weak.y:download())
      assert.equals(2, x:download()[1])
      outer:free()
      collectgarbage()
      collectgarbage()
      assert.is_nil(weak.inner)
      assert.is_nil(weak.y)
    end)

    it("flush the embedded graph's scalars and keep what it used after it changes", function()
      local k = cuda.scalar("f32", 1)
      local y, y2 = cuda.buffer("f32", 64):fill(5), cuda.buffer("f32", 64):fill(0)
      local inner = s:capture(function() m.add_scalar_f32:launch(s, 1, 64, y, k, 64) end)
      local outer = s:capture(function() inner:launch() end)
      k:set(10) -- only the outer graph launches: it flushes the inner's scalar
      outer:launch()
      s:synchronize()
      assert.equals(15, y:download()[64])
      -- the inner graph lets go of y; the outer's copy still writes it
      inner:rebind(y, y2)
      collectgarbage()
      assert.error_matches(function() y:free() end,
                           "it is used by 1 live cugraph.Graph")
      outer:launch()
      s:synchronize()
      assert.equals(25, y:download()[64])
      assert.equals(0, y2:download()[64])
      outer:free(); inner:free()
      y:free()
    end)

    it("may be the body of a conditional node", function()
      local inner = s:capture(function() inc(s, x) end)
      local c = cuda.condition(1)
      local g = s:capture(function()
        s:loop_while(c, function()
          inner:launch(s)
          c:count_down(s, 4)
        end)
      end)
      g:launch()
      s:synchronize()
      assert.equals(4, x:download()[1])
    end)

    it("refuses a graph with conditional nodes, and a graph in itself", function()
      local c = cuda.condition(0)
      local g = s:capture(function() s:branch(c, function() inc(s, x) end) end)
      local err = H.error_of(s.capture, s, function() g:launch() end)
      assert.matches("has conditional nodes, which the driver cannot embed", err)
      usable(s)
      local plain = s:capture(function() inc(s, x) end)
      err = H.error_of(plain.update, plain, function() plain:launch() end)
      assert.matches("cannot contain itself", err)
      usable(s)
    end)
  end)

  describe("guards", function()
    it("refuse what cannot work, before the driver", function()
      local c = cuda.condition(1)
      local fn = function() inc(s, x) end
      local side = cuda.stream()
      assert.error_matches(function() s:loop_while(c, fn) end,
                           "s:loop_while%(%) outside a capture")
      assert.error_matches(function() c:set(s, 1) end, "condition:set%(%) outside a capture")
      assert.error_matches(function() c:count_down(s, 2) end, "outside a capture")
      local cases = {
        { function() cuda.condition() end, "cannot create a condition inside a graph capture" },
        { function() s:loop_while(c, fn); s:loop_while(c, fn) end,
          "already drives a conditional node in this graph" },
        { function() s:loop_while(c, function() end) end, "a conditional body recorded no work" },
        { function() inc(s, x); c:set(s, 1) end, "drives no conditional node" },
        { function() s:switch(c, { fn, 42 }) end, "case 1 %(list item 2%) is a number" },
        { function() s:switch(c, {}) end, "expected a list of 1 to 65536 functions" },
        { function() s:branch(c, fn, 1) end, "function expected, got number" },
        { function() c:set_when(s, x, "<>", 1) end, "invalid option '<>'" },
        { function() c:set_when(s, x, "<", 1, 8) end, "index out of range" },
        { function() c:set_when(s, x, "<", 0.5) end, "an integer for a buffer of i32" },
        { function() c:count_down(s, 0) end, "the count must be at least 1" },
        { function() s:loop_while(c, function() cuda.event():record(s) end) end,
          "event:record%(%) inside a conditional body" },
        { function() local e = cuda.event(); s:loop_while(c, function() s:wait(e) end) end,
          "stream:wait%(%) inside a conditional body" },
        { function()
            side:wait(s)
            inc(side, x)
            s:loop_while(c, function() inc(side, x) end)
          end, "inc_i32: the stream is not part of the capture" },
      }
      for _, case in ipairs(cases) do
        local err = H.error_of(s.capture, s, case[1])
        assert.matches(case[2], tostring(err))
        usable(s)
      end
      local nodefault = cuda.condition()
      local err = H.error_of(s.capture, s, function()
        s:loop_while(nodefault, function() nodefault:count_down(s, 3) end)
      end)
      assert.matches("count_down%(%) needs a condition whose default is not 0", err)
      usable(s)
    end)

    it("refuse g:update() of a graph with conditional nodes", function()
      local c = cuda.condition(0)
      local g = s:capture(function() s:branch(c, function() inc(s, x) end) end)
      local err = H.error_of(g.update, g, function() s:branch(c, function() inc(s, x) end) end)
      assert.matches("has conditional nodes, which the driver cannot update", err)
      local plain = s:capture(function() inc(s, x) end)
      err = H.error_of(plain.update, plain, function() s:branch(c, function() inc(s, x) end) end)
      assert.matches("made conditional nodes", err)
      usable(s)
      plain:launch() -- unchanged
      g:launch()
      s:synchronize()
    end)
  end)

  describe("errors inside bodies", function()
    it("end every capture level and re-raise the original error", function()
      local a, b = cuda.condition(1), cuda.condition(0)
      local boom = setmetatable({}, { __tostring = function() return "boom" end })
      local err = H.error_of(s.capture, s, function()
        inc(s, x)
        s:loop_while(a, function()
          inc(s, x)
          s:branch(b, function() error(boom) end)
        end)
      end)
      assert.equals(boom, err)
      usable(s)
      err = H.error_of(s.capture, s, function()
        s:loop_while(a, function() error("deep") end)
      end)
      assert.matches("deep", err)
      assert.matches("traceback", err)
      usable(s)
      -- a C-side error: a bad launch argument
      err = H.error_of(s.capture, s, function()
        s:branch(b, function() m.inc_i32:launch(s, 1, 1, x, "n") end)
      end)
      assert.matches("inc_i32: argument 2", err)
      usable(s)
      -- and the same conditions serve the next capture
      local g = s:capture(function()
        s:loop_while(a, function()
          inc(s, x)
          a:count_down(s, 2)
        end)
      end)
      x:fill(0)
      g:launch()
      s:synchronize()
      assert.equals(2, x:download()[1])
    end)
  end)

  describe("lifetime", function()
    it("keeps what bodies captured alive, and the conditions", function()
      local weak = setmetatable({}, { __mode = "v" })
      local g
      do
        local y = cuda.buffer("i32", 1):fill(0)
        local r = cuda.buffer("f32", { 1 })
        local c, d = cuda.condition(1), cuda.condition()
        weak.y, weak.r, weak.c, weak.d = y, r, c, d
        H.settle()
        g = s:capture(function()
          s:loop_while(c, function()
            inc(s, y)
            c:count_down(s, 5)
          end)
          d:set_when(s, r, ">", 0)
          s:branch(d, function() inc(s, y) end)
        end)
        assert.error_matches(function() c:free() end, "cannot free cugraph.Condition: it is used by live cugraph.Graph")
        assert.error_matches(function() r:free() end, "cannot free cugraph.Buffer")
      end
      collectgarbage()
      collectgarbage()
      g:launch()
      s:synchronize()
      assert.equals(6, weak.y:download()[1])
      assert.equals(0, H.garbage(function() g:launch() end, 1000))
      g:free()
      collectgarbage()
      collectgarbage()
      for _, k in ipairs { "y", "r", "c", "d" } do assert.is_nil(weak[k], k) end
    end)

    it("closes cleanly with live conditions and graphs", function()
      local code, out = H.script([[
        local cuda = require "cugraph"
        local m = cuda.module(]] .. string.format("%q", H.build .. "/kernels.ptx") .. [[)
        local s = cuda.stream()
        local x = cuda.buffer("i32", 1):fill(0)
        local c = cuda.condition(1)
        local inner = s:capture(function() m.inc_i32:launch(s, 1, 1, x, 1) end)
        local g = s:capture(function()
          s:loop_while(c, function() inner:launch(s); c:count_down(s, 3) end)
        end)
        g:launch()
        print(x:download()[1])
      ]])
      assert.equals(0, code, out)
      assert.matches("^3\n", out)
    end)
  end)
end)
