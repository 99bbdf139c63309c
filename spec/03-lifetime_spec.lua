-- Lifetime across lua_close, finalizers by hand, and sticky errors.
local H = require "support.helper"
local cuda = H.cuda

describe("lifetime", function()
  it("lets __gc run by hand after free, harmlessly", function()
    for _, make in ipairs {
      function() return cuda.buffer("f32", 4) end, function() return cuda.scalar("u8") end,
      function() return cuda.stream() end, function() return cuda.event() end,
      function() return cuda.module(H.build .. "/kernels.ptx") end,
    } do
      local o = make()
      o:free()
      debug.getmetatable(o).__gc(o)
      debug.getmetatable(o).__close(o)
      o:free()
      assert.matches("%(freed%)$", tostring(o))
    end
  end)

  it("closes the state with live objects in any creation order", function()
    local code, out = H.script([[
      local cuda = require "cugraph"
      local m = cuda.module(os.getenv("CUGRAPH_LUA_BUILD") .. "/kernels.ptx")
      local s = cuda.stream()
      local x = cuda.buffer("i32", 64):fill(0)
      local pos = cuda.scalar("u32", 3)
      local g = s:capture(function() m.mark_u32:launch(s, 1, 1, x, pos, 64) end)
      local late = cuda.buffer("f32", 8)          -- made after its graph
      local g2 = s:capture(function() late:fill(1, s) end)
      g:launch(); g2:launch()
      local e = cuda.event():record(s)
      G = { m, s, x, pos, g, late, g2, e }        -- still reachable at exit
      print("made all")
    ]])
    assert.equals(0, code, out)
    assert.matches("made all", out)
    assert.not_matches("cugraph:", out) -- no finalizer warning
  end)

  it("closes the state with views still open over its buffers, in any order", function()
    -- at lua_close the finalizers run whatever the order: a parent's free
    -- must not be refused for its open views (its memory would be lost),
    -- nor a view's free the parent's memory
    local code, out = H.script([[
      local cuda = require "cugraph"
      local m = cuda.module(os.getenv("CUGRAPH_LUA_BUILD") .. "/kernels.ptx")
      local s = cuda.stream()
      local x = cuda.buffer("i32", 64):fill(0)
      local v = x:view(8, 16)
      local vv = v:view(4, 4)                     -- a view of a view
      local g = s:capture(function() m.inc_i32:launch(s, 1, 4, vv, 4) end)
      local y = cuda.buffer("i32", 64, { stream = s }) -- stream-ordered
      local w = y:view(0, 8)
      local late = x:view(0, 8)                   -- made after its graph
      g:launch(); w:fill(1, s)
      s:synchronize()
      print("vv", vv:download()[1], v:download()[5])
      G = { late, w, g, vv, y, v, x, s, m }       -- still reachable at exit
    ]])
    assert.equals(0, code, out)
    assert.matches("vv\t1\t1", out)
    assert.not_matches("cugraph:", out) -- no finalizer warning
  end)

  it("closes the state in the middle of work on several streams", function()
    local code, out = H.script([[
      local cuda = require "cugraph"
      local m = cuda.module(os.getenv("CUGRAPH_LUA_BUILD") .. "/kernels.ptx")
      for i = 1, 4 do
        local s = cuda.stream()
        local x = cuda.buffer("i32", 1 << 16):fill(0)
        for _ = 1, 20 do m.inc_i32:launch(s, 256, 256, x, 1 << 16) end
      end
      os.exit(0, true)
    ]])
    assert.equals(0, code, out)
  end)
end)

describe("finalizers at process exit", function()
  it("skip a driver that is gone, silently", function()
    -- no compute-sanitizer: the objects outlive the driver by design, and
    -- the tool would count them as leaks
    local p = assert(io.popen(H.plain(H.quote(H.build .. "/late_close")) .. " " .. H.quote(H.build .. "/../lua")
                              .. " " .. H.quote(H.build .. "/kernels.ptx") .. " 2>&1"))
    local out = p:read("a")
    local _, _, code = p:close()
    assert.equals(0, code, out)
    assert.matches("objects made; exiting", out)
    assert.matches("closed; driver %-?%d+, cuMemGetInfo after close: %d+", out)
    assert.not_matches("cugraph:", out) -- no finalizer warning
  end)
end)

describe("a sticky error", function()
  it("poisons the context: every later call says the process must restart", function()
    local code, out = H.script([[
      local cuda = require "cugraph"
      local m = cuda.module(os.getenv("CUGRAPH_LUA_BUILD") .. "/kernels.ptx")
      local s = cuda.stream()
      local x = cuda.buffer("f32", 16)
      local keep = cuda.buffer("f32", 16)
      m.oob_write:launch(s, 1, 1, x)
      local ok, err = pcall(s.synchronize, s)
      assert(not ok)
      print("first:", err.api, err.name)
      for _, f in ipairs { function() cuda.buffer("f32", 4) end,
                           function() keep:fill(0) end,
                           function() s:synchronize() end,
                           function() m.noop:launch(s, 1, 1) end } do
        local ok2, e2 = pcall(f)
        assert(not ok2)
        assert(tostring(e2):find("the process must restart"), tostring(e2))
        assert(e2.name == "CUDA_ERROR_ILLEGAL_ADDRESS", e2.name)
      end
      print("poisoned:", cuda.status().poisoned)
      keep = nil; x = nil
      collectgarbage(); collectgarbage()           -- finalizers skip the driver
      print("finalizer errors:", cuda.status().finalizer_errors)
    ]], nil, { plain = true }) -- the fault on purpose: no compute-sanitizer
    assert.equals(0, code, out)
    assert.matches("first:\tcuStreamSynchronize\tCUDA_ERROR_ILLEGAL_ADDRESS", out)
    assert.matches("poisoned:\tCUDA_ERROR_ILLEGAL_ADDRESS", out)
    assert.matches("finalizer errors:\t0", out)
  end)

  it("is recorded, never raised, when a finalizer meets it", function()
    local code, out = H.script([[
      local cuda = require "cugraph"
      local m = cuda.module(os.getenv("CUGRAPH_LUA_BUILD") .. "/kernels.ptx")
      local s = cuda.stream()
      local x = cuda.buffer("f32", 16)
      local victim = cuda.buffer("f32", 16)
      m.oob_write:launch(s, 1, 1, x)
      victim = nil -- luacheck: ignore
      collectgarbage(); collectgarbage()   -- cuMemFree meets the fault
      local st = cuda.status()
      print("finalizer errors:", st.finalizer_errors, st.last_finalizer_error)
      print("poisoned:", st.poisoned)
      local ok, err = pcall(cuda.buffer, "f32", 4)
      print("next call:", ok, err.name, tostring(err):find("must restart") ~= nil)
    ]], "", { plain = true })
    assert.equals(0, code, out)
    assert.matches("finalizer errors:\t1\tcuMemFree: CUDA_ERROR_ILLEGAL_ADDRESS", out)
    assert.matches("poisoned:\tCUDA_ERROR_ILLEGAL_ADDRESS", out)
    assert.matches("next call:\tfalse\tCUDA_ERROR_ILLEGAL_ADDRESS\ttrue", out)
  end)
end)
