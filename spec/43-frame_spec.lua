-- An engine's frame as one graph: frame fences on the engine's own
-- counters (s:wait_value, s:write_value), eager and as batch memory
-- operation nodes whose value a Scalar gives at every launch, from Lua and
-- from C; host hooks (s:host) of C functions, under the driver's rule.
local H = require "support.helper"
local cuda = H.cuda

describe("frame fences", function()
  it("write and wait for 32- and 64-bit counters in host, device and scalar memory", function()
    local s = cuda.stream()
    local h = cuda.host_buffer("u32", 2)
    local b = cuda.buffer("u64", 4):fill(0)
    local sc = cuda.scalar("u32", 0)
    assert.equals(s, s:write_value(h, 7))
    s:write_value(b:view(2, 1), 0x123456789ab):write_value(sc, 4000000000)
    s:synchronize()
    assert.equals(7, h[0])
    assert.equals(0, h[1])
    assert.same({ 0, 0, 0x123456789ab, 0 }, b:download("table"))
    assert.equals(4000000000, sc:get())
    -- satisfied waits pass: a cyclic >= (a counter that wrapped is past a
    -- value just below it), ==, a bit in common, no bit in common with
    -- either
    assert.equals(s, s:wait_value(h, 7))
    s:wait_value(h, 6, "geq"):wait_value(h, 7, "eq"):wait_value(h, 5, "and")
    local nor, err = pcall(s.wait_value, s, h, 0xfffffff0, "nor")
    if not nor then -- a device may lack it, and says so before the driver
      assert.matches('device %d+ has no "nor" comparison', tostring(err))
    end
    s:synchronize() -- the waits above read h: written below only after them
    h[0] = 1
    s:wait_value(h, 0xfffffff0) -- 1 - 0xfffffff0 is 17, cyclicly
    s:wait_value(b:view(2, 1), 0x123456789ab, "eq"):wait_value(sc, 4000000000, "eq")
    s:synchronize() -- as for h: the wait above reads sc
    sc:set(9) -- a scalar counter's host value comes first
    s:wait_value(sc, 9, "eq")
    s:synchronize()
  end)

  it("take the value from a scalar of the counter's type at every launch", function()
    local s = cuda.stream()
    local go, done = cuda.host_buffer("u64", 1), cuda.host_buffer("u64", 1)
    local frame = cuda.scalar("u64", 0)
    local y = cuda.buffer("i32", 256):fill(0)
    local inc = H.kernels().inc_i32
    local g = s:capture(function()
      s:wait_value(go, frame)
      inc:launch(s, 1, 256, y, 256)
      s:write_value(done, frame)
    end)
    local n, nodes = g:nodes("detail")
    assert.equals(3, n)
    assert.equals("wait value", nodes[1].kind)
    assert.equals(go, nodes[1].counter)
    assert.equals(frame, nodes[1].value)
    assert.equals("geq", nodes[1].op)
    assert.equals("write value", nodes[3].kind)
    assert.equals(done, nodes[3].counter)
    assert.matches("43%-frame_spec", nodes[1].source)
    for f = 1, 4 do
      go[0] = f
      frame:set(f)
      g:launch()
      s:synchronize()
      assert.equals(f, done[0])
    end
    assert.equals(4, y:download()[256])
    -- an integer value is the node's own
    local g2 = s:capture(function() s:write_value(done, 77) end)
    g2:launch()
    s:synchronize()
    assert.equals(77, done[0])
    local _, n2 = g2:nodes("detail")
    assert.equals(77, n2[1].value)
  end)

  it("refuse what the driver's memory operations cannot take, before the driver", function()
    local s = cuda.stream()
    local h = cuda.host_buffer("u32", 1)
    local function refused(pattern, ...)
      local args = table.pack(...)
      assert.error_matches(function() s:wait_value(table.unpack(args, 1, args.n)) end,
                           pattern, nil, true)
    end
    refused("the counter must be u32 or u64, not f32", cuda.buffer("f32", 1), 1)
    refused("the counter must be u32 or u64, not i64", cuda.scalar("i64"), 1)
    refused("the counter is managed memory", cuda.managed("u32", 1), 1)
    refused("(the counter) expected, got number", 3, 1)
    refused("the value must be an integer or a u32 cugraph.Scalar, got string", h, "5")
    refused("the value: -1 is out of range for u32", h, -1)
    refused("the value: 4294967296 is out of range for u32", h, 1 << 32)
    refused("the value's cugraph.Scalar must be u32 like the counter, not u64", h, cuda.scalar("u64"))
    refused("invalid option 'lt' (expected geq, eq, and or nor)", h, 1, "lt")
    refused("takes a counter, a value and a comparison, got 4 arguments", h, 1, "eq", 2)
    assert.error_matches(function() s:write_value(h, 1, "eq") end,
                         "takes a counter, a value, got 3 arguments", nil, true)
    local b = cuda.buffer("u32", 1)
    b:free()
    refused("attempt to use a freed cugraph.Buffer", b, 1)
    local hb = cuda.host_buffer("u32", 1)
    hb:free()
    refused("attempt to use a freed cugraph.HostBuffer", hb, 1)
    -- a conditional node's body takes no memory operation
    local c = cuda.condition(1)
    assert.error_matches(function()
      s:capture(function() s:loop_while(c, function() s:write_value(h, 1) end) end)
    end, "s:write_value inside the body of a conditional node: the driver takes only kernel, "
         .. "memset, memcpy, child graph and conditional nodes there", nil, true)
    assert.is_nil(cuda.status().poisoned)
  end)

  it("refuse 64-bit counters and the nor comparison where the device lacks them", function()
    if not H.double then
      return pending("the test double's CUDA_DOUBLE_NARROW_MEMOPS takes them from its device")
    end
    local code, out = H.script([[
      local cuda = require "cugraph"
      local s = cuda.stream()
      print(pcall(s.write_value, s, cuda.buffer("u64", 1), 1))
      print(pcall(s.wait_value, s, cuda.host_buffer("u32", 1), 0, "nor"))
      s:write_value(cuda.buffer("u32", 1), 1):synchronize()
      print("u32 works")
    ]], "CUDA_DOUBLE_NARROW_MEMOPS=1")
    assert.equals(0, code, out)
    assert.matches("false\t[^\n]*s:write_value: device 0 has no 64%-bit stream memory operations "
                   .. "%(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS%): use a u32 counter", out)
    assert.matches('false\t[^\n]*s:wait_value: device 0 has no "nor" comparison', out)
    assert.matches("u32 works", out)
  end)

  it("hold the stream while the counter says no, within the wait's bound", function()
    -- On a GPU the wait returns and the stream waits, until a bounded wait
    -- for the stream ends; the software drivers wait inside the call,
    -- bounded the same. Writing the counter then lets the stream go on.
    local code, out = H.script([[
      local cuda = require "cugraph"
      local s = cuda.stream()
      local h = cuda.host_buffer("u32", 1)
      local function blocked(counter, v, op)
        h[0] = counter
        local ok, err = pcall(function() s:wait_value(h, v, op); s:synchronize(0.2) end)
        print(op, ok, cuda.is_error(err) and err.name, cuda.is_error(err) and err.api)
        h[0] = v -- satisfies each of them
        s:synchronize()
      end
      blocked(6, 7, "geq")
      blocked(6, 5, "eq")
      blocked(6, 1, "and")
      if pcall(s.wait_value, s, h, 0, "nor") then blocked(6, 0xfffffff9, "nor")
      else print("nor", "unsupported") end
      local frame = cuda.scalar("u32", 3)
      local g = s:capture(function() s:wait_value(h, frame) end)
      h[0] = 2
      local ok, err = pcall(function() g:launch(); s:synchronize(0.2) end)
      print("graph", ok, cuda.is_error(err) and err.name, tostring(err):match("cugraph.Graph #%d+"))
      h[0] = 3
      s:synchronize()
      print("usable", cuda.status().poisoned)
    ]], "CUGRAPH_LUA_TIMEOUT=0.2 timeout 120", { plain = true })
    assert.equals(0, code, out)
    -- (the simulator's strict mode runs the wait when the stream is waited for,
    -- as a GPU does)
    local api = (H.gpu or H.strict) and "cuStreamSynchronize" or "cuStreamWaitValue32"
    for _, op in ipairs { "geq", "eq", "and", "nor" } do
      if not (op == "nor" and out:find("nor\tunsupported")) then
        assert.matches(op .. "\tfalse\tCUDA_ERROR_TIMEOUT\t" .. api, out)
      end
    end
    assert.matches("graph\tfalse\tCUDA_ERROR_TIMEOUT\tcugraph.Graph #1", out)
    assert.matches("usable\tnil", out)
  end)

  it("run a frame graph from C with the values C sets, on the engine's counters", function()
    H.capi_passes([[
      local cuda = require "cugraph"
      package.path = os.getenv("CUGRAPH_LUA_SPEC") .. "/?.lua;" .. package.path
      local H = require "support.helper"
      local fences = capi.hostmem("u64", 2) -- the engine's page-locked counters
      assert(tostring(fences):find("borrowed"), tostring(fences))
      local go, done = fences, capi.hostmem("u64", 1)
      local frame = cuda.scalar("u64", 0)
      local y = cuda.buffer("i32", 256):fill(0)
      local s, inc = cuda.stream(), H.kernels().inc_i32
      local g = s:capture(function()
        s:wait_value(go, frame)
        inc:launch(s, 1, 256, y, 256)
        s:write_value(done, frame)
      end)
      local h, cf = capi.tograph(g), capi.scalar(frame)
      g:free(); frame:free() -- C keeps what it needs
      collectgarbage(); collectgarbage()
      for f = 1, 3 do
        capi.store(go, 0, f)
        capi.set(cf, f)
        local err = capi.launch(h)
        assert(err == nil, tostring(err))
        assert(capi.load(done, 0) == f, "frame " .. f .. ": done " .. capi.load(done, 0))
        assert(done[0] == f)
      end
      assert(y:download()[256] == 3, "three launches, three higher")
      capi.release(h)
      -- only page-locked memory is taken
      local ok, err = pcall(capi.hostmem, "u64", 1, true)
      assert(not ok and err:find("is not mapped page%-locked memory of device 0"), err)
      ok, err = pcall(capi.hostmem, "float4", 1)
      assert(not ok and err:find("cugraph_pushhostbuffer: unknown element type 'float4'"), err)
      print("script done")
    ]])
  end)

  it("are recorded by graphed functions and made again in their graphs", function()
    local s = cuda.stream()
    local h = cuda.host_buffer("u32", 1)
    local y = cuda.buffer("i32", 64):fill(0)
    local inc = H.kernels().inc_i32
    local f = cuda.graphed(function(st, v)
      st:wait_value(h, v)
      inc:launch(st, 1, 64, y, 64)
      st:write_value(h, v + 1)
    end)
    for v = 0, 3 do
      f(s, v)
      s:synchronize()
      assert.equals(v + 1, h[0])
    end
    assert.equals(4, y:download()[1])
    assert.is_true(#f:graphs() >= 1)
  end)
end)

describe("host hooks", function()
  it("call C's function in stream order, eagerly and at every launch of a graph", function()
    H.capi_passes([[
      local cuda = require "cugraph"
      package.path = os.getenv("CUGRAPH_LUA_SPEC") .. "/?.lua;" .. package.path
      local H = require "support.helper"
      local fn, data = capi.hostfn()
      local s = cuda.stream()
      assert(s:host(fn, data) == s)
      s:synchronize()
      assert(capi.hooked() == 1, "eager: " .. capi.hooked())
      local y = cuda.buffer("i32", 64):fill(0)
      local inc = H.kernels().inc_i32
      local g = s:capture(function()
        s:host(fn, data)
        inc:launch(s, 1, 64, y, 64)
        s:host(fn, data)
      end)
      local n, nodes = g:nodes("detail")
      assert(n == 3 and nodes[1].kind == "host" and nodes[3].kind == "host", nodes[1].kind)
      g:replay(3)
      s:synchronize()
      assert(capi.hooked() == 7, "graph: " .. capi.hooked())
      local h = capi.tograph(g) -- a C graph's copy calls it too
      assert(capi.launch(h) == nil)
      assert(capi.hooked() == 9, "C graph: " .. capi.hooked())
      capi.release(h)
      local f = cuda.graphed(function(st) st:host(fn, data); inc:launch(st, 1, 64, y, 64) end)
      f(s); f(s)
      s:synchronize()
      assert(capi.hooked() == 11, "graphed: " .. capi.hooked())
      assert(y:download()[1] == 6)
      -- only functions C registered, with a light userdata or nil for data
      local ok, err = pcall(s.host, s, data)
      assert(not ok and err:find("is no host function C registered"), err)
      ok, err = pcall(s.host, s, fn, 5)
      assert(not ok and err:find("light userdata %(the host function's data%) or nil expected"), err)
      s:host(fn) -- no data: NULL
      s:synchronize()
      print("script done")
    ]])
  end)

  it("refuse a Lua function, saying why, and hooks in a conditional body", function()
    local s = cuda.stream()
    assert.error_matches(function() s:host(function() end) end,
      "a Lua function cannot be a host function: the driver calls host functions on a thread "
      .. "of its own, where this lua_State may not run", nil, true)
    assert.error_matches(function() s:host(cuda.buffer("u8", 1)) end,
                         "host function (cugraph_pushhostfn) expected", nil, true)
    assert.error_matches(function() s:host() end, "got no value", nil, true)
    local c = cuda.condition(1)
    assert.error_matches(function()
      s:capture(function() s:loop_while(c, function() s:host(function() end) end) end)
    end, "a Lua function cannot be a host function", nil, true)
  end)

  it("keep the driver's rule: no CUDA call inside a host function", function()
    if H.gpu then
      return pending("a GPU's driver may refuse such a call or deadlock; the software "
                     .. "driver refuses it always (CUDA_ERROR_NOT_PERMITTED)")
    end
    H.capi_passes([[
      local cuda = require "cugraph"
      local fn, data = capi.hostfn(true) -- calls cuMemGetInfo inside
      local s = cuda.stream()
      s:host(fn, data):synchronize()
      local calls, inside = capi.hooked()
      assert(calls == 1 and inside == "CUDA_ERROR_NOT_PERMITTED", tostring(inside))
      local g = s:capture(function() s:host(fn, data) end)
      g:launch()
      s:synchronize()
      calls, inside = capi.hooked()
      assert(calls == 2 and inside == "CUDA_ERROR_NOT_PERMITTED", tostring(inside))
      assert(cuda.status().poisoned == nil)
      print("script done")
    ]])
  end)
end)

describe("lifetime through the driver", function()
  -- A launch in flight: on a GPU one held by a wait for a counter the
  -- script writes later; the software drivers run the work inside the
  -- launch, and CUDA_DOUBLE_BUSY keeps the device busy 2 s after it, as
  -- work that takes a while does. A free that waited for it (cuMemFree
  -- synchronizes, and the driver's destroy of an instantiated graph with
  -- conditional nodes waits for its launches) would take those seconds,
  -- or hang on the GPU.
  --
  -- Both scripts below (formatted with looped) begin with the work: x,
  -- 16 MiB a captured work(go) increments once, or in a loop's one turn
  -- (looped: a graph with conditional nodes), on a GPU once go says 1.
  local prelude = [[
    local cuda = require "cugraph"
    local m = cuda.load_module(os.getenv("CUGRAPH_LUA_BUILD") .. "/kernels.ptx")
    local gpu = not os.getenv("CUGRAPH_LUA_LIBCUDA")
    local looped = %s
    local N, MB = 1 << 22, 1 << 20 -- 16 MiB; a GPU's driver keeps some of its own
    local slack = gpu and 4 * MB or 0
    -- compute-sanitizer's own device memory moves the count: it checks
    -- the frees itself there (a use after free, a leak at exit)
    local counted = not os.getenv("CUGRAPH_LUA_SANITIZER")
    cuda.synchronize()
    local base = cuda.device().free_memory
    local s = cuda.stream()
    local x = cuda.buffer("i32", N):fill(0)
    local c = looped and cuda.condition(1)
    local function work(go)
      if gpu then s:wait_value(go, 1) end
      if not looped then return m.inc_i32:launch(s, 1, 256, x, 256) end
      s:loop_while(c, function()
        m.inc_i32:launch(s, 1, 256, x, 256)
        c:count_down(s, 1)
      end)
    end
  ]]
  local script = prelude .. [[
    local go = cuda.host_buffer("u32", 1)
    local sc = cuda.scalar("u32", 1)
    local h = cuda.host_buffer("i32", N)
    local g = s:capture(function()
      work(go)
      x:download_into(h, s)
      s:write_value(sc, 2)
    end)
    g:launch()
    local t0 = os.time()
    g:free()
    x:free()
    if c then c:free() end
    sc, h = nil, nil -- and finalizers
    collectgarbage()
    collectgarbage()
    print("waited", os.time() - t0 <= 1)
    print("held", not counted or cuda.device().free_memory <= base - N * 4 + slack)
    go[0] = 1
    s:synchronize()
    local t1 = os.time() -- and the frees the driver's release made (a
    repeat cuda.synchronize() -- while under valgrind)
    until not counted or cuda.device().free_memory >= base - slack or os.time() - t1 > 20
    print("freed", not counted or cuda.device().free_memory >= base - slack)
    print("status", cuda.status().poisoned, cuda.status().finalizer_errors)
  ]]

  for _, way in ipairs { "", "with conditional nodes" } do
    it("frees what a graph used once its launch is over, never waiting for it nor freeing early" ..
       (way ~= "" and ": " .. way or ""), function()
      local code, out = H.script(script:format(tostring(way ~= "")), "CUDA_DOUBLE_BUSY=2500 timeout 60")
      assert.equals(0, code, out)
      assert.matches("waited\ttrue", out)
      assert.matches("held\ttrue", out)
      assert.matches("freed\ttrue", out)
      assert.matches("status\tnil\t0", out)
    end)
  end

  it("frees what a graph used when the stream of its last launch went first, and lets go of none inside a capture", function()
    local inc = H.kernels().inc_i32
    cuda.synchronize()
    local base = cuda.device().free_memory
    local slack = H.gpu and 4 << 20 or 0 -- a GPU's driver keeps some of its own
    -- the last launch's stream freed before the graph: nothing waits on it
    local s, s2 = cuda.stream(), cuda.stream()
    local x = cuda.buffer("i32", 1 << 22):fill(0) -- 16 MiB
    local g = s:capture(function() inc:launch(s, 1, 256, x, 256) end)
    g:launch(s2)
    s2:free()
    g:free()
    x:free()
    cuda.synchronize()
    assert.is_true(cuda.device().free_memory >= base - slack, "the stream went first")
    -- a graph freed inside a capture on the stream of its last launch:
    -- the capture records no work of the release's
    local y = cuda.buffer("i32", 256):fill(0)
    local g2 = s:capture(function() inc:launch(s, 1, 256, y, 256) end)
    g2:launch()
    local g3 = s:capture(function()
      g2:free()
      inc:launch(s, 1, 256, y, 256)
    end)
    assert.equals(1, (g3:nodes()))
    g3:launch()
    s:synchronize()
    assert.equals(2, y:download()[1])
    g3:free()
    y:free()
    assert.is_nil(cuda.status().poisoned)
  end)

  it("frees what a graph that never ran used at once, and a launched one's by cuda.synchronize()", function()
    local s = cuda.stream()
    cuda.synchronize()
    local base = cuda.device().free_memory
    local slack = H.gpu and 4 << 20 or 0 -- a GPU's driver keeps some of its own
    local inc = H.kernels().inc_i32
    for _, launched in ipairs { false, true } do
      local x = cuda.buffer("i32", 1 << 22):fill(0) -- 16 MiB
      local g = s:capture(function() inc:launch(s, 1, 256, x, 256) end)
      if launched then g:launch() end
      g:free()
      x:free()
      if launched then cuda.synchronize() end
      assert.is_true(cuda.device().free_memory >= base - slack, launched and "launched" or "not launched")
    end
  end)

  -- a C graph launches a copy of the graph, or, with conditional nodes,
  -- the Lua graph's own exec (the driver instantiates those once)
  for _, way in ipairs { "a copy", "conditional nodes" } do
    it("keeps a C graph's memory past its release until its launch is over: " .. way, function()
      H.capi_passes((prelude .. [[
        local function holds(cond, what) assert(cond or not counted, what) end
        local go = capi.hostmem("u64", 1)
        local g = s:capture(function() work(go) end)
        local h = capi.tograph(g)
        g:free(); x:free()
        if c then c:free() end
        holds(cuda.device().free_memory <= base - N * 4 + slack, "the C graph holds x")
        capi.start(h, s)      -- launched, not waited for
        local t0 = os.time()
        capi.release(h)       -- the last reference, in flight
        assert(os.time() - t0 <= 1, "the release waited for the launch")
        holds(cuda.device().free_memory <= base - N * 4 + slack, "freed under the launch")
        assert(not capi.settle(0.1), "cugraph_settle found nothing left under the launch")
        capi.store(go, 0, 1)
        -- once the launch is over, a thread of the runtime frees a copy's
        -- memory, or destroys the shared exec, whose destroy the driver
        -- makes wait for the launch (cugraph_settle waits for either); the
        -- Lua graph's keep, which that exec held, goes to the state's
        -- thread, which drops it at its next free or cuda.synchronize()
        if looped then cuda.synchronize() end
        assert(capi.settle(60), "cugraph_settle: not freed after the launch")
        holds(cuda.device().free_memory >= base - slack, "freed after it")
        print("script done")
      ]]):format(tostring(way ~= "a copy")), "CUDA_DOUBLE_BUSY=2500")
    end)
  end
end)

describe("the frame loop", function()
  it("replays a 50-node frame graph from C and from Lua, allocating nothing a frame", function()
    -- examples/embed/frameloop.c, an engine's loop: it checks its counters,
    -- the kernels' work and the allocations itself, and exits 0
    local frames = H.sim and 400 or 2000
    local p = assert(io.popen(H.plain(("%s %d %s 2>&1"):format(
      H.quote(H.build .. "/examples/frameloop"), frames, H.quote(H.build .. "/../lua")))))
    local out = p:read("a")
    local ok = p:close()
    assert.is_true(ok, out)
    assert.matches(frames .. " frames of a 50%-node frame graph", out)
    local ways = 0
    for line in out:gmatch("[^\n]+") do
      if line:find("replay") then
        ways = ways + 1
        assert.matches("p50 [%d.]+ us, p99 [%d.]+ us, p99%.9 [%d.]+ us a frame", line)
        assert.is_truthy(line:find("0.00 bytes a frame by the runtime, 0.00 by Lua", 1, true)
                         or line:find("0.00 bytes a frame by Lua", 1, true), line)
      end
    end
    assert.equals(2, ways, out)
    assert.matches("all checks passed", out)
  end)
end)
