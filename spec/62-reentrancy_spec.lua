-- Finalizers that run inside a C function of the runtime: any allocation
-- there can run a pending __gc, which may free an object the function
-- already looked up. The collector is set to finish a whole cycle at every
-- allocation, so a finalizer armed just before a call runs at that call's
-- first allocation.
local H = require "support.helper"
local cuda = H.cuda

-- Runs fn with a finalizer pending that calls on_gc; the collector finishes
-- a cycle (finalizers included) at every allocation meanwhile.
local function with_pending_finalizer(on_gc, fn)
  local mt = { __gc = function() on_gc() end }
  collectgarbage("incremental", 1, 1000, 30)
  collectgarbage("collect") -- the new pause applies from here
  setmetatable({}, mt)
  local r = table.pack(pcall(fn))
  collectgarbage("incremental", 200, 100, 13)
  collectgarbage("collect")
  return table.unpack(r, 1, r.n)
end

describe("finalizers inside calls", function()
  it("an upload looks its stream up after converting the data", function()
    local b = cuda.buffer("f32", 1024)
    local data = {}
    for i = 1, 1024 do data[i] = i end
    local s = cuda.stream()
    local freed = false
    local ok, err = with_pending_finalizer(function() s:free(); freed = true end,
      function() return b:upload(data, 0, s) end)
    assert.is_true(freed)
    assert.is_false(ok)
    assert.matches("attempt to use a freed cugraph.Stream", tostring(err))
    b:upload(data) -- the buffer is unharmed
    assert.equals(1024, b:download("table", 1023, 1)[1])
  end)

  it("a download checks its buffer after allocating the result", function()
    local b = cuda.buffer("u32", 4096):fill(7)
    local ok, err = with_pending_finalizer(function() b:free() end,
      function() return b:download("string") end)
    assert.is_false(ok)
    assert.matches("attempt to use a freed cugraph.Buffer", tostring(err))
  end)

  it("g:nodes() reads the graph's nodes only after allocating", function()
    local s = cuda.stream()
    local x = cuda.buffer("i32", 64):fill(0)
    local k = H.kernels().inc_i32
    local g = s:capture(function()
      for _ = 1, 4 do k:launch(s, 1, 64, x, 64) end
    end)
    local ok, err = with_pending_finalizer(function() g:free() end,
      function() return g:nodes() end)
    assert.is_false(ok)
    assert.matches("attempt to use a freed cugraph.Graph", tostring(err))
    x:free()
  end)

  it("a kernel lookup checks its module after allocating the kernel", function()
    local m = cuda.module(H.build .. "/kernels.ptx")
    local ok, err = with_pending_finalizer(function() m:free() end,
      function() return m:kernel("saxpy") end)
    assert.is_false(ok)
    assert.matches("attempt to use a freed cugraph.Module", tostring(err))
  end)

  -- Launch n buffers into a capture, then one more whose pin allocation runs
  -- a finalizer that tries to free it: either the free is refused (the
  -- buffer is in use) or the launch is refused; a graph never holds a freed
  -- buffer. n runs past the pin set's growth points.
  it("a buffer being pinned cannot be freed by the pin's allocation", function()
    local k = H.kernels().inc_i32
    local s = cuda.stream()
    for n = 0, 20 do
      local bufs = {}
      for i = 1, n do bufs[i] = cuda.buffer("i32", 32):fill(0) end
      local x = cuda.buffer("i32", 32):fill(0)
      local refused
      local ok, g = pcall(s.capture, s, function()
        for i = 1, n do k:launch(s, 1, 32, bufs[i], 32) end
        with_pending_finalizer(function()
          local freed, e = pcall(x.free, x)
          refused = not freed and tostring(e)
        end, function() k:launch(s, 1, 32, x, 32) end)
      end)
      if ok then
        assert.not_matches("%(freed%)", tostring(x))
        if refused then assert.matches("used by live cugraph.Graph", refused) end
        g:launch()
        assert.same({ 1, 1 }, x:download("table", 0, 2))
        g:free()
      else
        assert.matches("attempt to use a freed cugraph.Buffer", tostring(g))
      end
      x:free()
      for i = 1, n do bufs[i]:free() end
    end
  end)

  -- A freed graph's records go to the next capture; a method still reading
  -- them when a finalizer frees the graph and captures again keeps them.
  it("a node's text keeps its records when a finalizer frees the graph and captures", function()
    local s = cuda.stream()
    local x = cuda.buffer("i32", 64):fill(0)
    local k, line = H.kernels().inc_i32, nil
    local g = s:capture(function()
      line = debug.getinfo(1, "l").currentline; k:launch(s, 1, 64, x, 64)
    end)
    local n, other = g:node(1), nil
    local text_of = debug.getmetatable(n).__tostring -- its first allocation
    local ok, text = with_pending_finalizer(function() -- is the kernel's name
      g:free()
      other = s:capture(function()
        x:fill(3, s)
      end)
    end, function() return text_of(n) end)
    assert.is_true(ok, text)
    assert.is_not_nil(other)
    assert.matches("kernel inc_i32 at .*62%-reentrancy_spec%.lua:" .. line .. "%)$",
                   text)
    assert.matches("fill at ", tostring(other:node(1)))
    other:free()
  end)

  -- They hold the collector: a finalizer pending at the call runs after it.
  it("g:nodes('detail') and node:info() run no finalizer inside", function()
    local s = cuda.stream()
    local x = cuda.buffer("i32", 64):fill(0)
    local k = H.kernels().inc_i32
    local function make()
      return s:capture(function() for _ = 1, 3 do k:launch(s, 1, 64, x, 64) end end)
    end
    local g = make()
    local ok, n, list = with_pending_finalizer(function() g:free(); make():free() end,
      function() return g:nodes("detail") end)
    assert.is_true(ok, n)
    assert.equals(3, n)
    assert.equals("kernel", list[3].kind)
    assert.matches("%(freed%)", tostring(g)) -- the finalizer ran after the call
    g = make()
    local node = g:node(2)
    local info
    ok, info = with_pending_finalizer(function() g:free(); make():free() end,
      function() return node:info() end)
    assert.is_true(ok, info)
    assert.equals("kernel", info.kind)
    assert.matches("%(freed%)", tostring(g))
  end)

  it("m:reload switches every graph that finalizers capture during it", function()
    local m = cuda.module(H.build .. "/kernels.ptx")
    local s = cuda.stream()
    local k = cuda.scalar("f32", 1)
    local f = assert(io.open(H.build .. "/kernels.ptx"))
    local src = f:read("a")
    f:close()
    local at = src:find(".entry add_scalar_f32", 1, true)
    local new = src:sub(1, at - 1) .. src:sub(at):gsub("add%.f32", "sub.f32", 1)
    -- a finalizer at every allocation of the reload: each captures a
    -- graph of the module's kernel and arms the next
    local made, armed = {}, true
    local mt
    mt = { __gc = function()
      if not armed or #made == 64 then return end
      local y = cuda.buffer("f32", 256):fill(5)
      made[#made + 1] = { s:capture(function()
        m.add_scalar_f32:launch(s, 1, 256, y, k, 256)
      end), y }
      setmetatable({}, mt)
    end }
    local ok, err = with_pending_finalizer(function() setmetatable({}, mt) end,
      function() m:reload(new, "sub.ptx") end)
    armed = false
    assert.is_true(ok, err)
    assert.is_true(#made > 0)
    for _, p in ipairs(made) do p[1]:launch() end
    s:synchronize()
    for _, p in ipairs(made) do
      if H.gpu or H.sim then -- the code runs: the new code subtracts
        assert.equals(-4, p[2]:download()[256])
      end
      p[1]:free()
    end
    m:free()
  end)
end)

-- Every C function added since the first re-entrancy pass, called with a
-- finalizer pending that frees what the call works on: the call either
-- works or raises "attempt to use a freed ..."; nothing is read after it
-- was freed (valgrind and ASan check that part of this spec).
describe("finalizers inside the newer calls", function()
  local k = H.kernels()
  local function graph_of(s, x)
    return s:capture(function() k.inc_i32:launch(s, 1, 64, x, 64) end)
  end
  local cases = {
    { "node:set", function()
        local s, x = cuda.stream(), cuda.buffer("i32", 64):fill(0)
        local g = graph_of(s, x)
        local n, x2 = g:node(1), cuda.buffer("i32", 64):fill(0)
        return function() g:free() end, function() return n:set(x2, 64) end
      end },
    { "node:enable", function()
        local s, x = cuda.stream(), cuda.buffer("i32", 64):fill(0)
        local g = graph_of(s, x)
        local n = g:node(1)
        return function() g:free() end, function() return n:enable(false) end
      end },
    { "g:rebind", function()
        local s, x = cuda.stream(), cuda.buffer("i32", 64):fill(0)
        local g, x2 = graph_of(s, x), cuda.buffer("i32", 64):fill(0)
        return function() g:free() end, function() return g:rebind(x, x2) end
      end },
    { "g:dot", function()
        local s, x = cuda.stream(), cuda.buffer("i32", 64):fill(0)
        local g = graph_of(s, x)
        local path = os.tmpname()
        return function() g:free() end, function() return g:dot(path) end
      end },
    { "b:view", function()
        local b = cuda.buffer("f32", 64):fill(1)
        return function() b:free() end, function() return b:view(8, 8) end
      end },
    { "h:set", function()
        local h = cuda.host_buffer("f32", 64)
        local t = {}
        for i = 1, 64 do t[i] = i end
        return function() h:free() end, function() return h:set(t) end
      end },
    { "h:totable", function()
        local h = cuda.host_buffer("f32", 64)
        return function() h:free() end, function() return h:totable() end
      end },
    { "b:upload(h, s)", function()
        local h, b, s = cuda.host_buffer("f32", 64), cuda.buffer("f32", 64), cuda.stream()
        return function() h:free() end, function() return b:upload(h, s) end
      end },
    { "cuda.buffer on a stream", function()
        local s = cuda.stream()
        return function() s:free() end,
               function() return cuda.buffer("f32", 64, { stream = s }) end
      end },
    { "b:free(stream)", function()
        local s = cuda.stream()
        local b = cuda.buffer("f32", 64, { stream = s })
        return function() s:free() end, function() return b:free(s) end
      end },
    { "cuda.condition", function()
        local s = cuda.stream()
        return function() s:free() end, function() return cuda.condition(1) end
      end },
    { "cuda.load", function()
        local path = os.tmpname()
        cuda.buffer("f32", { 1, 2, 3 }):save(path)
        local b = cuda.buffer("f32", 3)
        return function() b:free() end, function() return cuda.load(path) end
      end },
  }
  for _, c in ipairs(cases) do
    it(c[1] .. " sees what the finalizer freed", function()
      local free, call = c[2]()
      local ok, err = with_pending_finalizer(free, call)
      if not ok then
        assert.matches("attempt to use a freed cugraph%.%a+", tostring(err))
      end
    end)
  end
end)

describe("the debug library", function()
  it("a graph whose pin set was replaced frees without reading foreign keys", function()
    local s = cuda.stream()
    local x = cuda.buffer("i32", 8):fill(0)
    local g = s:capture(function() H.kernels().inc_i32:launch(s, 1, 8, x, 8) end)
    local pins = debug.getuservalue(g, 1)
    pins[io.stdout] = true
    pins["text"] = true
    pins[{}] = true
    g:free()
    x:free()
    assert.matches("%(freed%)", tostring(x))
  end)
end)
