-- Memory and semaphores of another API (cuda.external_memory,
-- cuda.external_semaphore): imported from the descriptors a peer exports
-- (spec/support/peer.c: memfds for the software driver, Vulkan's exports on
-- a GPU), buffers and arrays mapped from the memory, waits and signals
-- eager and as graph nodes, a timeline value set per launch from a u64
-- Scalar, by Lua and by C graphs; lifetimes (the memory goes after what
-- was mapped from it, graphs keep both) and the checks before the driver.
-- Their ownership beside every other kind is spec/04's (support/kinds.lua).
local H = require "support.helper"
local cuda = H.cuda

local N = 1024

-- The peer, or pending with the reason it cannot be had.
local function peer()
  local p, why = H.peer()
  if not p then pending(why) end
  return p
end

-- cuda.external_memory over a new peer allocation of n i32: the memory,
-- the peer's object (kept by the caller) and the bytes imported.
local function import(p, n)
  local m = p.memory(n * 4)
  return cuda.external_memory(m:fd(), m:size()), m, m:size()
end

local function counting(n)
  local v = {}
  for i = 1, n do v[i] = i end
  return v
end

describe("cuda.external_memory", function()
  it("maps buffers that alias the memory, through every import of it", function()
    local p = peer()
    if not p then return end
    local m = p.memory(N * 4)
    local e1 = cuda.external_memory(m:fd(), m:size())
    local e2 = cuda.external_memory(m:fd(), m:size(), { dedicated = false })
    assert.matches("^cugraph%.ExternalMemory of " .. m:size() .. " bytes %(", tostring(e1))
    assert.equals(m:size(), e1:size())
    local a, b = e1:buffer("i32", N), e2:buffer("i32", N)
    a:upload(counting(N))
    local s = cuda.stream()
    H.kernels().inc_i32:launch(s, 4, 256, a, N)
    s:synchronize()
    local back = b:download()
    for i = 1, N do assert.equals(i + 1, back[i]) end
    -- a range at an offset sees the same elements
    local tail = e2:buffer("i32", 16, 4 * (N - 16))
    assert.same({ N - 14, N - 13 }, { tail:download()[1], tail:download()[2] })
    assert.equals(e2, tail:parent()) -- a mapping of its own, not a view of b
    assert.matches("^cugraph%.Buffer i32%[16%] %(0x%x+, external%)$", tostring(tail))
    tail:free(); a:free(); b:free(); e1:free(); e2:free()
    m:close()
  end)

  it("maps arrays that surfaces write and copies read", function()
    local p = peer()
    if not p then return end
    local W, R = 16, 8
    local e, m = import(p, W * R)
    local arr = e:array("f32", W, R, { surface = true })
    assert.same({ W, R }, { arr:shape() })
    assert.matches("f32%[16x8%] surface", tostring(arr))
    local k = cuda.module(H.build .. "/textures.ptx")
    local sf = arr:surface()
    k.surf_fill_f32:launch(cuda.stream(), { 1, R }, W, sf, W, R, 0.5)
    local out = cuda.buffer("f32", W * R):fill(0)
    out:copy2d(arr, W, R)
    local v = out:download()
    for y = 0, R - 1 do
      for x = 0, W - 1 do assert.equals(0.5 + x + 1000 * y, v[y * W + x + 1]) end
    end
    -- the array goes after its surface, the memory after the array
    assert.error_matches(function() arr:free() end, "open texture or surface")
    assert.error_matches(function() e:free() end,
      "cannot free cugraph.ExternalMemory: 1 open buffer or array mapped from it")
    sf:free(); arr:free(); e:free()
    m:close()
  end)

  it("is freed after its buffers and arrays, and kept by graphs that use them", function()
    local p = peer()
    if not p then return end
    local e, m, bytes = import(p, N)
    local view = cuda.external_memory(m:fd(), bytes):buffer("i32", N) -- to look
    local b = e:buffer("i32", N):fill(0)
    assert.error_matches(function() e:free() end, "1 open buffer or array mapped from it")
    local s = cuda.stream()
    local g = s:capture(function() H.kernels().inc_i32:launch(s, 4, 256, b, N) end)
    assert.error_matches(function() b:free() end, "used by live cugraph.Graph")
    b, e = nil, nil
    collectgarbage(); collectgarbage() -- the graph keeps both
    g:launch(s); g:launch(s); s:synchronize()
    assert.equals(2, view:download()[N])
    g:free()
    collectgarbage(); collectgarbage()
    view:fill(7)
    assert.equals(7, view:download()[1])
    m:close()
  end)

  it("refuses bad handles, sizes, kinds, ranges and options before the driver", function()
    local p = peer()
    if not p then return end
    local m = p.memory(N * 4)
    local fd = m:fd()
    assert.error_matches(function() cuda.external_memory(-1, 64) end,
      "the handle must be a file descriptor")
    assert.error_matches(function() cuda.external_memory({}, 64) end,
      "the handle must be a file descriptor")
    assert.error_matches(function() cuda.external_memory(1 << 30, 64) end,
      "is not an open file descriptor")
    assert.error_matches(function() cuda.external_memory(fd, 0) end, "positive number of bytes")
    assert.error_matches(function() cuda.external_memory(fd, 64, { kind = "d3d12_heap" }) end,
      "handle kind \"d3d12_heap\" is not one of this platform's")
    assert.error_matches(function() cuda.external_memory(fd, 64, { kind = "dmabuf" }) end,
      "invalid option 'dmabuf'")
    assert.error_matches(function() cuda.external_memory(fd, 64, { dedicate = true }) end,
      "unknown option 'dedicate'")
    assert.is_true(p.isopen(fd)) -- refused before the driver: still the caller's
    local e = cuda.external_memory(fd, m:size())
    assert.error_matches(function() e:buffer("i32", m:size()) end, "pass the end of the external memory")
    assert.error_matches(function() e:buffer("i32", 4, m:size()) end, "pass the end")
    assert.error_matches(function() e:buffer("i32", 4, 2) end, "offset 2 is not aligned for i32")
    assert.error_matches(function() e:buffer("i32", 4, -4) end, "pass the end")
    assert.error_matches(function() e:array("f32x3", 4, 4) end, "a texel has 1, 2 or 4 channels")
    assert.error_matches(function() e:array("f64", 4, 4) end, "the element type must be one of")
    assert.error_matches(function() e:array("f32", 4, nil, 2) end, "a depth needs a height")
    assert.error_matches(function() e:array("f32", 0) end, "width must be 1..2^30")
    assert.error_matches(function() e:array("f32", 4, 4, { surfac = true }) end, "unknown option 'surfac'")
    assert.error_matches(function() e:array("f32", 1 << 20, 1 << 20) end, "pass the end")
    local s, y = cuda.stream(), cuda.buffer("i32", 4):fill(0)
    s:capture(function()
      assert.error_matches(function() e:buffer("i32", 4) end, "cannot map external memory inside a graph capture")
      assert.error_matches(function() cuda.external_memory(m:fd(), m:size()) end,
        "cannot import external memory inside a graph capture")
      H.kernels().inc_i32:launch(s, 1, 4, y, 4)
    end)
    e:free()
    assert.error_matches(function() e:buffer("i32", 4) end, "attempt to use a freed cugraph.ExternalMemory")
    m:close()
  end)
end)

describe("cuda.external_semaphore", function()
  it("waits and signals binary and timeline semaphores on streams", function()
    local p = peer()
    if not p then return end
    local t = p.semaphore("timeline")
    local st = cuda.stream()
    local sem = cuda.external_semaphore(t:fd(), "timeline")
    assert.equals("timeline", sem:kind())
    assert.matches("^cugraph%.ExternalSemaphore timeline %(", tostring(sem))
    assert.equals(st, st:signal_external(sem, 5))
    st:synchronize()
    assert.is_true(t:wait(5, 10))
    assert.equals(5, t:value())
    t:signal(9) -- the peer's turn: work after the wait runs once it signals
    local y = cuda.buffer("i32", N):fill(0)
    st:wait_external(sem, 9)
    H.kernels().inc_i32:launch(st, 4, 256, y, N)
    st:signal_external(sem, 10)
    assert.is_true(t:wait(10, 10))
    st:synchronize()
    assert.equals(1, y:download()[N])

    local b = p.semaphore("binary")
    local sb = cuda.external_semaphore(b:fd())
    assert.equals("binary", sb:kind())
    st:signal_external(sb)
    st:synchronize()
    assert.is_true(b:wait(10))
    b:signal()
    st:wait_external(sb)
    st:synchronize()
    sem:free(); sb:free(); t:close(); b:close()
  end)

  it("captures waits and signals as nodes, a timeline's value set per launch from a u64 Scalar", function()
    local p = peer()
    if not p then return end
    local t = p.semaphore("timeline")
    local sem = cuda.external_semaphore(t:fd(), "timeline")
    local wait_at, signal_at = cuda.scalar("u64", 0), cuda.scalar("u64", 0)
    local y = cuda.buffer("i32", N):fill(0)
    local s = cuda.stream()
    local g = s:capture(function()
      s:wait_external(sem, wait_at)
      H.kernels().inc_i32:launch(s, 4, 256, y, N)
      s:signal_external(sem, signal_at)
    end)
    local _, nodes = g:nodes("detail")
    assert.same({ "semaphore wait", "kernel", "semaphore signal" },
      { nodes[1].kind, nodes[2].kind, nodes[3].kind })
    assert.equals(sem, nodes[1].semaphore)
    assert.equals(wait_at, nodes[1].value)
    assert.equals(signal_at, nodes[3].value)
    for f = 1, 4 do -- the frame loop: the peer renders, then the graph runs
      t:signal(2 * f - 1)
      wait_at:set(2 * f - 1)
      signal_at:set(2 * f)
      g:launch(s)
      assert.is_true(t:wait(2 * f, 10), "frame " .. f)
    end
    s:synchronize()
    assert.equals(4, y:download()[1])
    assert.equals(8, t:value())
    -- an integer is the node's for good; a second graph signals past it
    local g2 = s:capture(function() s:signal_external(sem, 100) end)
    assert.equals(100, select(2, g2:nodes("detail"))[1].value)
    g2:launch(s)
    assert.is_true(t:wait(100, 10))
    -- a graph keeps the semaphore and the scalar
    assert.error_matches(function() sem:free() end, "used by live cugraph.Graph")
    assert.error_matches(function() wait_at:free() end, "used by live cugraph.Graph")
    -- an update cannot keep per-launch values; rebinding them is refused
    assert.error_matches(function() g:update(function() end) end,
      "external semaphore nodes whose value is a cugraph.Scalar's")
    assert.error_matches(function() g:rebind(wait_at, cuda.scalar("u64", 0)) end,
      "cannot change in place")
    g:free(); g2:free(); sem:free(); t:close()
  end)

  it("runs a frame graph from C with the values C sets (cugraph_tograph, cugraph_scalar_set)", function()
    if not peer() then return end
    H.capi_passes([[
      local cuda = require "cugraph"
      package.path = os.getenv("CUGRAPH_LUA_SPEC") .. "/?.lua;" .. package.path
      local H = require "support.helper"
      local p = H.peer()
      local t, m = p.semaphore("timeline"), p.memory(4096)
      capi.baseline() -- the peer's device memory (Vulkan's on a GPU) is not ours
      -- the host imports and hands over borrowed objects
      local sem = capi.extsem(t:fd(), true)
      local mem = capi.extmem(m:fd(), m:size())
      assert(tostring(sem):find("timeline, borrowed"), tostring(sem))
      assert(tostring(mem):find("borrowed"), tostring(mem))
      local y = mem:buffer("i32", 256):fill(0)
      local wait_at, signal_at = cuda.scalar("u64", 0), cuda.scalar("u64", 0)
      local s, inc = cuda.stream(), H.kernels().inc_i32
      local g = s:capture(function()
        s:wait_external(sem, wait_at)
        inc:launch(s, 1, 256, y, 256)
        s:signal_external(sem, signal_at)
      end)
      local h = capi.tograph(g)
      local cw, cs = capi.scalar(wait_at), capi.scalar(signal_at)
      g:free(); sem:free(); y:free(); mem:free() -- C keeps what it needs
      collectgarbage(); collectgarbage()
      for f = 1, 3 do
        t:signal(2 * f - 1)
        capi.set(cw, 2 * f - 1)
        capi.set(cs, 2 * f)
        local err = capi.launch(h)
        assert(err == nil, tostring(err))
        assert(t:wait(2 * f, 10), "frame " .. f)
      end
      local look = cuda.external_memory(m:fd(), m:size()):buffer("i32", 256)
      assert(look:download()[256] == 3, "three launches, three higher")
      capi.release(h)
      print("script done")
    ]])
  end)

  it("refuses values that do not fit the semaphore, before the driver", function()
    local p = peer()
    if not p then return end
    local t, b = p.semaphore("timeline"), p.semaphore("binary")
    local sem, sb = cuda.external_semaphore(t:fd(), "timeline"), cuda.external_semaphore(b:fd())
    local s = cuda.stream()
    assert.error_matches(function() s:signal_external(sem) end, "a timeline semaphore needs a value")
    assert.error_matches(function() s:wait_external(sb, 1) end, "a binary semaphore takes no value")
    assert.error_matches(function() s:signal_external(sem, -1) end, "an integer >= 0 or a u64")
    assert.error_matches(function() s:signal_external(sem, 1.5) end, "an integer >= 0 or a u64")
    assert.error_matches(function() s:signal_external(sem, cuda.scalar("f32", 1)) end,
      "the value's cugraph.Scalar must be u64, not f32")
    assert.error_matches(function() s:signal_external(sem, 1, 2) end, "takes a semaphore and a value")
    assert.error_matches(function() s:signal_external(cuda.stream(), 1) end, "cugraph.ExternalSemaphore expected")
    assert.error_matches(function() cuda.external_semaphore(t:fd(), "fence") end, "invalid option 'fence'")
    assert.error_matches(function() cuda.external_semaphore(-2) end, "the handle must be a file descriptor")
    local c = cuda.condition(1)
    local v = cuda.scalar("u64", 1)
    assert.error_matches(function()
      s:capture(function()
        s:loop_while(c, function() s:signal_external(sem, v); c:count_down(s, 1) end)
      end)
    end, "set per launch in the top graph only")
    sem:free(); sb:free()
    assert.error_matches(function() s:signal_external(sem, 1) end, "attempt to use a freed cugraph.ExternalSemaphore")
    t:close(); b:close()
  end)
end)
