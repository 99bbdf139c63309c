-- Ownership of every object kind the runtime has: each closes three ways
-- (free/close, __close, collection), is kept by a Lua graph that used it,
-- is kept by a C graph made from that graph after the Lua graph is freed,
-- and is released at lua_close with nothing left behind (spec/hosts/capi.c
-- runs the C side and counts device memory before and after). A buffer of
-- graph memory (an allocation node's) lives with the graph that allocates
-- it; the GL resource is the software driver's stand-in (spec/40).
local H = require "support.helper"
local cuda = H.cuda

local kinds = function() return require("support.kinds")(cuda, H) end
local _, N = kinds()

-- A graph that allocates a buffer of N i32 on s (an allocation node) and
-- fills it, and the buffer.
local function allocating(s)
  local b
  local g = s:capture(function()
    b = cuda.buffer("i32", N, { stream = s })
    b:fill(1, s)
  end)
  return g, b
end

describe("every object kind", function()
  it("closes three ways: free, __close and collection", function()
    local list = kinds()
    list[#list + 1] = { "node", function()
      local s = cuda.stream()
      local x = cuda.buffer("i32", N):fill(0)
      return s:capture(function() H.kernels().inc_i32:launch(s, 4, 256, x, N) end):node(1)
    end }
    list[#list + 1] = { "DLPack tensor", function() return cuda.buffer("i32", N):dlpack() end }
    if not H.gpu then -- the software driver's GL stand-in (spec/40)
      list[#list + 1] = { "GL resource", function() return cuda.gl_buffer(3, "i32") end }
    end
    for _, k in ipairs(list) do
      local name, make = k[1], k[2]
      local o = make()
      o:free()
      assert.matches("%(freed%)$", tostring(o), name)
      o:free(); o:close(); debug.getmetatable(o).__gc(o) -- harmless again
      do
        local c <close> = make()
        o = c
      end
      assert.matches("%(freed%)$", tostring(o), name)
      local weak = setmetatable({ make() }, { __mode = "v" })
      collectgarbage(); collectgarbage()
      assert.is_nil(weak[1], name)
    end
    assert.equals(0, cuda.status().finalizer_errors)
  end)

  it("is kept by a Lua graph that used it, and its free is refused", function()
    local list = kinds()
    for _, k in ipairs(list) do
      local name, make, use = k[1], k[2], k[3]
      local s = cuda.stream()
      local y = cuda.buffer("i32", N):fill(0)
      local o = make()
      H.settle() -- the condition's kind captures a while loop
      local g = s:capture(function() use(o, s, y) end)
      assert.error_matches(function() o:free() end,
        "cannot free cugraph%.%a+: it is used by live cugraph%.Graph #" .. g:id(), nil, name)
      local weak = setmetatable({ o }, { __mode = "v" })
      o = nil -- luacheck: ignore
      collectgarbage(); collectgarbage()
      assert.is_not_nil(weak[1], name .. ": collected under a live graph")
      g:launch(); g:launch()
      s:synchronize()
      local t = y:download()
      assert(t[1] == 2 and t[N] == 2, name .. ": y is " .. t[1] .. " after two launches")
      g:free()
      collectgarbage(); collectgarbage()
      assert.is_nil(weak[1], name .. ": kept after its graph was freed")
    end
    assert.equals(0, cuda.status().finalizer_errors)
  end)

  it("a graph-memory buffer lives with the graph that allocates it, and closes three ways after it", function()
    local s = cuda.stream()
    local function make() return allocating(s) end
    local g, b = make()
    local gone = "is memory that cugraph%.Graph #" .. g:id() .. " allocates, and is not allocated now"
    assert.error_matches(function() b:download() end, gone) -- before the first launch
    g:launch(); s:synchronize()
    assert.equals(1, b:download()[N])
    b:free()                                                 -- its memory, stream-ordered
    assert.error_matches(function() b:download() end, gone)
    g:launch(); s:synchronize()                              -- allocated again
    assert.equals(1, b:download()[1])
    assert.error_matches(function() local c <close> = b end, -- luacheck: ignore
      "cannot free cugraph%.Buffer: it is used by live cugraph%.Graph #" .. g:id())
    g:free()
    assert.equals(1, b:download()[1])                        -- the last launch's memory
    b:free()
    assert.matches("%(freed%)$", tostring(b))
    g, b = make()
    g:launch(); g:free()
    do local c <close> = b end -- luacheck: ignore
    assert.matches("%(freed%)$", tostring(b))
    local weak = setmetatable({}, { __mode = "v" })
    g, weak[1] = make()
    g:launch(); s:synchronize()
    collectgarbage(); collectgarbage()
    assert.is_not_nil(weak[1], "collected under its graph")
    g:free()
    collectgarbage(); collectgarbage()
    assert.is_nil(weak[1])
    assert.equals(0, cuda.status().finalizer_errors)
  end)

  it("frees graph memory after the launch that allocated it, from any stream or a finalizer", function()
    -- work queued ahead of the launch, so that the launch has not run when
    -- the buffer is freed: a free that does not wait for it would come
    -- before the allocation, which would then outlive everything
    local s, big = cuda.stream(), cuda.buffer("i32", 1 << 22):fill(0)
    local function busy() for _ = 1, (H.gpu and 200 or 2) do H.kernels().inc_i32:launch(s, 4096, 1024, big, 1 << 22) end end
    local function graph() return allocating(s) end
    -- the device's graph pool counts a freed allocation's block as used
    -- until it is trimmed (an H200: 32 MiB for these 4 KiB), and a trim
    -- cannot give back an allocation that is still outstanding
    local function used() s:synchronize(); cuda.trim(); return cuda.memory().graph.used end
    local g, b = graph()
    busy(); g:launch(s); g:free()
    do local c <close> = b end -- luacheck: ignore
    assert.equals(0, used(), "closed")
    g, b = graph()
    busy(); g:launch(s); g:free()
    b:free()
    assert.equals(0, used(), "b:free()")
    local weak = setmetatable({}, { __mode = "v" })
    g, weak[1] = graph()
    busy(); g:launch(s); g:free()
    collectgarbage(); collectgarbage()
    assert.is_nil(weak[1])
    assert.equals(0, used(), "collected")
    if H.double then -- the driver calls: each free waits for the launch
      local path = os.tmpname()
      local f = assert(io.open(path, "w"))
      f:write([[
        local cuda = require "cugraph"
        local s, b = cuda.stream()
        local g = s:capture(function() b = cuda.buffer("i32", 16, { stream = s }); b:fill(1, s) end)
        g:launch(s); g:free(); b:free()
      ]])
      f:close()
      local counts, code, out = H.trace(path, "CUDA_DOUBLE_TRACE")
      os.remove(path)
      assert.equals(0, code, out)
      assert.equals(1, counts.cuMemFreeAsync)
      assert.equals(1, counts.cuStreamWaitEvent)
    end
  end)

  it("is kept by a C graph after the Lua graph is freed, and released at lua_close", function()
    H.capi_passes([[
      local cuda = require "cugraph"
      package.path = os.getenv("CUGRAPH_LUA_SPEC") .. "/?.lua;" .. package.path
      local H = require "support.helper"
      local list, N = require("support.kinds")(cuda, H)
      if pcall(cuda.nccl_version) and not os.getenv("CUGRAPH_LUA_SANITIZER") then
        -- what NCCL keeps for the process
        cuda.comms({ 0 })[1]:free()
        collectgarbage(); collectgarbage()
      end
      capi.baseline()

      for _, k in ipairs(list) do
        local name, make, use = k[1], k[2], k[3]
        local s = cuda.stream()
        local y = cuda.buffer("i32", N):fill(0)
        local o = make()
        local g = s:capture(function() use(o, s, y) end)
        g:launch(); s:synchronize()
        assert(y:download()[1] == 1, name .. ": one launch, one higher")
        local h = capi.tograph(g)
        g:free()
        o:free()              -- no live Lua graph uses it: its handle goes
        local addr = y:address()
        collectgarbage(); collectgarbage() -- views made in use() go
        y:free()              -- to the C graph, and so does y's memory
        local err = capi.launch(h)
        assert(err == nil, name .. ": " .. tostring(err))
        capi.after(h, addr, N, "i32", 3)
      end
      -- a C graph of a graph that allocates its own memory is refused
      local s = cuda.stream()
      local ok, err = pcall(s.capture, s, function()
        local b = cuda.buffer("i32", N, { stream = s })
        H.kernels().inc_i32:launch(s, 4, 256, b, N)
        b:free(s)
      end)
      assert(ok, err)
      local g = err
      ok, err = pcall(capi.tograph, g)
      assert(not ok and tostring(err):find("allocat"), tostring(err))
      -- a C graph of a graph inside a GL map scope is refused; a GL
      -- resource left open goes at lua_close with its memory
      if not H.gpu then
        local r = cuda.gl_buffer(4, "i32")
        r:map(s, function(b)
          local gg <close> = s:capture(function() H.kernels().inc_i32:launch(s, 4, 256, b, N) end)
          ok, err = pcall(capi.tograph, gg)
          assert(not ok and tostring(err):find("map scope"), tostring(err))
        end)
      end
      print("script done")
    ]])
  end)
end)
