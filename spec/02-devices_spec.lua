-- Several devices: cuda.on, objects that belong to a device, peer access
-- and copies, NCCL communicators (eager, grouped, captured) and the
-- launcher. Cases of two devices run in a subprocess: on the test double
-- with CUDA_DOUBLE_DEVICES=2, on a GPU machine with two GPUs or more
-- (pending with fewer).
local H = require "support.helper"
local cuda = H.cuda

-- The environment of two-device subprocesses.
local TWO = H.double and "CUDA_DOUBLE_DEVICES=2" or ""

local function two_devices()
  if H.double then return true end
  return cuda.device_count() >= 2
end

-- Runs a chunk in a subprocess with two devices; it prints "ok" at the end.
local function run2(src, env)
  local prelude = ("local cuda = require 'cugraph'\nlocal PTX = %q\n"):format(H.build .. "/kernels.ptx")
  local code, out = H.script(prelude .. src .. "\nprint('ok')\n", TWO .. (env and " " .. env or ""))
  assert.equals(0, code, out)
  assert.truthy(("\n" .. out):find("\nok\n", 1, true), out)
  return out
end

local function values(b) return table.concat(b:download(), " ") end

describe("devices", function()
  it("cuda.on makes objects on a device and restores the one before", function()
    local a, b = cuda.on(0, function(x, y)
      assert.equals(0, cuda.current_device())
      return x + y, cuda.buffer("f32", 2)
    end, 1, 2)
    assert.equals(3, a)
    assert.equals(0, cuda.device_of(b))
    assert.equals(0, cuda.device_of(cuda.stream()))
    assert.equals(0, cuda.device_of(H.kernels().saxpy))
    local err = H.error_of(cuda.on, 0, function() error({ tag = "mine" }) end)
    assert.equals("mine", err.tag) -- the closure's own error
    assert.equals(0, cuda.current_device())
    assert.error_matches(function() cuda.on(4096, function() end) end, "device ordinal out of range")
    assert.error_matches(function() cuda.on(cuda.device_count(), function() end) end,
                         "does not exist")
    assert.error_matches(function() cuda.device_of({}) end, "cugraph object expected")
    assert.is_true(cuda.can_access_peer(0, 0))
    cuda.enable_peer_access(0, 0) -- one device: nothing to do
  end)

  it("traces the calls of two devices into one profile, each under its device", function()
    if not two_devices() then return pending("needs two devices") end
    local trace = os.tmpname()
    local out = run2([[
      local m0, s0 = cuda.load_module(PTX), cuda.stream()
      local x0 = cuda.buffer("i32", 64):fill(0)
      local m1, s1, x1 = cuda.on(1, function()
        return cuda.load_module(PTX), cuda.stream(), cuda.buffer("i32", 64):fill(0)
      end)
      for _ = 1, 3 do -- each call's events on its own device
        m1.inc_i32:launch(s1, 1, 64, x1, 64)
        s1:synchronize()
        m0.inc_i32:launch(s0, 1, 64, x0, 64)
        s0:synchronize()
      end
      assert(x0:download()[1] == 3 and x1:download()[1] == 3)
    ]], "CUGRAPH_LUA_PROFILE=" .. H.quote(trace))
    assert.matches("profile of 10 calls written", out)
    local per = { [0] = 0, [1] = 0 }
    for line in io.lines(trace) do
      local pid = line:match('"ph": "X".-"pid": (%d+)')
      if pid then per[tonumber(pid)] = per[tonumber(pid)] + 1 end
    end
    assert.same({ [0] = 5, [1] = 5 }, per) -- a fill, three launches, a download each
    os.remove(trace)
  end)

  it("puts objects on the device cuda.on names, and refuses mixed work", function()
    if not two_devices() then return pending("needs two devices") end
    run2([[
      local m0 = cuda.load_module(PTX)
      local x1, y1, s1, m1 = cuda.on(1, function()
        return cuda.buffer("f32", 256), cuda.buffer("f32", 256), cuda.stream(),
               cuda.load_module(PTX)
      end)
      assert(cuda.device_of(x1) == 1 and cuda.device_of(s1) == 1 and cuda.device_of(m1) == 1)
      assert(cuda.current_device() == 0)
      x1:fill(1); y1:fill(2)
      m1.saxpy:launch(s1, 1, 256, 3, x1, y1, 256)
      s1:synchronize()
      assert(y1:download()[256] == 5)
      -- a kernel of device 0 on a stream of device 1: refused, naming both
      local ok, err = pcall(m0.saxpy.launch, m0.saxpy, s1, 1, 256, 3, x1, y1, 256)
      assert(not ok and err:find("saxpy: objects of device 0 and device 1", 1, true), err)
      -- a fill of a device-0 buffer on a device-1 stream
      local b0 = cuda.buffer("f32", 4)
      ok, err = pcall(b0.fill, b0, 0, s1)
      assert(not ok and err:find("device 0 and device 1", 1, true), err)
      -- a device-0 kernel reading device-1 memory: peer access on demand
      local s0 = cuda.stream()
      assert(cuda.can_access_peer(0, 1))
      local y0 = cuda.buffer("f32", 256):fill(0)
      m0.saxpy:launch(s0, 1, 256, 2, x1, y0, 256)
      s0:synchronize()
      assert(y0:download()[1] == 2)
      -- a stream of device 1 waits on one of device 0
      s1:wait(s0)
      s1:wait(cuda.event():record(s0))
      s1:synchronize()
    ]])
  end)

  it("refuses a launch across devices without peer access, naming both", function()
    if not H.double then return pending("the double can deny peer access") end
    run2([[
      local m0 = cuda.load_module(PTX)
      local x1 = cuda.on(1, function() return cuda.buffer("f32", 4) end)
      assert(cuda.can_access_peer(0, 1) == false)
      local y0 = cuda.buffer("f32", 4)
      local ok, err = pcall(m0.saxpy.launch, m0.saxpy, cuda.stream(), 1, 4, 1, x1, y0, 4)
      assert(not ok and err:find("device 0 cannot access memory of device 1", 1, true), err)
      ok, err = pcall(cuda.enable_peer_access, 0, 1)
      assert(not ok and err:find("no peer access", 1, true), err)
      -- copies need no peer access
      x1:upload { 1, 2, 3, 4 }
      y0:copy(x1)
      assert(table.concat(y0:download(), ",") == "1.0,2.0,3.0,4.0")
    ]], "CUDA_DOUBLE_NO_PEER=1")
  end)

  it("captures a graph whose nodes span two devices", function()
    if not two_devices() then return pending("needs two devices") end
    run2([[
      local m0 = cuda.load_module(PTX)
      local m1, s1, x1 = cuda.on(1, function()
        return cuda.load_module(PTX), cuda.stream(), cuda.buffer("i32", 64):fill(0)
      end)
      local s0, x0 = cuda.stream(), cuda.buffer("i32", 64):fill(0)
      local g = s0:capture(function()
        m0.inc_i32:launch(s0, 1, 64, x0, 64)
        s1:wait(s0) -- device 1's stream joins the capture
        m1.inc_i32:launch(s1, 1, 64, x1, 64)
        m1.inc_i32:launch(s1, 1, 64, x1, 64)
        s0:wait(s1)
        m0.inc_i32:launch(s0, 1, 64, x0, 64)
      end)
      assert(g:nodes() == 4 and cuda.device_of(g) == 0)
      g:launch(); g:launch(); s0:synchronize()
      assert(x0:download()[64] == 4 and x1:download()[64] == 4)
      local ok, err = pcall(x1.free, x1)
      assert(not ok and err:find("used by live cugraph.Graph", 1, true), err)
      g:free(); x1:free()
    ]])
  end)

  it("raises failed peer calls as error objects and recovers", function()
    if not H.double then return pending("fault injection is a feature of the test double") end
    run2([[
      local m0 = cuda.load_module(PTX)
      local a0 = cuda.buffer("f32", 4):fill(1)
      local b1 = cuda.on(1, function() return cuda.buffer("f32", 4):fill(0) end)
      local function fails(api, f, ...)
        local ok, e = pcall(f, ...)
        assert(not ok and cuda.is_error(e) and e.api == api and e.code == 2, tostring(e))
      end
      fails("cuDeviceCanAccessPeer", cuda.can_access_peer, 0, 1)
      assert(cuda.can_access_peer(0, 1)) -- not cached after the failure
      local s0, y0 = cuda.stream(), cuda.buffer("f32", 4):fill(0)
      fails("cuCtxEnablePeerAccess", m0.saxpy.launch, m0.saxpy, s0, 1, 4, 1, b1, y0, 4)
      m0.saxpy:launch(s0, 1, 4, 1, b1, y0, 4) -- enabled this time
      s0:synchronize()
      fails("cuMemcpyPeerAsync", b1.copy, b1, a0)
      b1:copy(a0)
      assert(b1:download()[4] == 1)
      assert(cuda.status().poisoned == nil and cuda.status().finalizer_errors == 0)
    ]], "CUDA_DOUBLE_FAULT=cuDeviceCanAccessPeer:1:2,cuCtxEnablePeerAccess:1:2,cuMemcpyPeerAsync:1:2")
  end)

  it("copies between devices, eager, on a stream and captured", function()
    if not two_devices() then return pending("needs two devices") end
    run2([[
      local a0 = cuda.buffer("i32", 8):upload { 1, 2, 3, 4, 5, 6, 7, 8 }
      local b1, s1 = cuda.on(1, function() return cuda.buffer("i32", 8):fill(0), cuda.stream() end)
      b1:copy(a0)
      assert(table.concat(b1:download(), ",") == "1,2,3,4,5,6,7,8")
      a0:fill(9)
      a0:copy(b1, { dst_offset = 2, src_offset = 4, count = 3 }, s1)
      s1:synchronize()
      assert(table.concat(a0:download(), ",") == "9,9,5,6,7,9,9,9")
      local s0 = cuda.stream()
      local ok, err = pcall(b1.copy, b1, a0, s0) -- a stream of the source's device
      assert(ok, err)
      s0:synchronize()
      -- captured on a stream of device 1: a copy node that replays, once
      -- device 1 may access device 0's memory
      ok, err = pcall(s1.capture, s1, function() b1:copy(a0, s1) end)
      assert(not ok and err:find("cuda.enable_peer_access(1, 0) before the capture", 1, true), err)
      cuda.enable_peer_access(1, 0)
      local g = s1:capture(function() b1:copy(a0, s1) end)
      local s2 = cuda.on(1, cuda.stream)
      ok, err = pcall(b1.copy, b1, a0, s2, nil)
      assert(ok, err)
      s2:synchronize() -- before a0 and b1 change: the copy may still run
      a0:upload { 8, 7, 6, 5, 4, 3, 2, 1 }
      g:launch(); s1:synchronize()
      assert(table.concat(b1:download(), ",") == "8,7,6,5,4,3,2,1")
      ok, err = pcall(a0.free, a0)
      assert(not ok and err:find("used by live cugraph.Graph", 1, true), err)
      ok, err = pcall(s1.capture, s1, function() b1:copy(a0) end)
      assert(not ok and err:find("without a stream inside a graph capture", 1, true), err)
      g:free(); a0:free()
    ]])
  end)
end)

describe("cugraph.Comm", function()
  local s = cuda.stream()

  it("all-reduces, broadcasts, reduces and gathers with one rank", function()
    local c <close> = cuda.comm_world()
    assert.equals(0, c:rank())
    assert.equals(1, c:size())
    assert.matches("^cugraph%.Comm %(rank 0 of 1, device 0%)$", tostring(c))
    local x = cuda.buffer("f32", 4):upload { 1, 2, 3, 4 }
    local y = cuda.buffer("f32", 4):fill(0)
    c:all_reduce(x, y)
    assert.equals("1.0 2.0 3.0 4.0", values(y))
    c:all_reduce(x, x, "max", s)
    s:synchronize()
    c:broadcast(x, y, 0)
    c:reduce(x, y, 0, "avg")
    c:all_gather(x, y)
    c:reduce_scatter(x, y, "sum", s)
    s:synchronize()
    assert.equals("1.0 2.0 3.0 4.0", values(y))
    -- the eager call allocates no Lua memory
    assert.equals(0, H.garbage(function() c:all_reduce(x, x, "sum", s) end, 1000))
    s:synchronize()
    for _, t in ipairs { "f64", "i32", "u32", "i64", "u64", "i8", "u8", "f16", "bf16" } do
      local a = cuda.buffer(t, 3):upload { 1, 2, 3 }
      c:all_reduce(a, a, "sum")
      assert.same({ 1, 2, 3 }, a:download())
    end
  end)

  it("refuses bad arguments before NCCL is called", function()
    local c = cuda.comm_world()
    local x, y = cuda.buffer("f32", 4), cuda.buffer("f64", 4)
    assert.error_matches(function() c:all_reduce(x, y) end, "send is f32, recv is f64")
    assert.error_matches(function() c:all_reduce(x, cuda.buffer("f32", 5)) end,
                         "send has 4 elements, recv 5")
    assert.error_matches(function() c:all_reduce(x, x, "mean") end, "invalid option 'mean'")
    assert.error_matches(function() c:all_reduce(cuda.buffer("i16", 2), cuda.buffer("i16", 2)) end,
                         "NCCL has no i16 type")
    assert.error_matches(function() c:broadcast(x, x, 1) end, "root is not a rank")
    assert.error_matches(function() c:send(x, 0) end, "peer must be another rank")
    assert.error_matches(function() c:all_reduce(x, 3) end, "cugraph.Buffer expected")
    assert.error_matches(function() cuda.comm("short", 1, 0) end, "an NCCL id is 128 bytes")
    assert.error_matches(function() cuda.comm(cuda.nccl_id(), 2, 2) end, "rank must be in")
    assert.error_matches(function() cuda.comms({ 0, 0 }) end, "device 0 is listed twice")
    c:free()
    assert.error_matches(function() c:all_reduce(x, x) end, "attempt to use a freed cugraph.Comm")
    assert.equals("cugraph.Comm (freed)", tostring(c))
    c:close()
    debug.getmetatable(c).__gc(c)
  end)

  it("is captured into a graph, which pins it", function()
    local c = cuda.comm_world()
    local x = cuda.buffer("f32", 4):upload { 1, 2, 3, 4 }
    local y = cuda.buffer("f32", 4):fill(0)
    local g = s:capture(function() c:all_reduce(x, y, "sum", s) end)
    x:upload { 5, 6, 7, 8 }
    g:launch(); s:synchronize()
    assert.equals("5.0 6.0 7.0 8.0", values(y))
    assert.error_matches(function() c:free() end, "used by live cugraph.Graph #%d+")
    c = nil
    collectgarbage(); collectgarbage()
    g:launch(); s:synchronize()
    g:free()
    assert.error_matches(function()
      local c2 = cuda.comm_world()
      s:capture(function() c2:all_reduce(x, y) end)
    end, "without a stream inside a graph capture")
    assert.error_matches(function()
      s:capture(function() cuda.comm_world() end)
    end, "cannot make a communicator inside a graph capture")
  end)

  it("groups calls, and ends the group however the function ends", function()
    local c = cuda.comm_world()
    local x = cuda.buffer("f32", 2):upload { 1, 2 }
    assert.equals(7, cuda.nccl_group(function(v) c:all_reduce(x, x, "sum", s); return v end, 7))
    s:synchronize()
    local err = H.error_of(cuda.nccl_group, function() error("inside") end)
    assert.matches("inside", err)
    c:all_reduce(x, x) -- the group is over: a call on its own works
    assert.equals("1.0 2.0", values(x))
  end)

  it("hands the unique id through a rendezvous file", function()
    local path = os.tmpname()
    os.remove(path)
    local err = H.error_of(cuda.nccl_rendezvous, path, 1, 0.05)
    assert.matches("rank 1 waited .* for rank 0 to write the NCCL id to", err)
    local id = cuda.nccl_rendezvous(path, 0)
    assert.equals(128, #id)
    assert.equals(id, cuda.nccl_rendezvous(path, 1, 1))
    os.remove(path)
  end)

  it("reads only a whole rendezvous record of its own job, and bounds the wait", function()
    local path = os.tmpname()
    cuda.nccl_rendezvous(path, 0, 1, "job-a")
    local f = assert(io.open(path, "rb"))
    local whole = f:read("a")
    f:close()
    assert.equals(128, #cuda.nccl_rendezvous(path, 1, 1, "job-a"))
    -- a stale record: another job's
    assert.matches("waited .* %(job 'job%-b'%); it holds a rendezvous record of another job",
                   tostring(H.error_of(cuda.nccl_rendezvous, path, 1, 0.05, "job-b")))
    local function holding(bytes)
      f = assert(io.open(path, "wb")); f:write(bytes); f:close()
      return tostring(H.error_of(cuda.nccl_rendezvous, path, 1, 0.05, "job-a"))
    end
    local tampered = whole:sub(1, 40) .. string.char(whole:byte(41) ~ 1) .. whole:sub(42)
    assert.matches("not a whole rendezvous record", holding(tampered))
    assert.matches("not a whole rendezvous record", holding(whole:sub(1, 100)))
    assert.matches("not a whole rendezvous record", holding(("\0"):rep(128)))
    assert.matches("not a whole rendezvous record", holding(""))
    -- timeouts that would never end, or make no sense, are refused
    for _, t in ipairs { 0 / 0, -1, 0 } do
      assert.matches("bad argument #3 to '[%w.]*nccl_rendezvous' %(the timeout must be a positive",
                     tostring(H.error_of(cuda.nccl_rendezvous, path, 1, t)))
    end
    assert.matches("contains a NUL byte", tostring(H.error_of(cuda.nccl_rendezvous, path .. "\0x", 1)))
    os.remove(path)
  end)

  it("raises NCCL's failures as error objects naming the call", function()
    if not H.double then return pending("fault injection is a feature of the NCCL double") end
    local code, out = H.script([[
      local cuda = require "cugraph"
      local ok, e = pcall(cuda.comm_world)
      assert(not ok and cuda.is_error(e) and e.api == "ncclCommInitRank"
             and e.name == "ncclSystemError" and e.code == 2, tostring(e))
      local c = cuda.comm_world()
      local x = cuda.buffer("f32", 2):upload { 1, 2 }
      c:all_reduce(x, x)
      ok, e = pcall(c.all_reduce, c, x, x)
      assert(not ok and e.api == "ncclAllReduce" and e.name == "ncclInvalidUsage"
             and e.message:find("invalid usage (injected", 1, true), tostring(e))
      assert(tostring(e):find("ncclAllReduce: ncclInvalidUsage: invalid usage", 1, true))
      c:all_reduce(x, x) -- still usable
      assert(table.concat(x:download(), ",") == "1.0,2.0")
      c:free()
      print("ok")
    ]], "NCCL_DOUBLE_FAULT=ncclCommInitRank:1:2,ncclAllReduce:2:5")
    assert.equals(0, code, out)
    assert.matches("ok\n", out)
  end)

  it("says so when NCCL is absent", function()
    local code, out = H.script([[
      local cuda = require "cugraph"
      local ok, err = pcall(cuda.comm_world)
      assert(not ok and err:find("no NCCL found (/nonexistent/libnccl.so.2)", 1, true), err)
      print(cuda.device_count() >= 0 and "refused")
    ]], "CUGRAPH_LUA_LIBNCCL=/nonexistent/libnccl.so.2")
    assert.equals(0, code, out)
    assert.matches("refused", out)
  end)

  it("drives two devices from one process in a group", function()
    if not two_devices() then return pending("needs two devices") end
    run2([[
      local comms = cuda.comms { 0, 1 }
      assert(comms[1]:rank() == 0 and comms[2]:rank() == 1 and comms[2]:size() == 2)
      assert(cuda.device_of(comms[2]) == 1)
      local x, y, g = {}, {}, {}
      for r = 0, 1 do
        cuda.on(r, function()
          x[r] = cuda.buffer("f32", 4):upload { r + 1, r + 2, r + 3, r + 4 }
          y[r] = cuda.buffer("f32", 8)
          g[r] = cuda.buffer("f32", 2)
        end)
      end
      cuda.nccl_group(function()
        for r = 0, 1 do comms[r + 1]:all_reduce(x[r], x[r]) end
      end)
      assert(table.concat(x[1]:download(), ",") == "3.0,5.0,7.0,9.0")
      cuda.nccl_group(function()
        for r = 0, 1 do comms[r + 1]:all_gather(x[r], y[r]) end
      end)
      assert(table.concat(y[1]:download(), ",") == "3.0,5.0,7.0,9.0,3.0,5.0,7.0,9.0")
      cuda.nccl_group(function()
        for r = 0, 1 do comms[r + 1]:reduce_scatter(x[r], g[r], "max") end
      end)
      assert(table.concat(g[1]:download(), ",") == "7.0,9.0")
      cuda.nccl_group(function()
        comms[1]:send(g[0], 1); comms[2]:recv(g[1], 0)
      end)
      -- a buffer of another device: refused, naming both
      local ok, err = pcall(comms[1].all_reduce, comms[1], x[1], x[1])
      assert(not ok and err:find("device 0 and device 1", 1, true), err)
    ]], "LSAN_OPTIONS=use_tls=0") -- GCC 12's LeakSanitizer crashes in its
    -- own scan of dynamic TLS at this process's exit (make test-asan);
    -- valgrind finds nothing wrong in it

  end)
end)

describe("the NCCL fault sweep", function()
  -- Every NCCL call of spec/support/nccl_workload.lua failed in turn (its
  -- first call, and its last when later) with ncclInvalidUsage and with
  -- ncclSystemError: an error object naming the call with the injected
  -- code, or for ncclCommDestroy a finalizer error in cuda.status();
  -- everything still freeable; a new communicator works afterwards.
  if not H.double then
    it("needs the NCCL double", function() pending("fault injection is a feature of the NCCL double") end)
    return
  end
  local WORKLOAD = "spec/support/nccl_workload.lua"
  local NAMES = { [2] = "ncclSystemError", [5] = "ncclInvalidUsage" }

  local function trace(env) return H.trace(WORKLOAD, "NCCL_DOUBLE_TRACE", TWO .. (env or "")) end
  local total, tcode, tout = trace()
  local before = trace(" NCCL_WORKLOAD_EXIT=1") -- calls of the workload itself

  it("has a workload that runs clean and reaches every NCCL call", function()
    assert.equals(0, tcode, tout)
    assert.matches("NCCL%-RESULT\tok\t%-\t%-\tworks\t%-\t0\t%-", tout)
    for _, name in ipairs { "ncclGetUniqueId", "ncclCommInitRank", "ncclCommInitAll",
                            "ncclCommDestroy", "ncclAllReduce", "ncclReduce", "ncclBroadcast",
                            "ncclAllGather", "ncclReduceScatter", "ncclSend", "ncclRecv",
                            "ncclGroupStart", "ncclGroupEnd" } do
      assert.is_truthy(total[name], name .. " is never called by the workload")
    end
  end)

  local apis = {}
  for name in pairs(total) do apis[#apis + 1] = name end
  table.sort(apis)
  for _, api in ipairs(apis) do
    local picks = total[api] > 1 and { 1, total[api] } or { 1 }
    for _, i in ipairs(picks) do
      for _, code in ipairs { 5, 2 } do
        it(("%s call %d of %d, %s"):format(api, i, total[api], NAMES[code]), function()
          local env = ("%s NCCL_DOUBLE_FAULT=%s:%d:%d"):format(TWO, api, i, code)
          local status, out = H.run(H.quote(WORKLOAD), env)
          assert.equals(0, status, out)
          local line = assert(out:match("NCCL%-RESULT\t[^\n]*"), out)
          local _, outcome, eapi, ecode, after, unfreed, nfin, lastfin = table.unpack(H.fields(line))
          assert.equals("-", unfreed, out)
          if i > (before[api] or 0) then -- the probe's call, after the workload
            assert.equals("ok", outcome, out)
          elseif api == "ncclCommDestroy" then
            assert.equals("ok", outcome, out)
            assert.equals("ncclCommDestroy: " .. NAMES[code], lastfin, out)
          else
            assert.equals("error", outcome, out)
            assert.equals(api, eapi, out)
            assert.equals(tostring(code), ecode, out)
            assert.equals("0", nfin, out)
          end
          if i <= (before[api] or 0) then assert.equals("works", after, out) end
        end)
      end
    end
  end
end)

describe("the launcher", function()
  local function launch(args, env)
    return H.run("--nproc " .. args, (TWO ~= "" and TWO .. " " or "") .. (env or ""))
  end

  local function script(src)
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write(src)
    f:close()
    return path
  end

  it("runs a script once per GPU with rank, size and device set", function()
    if not two_devices() then return pending("needs two devices") end
    local path = script [[
      local cuda = require "cugraph"
      local rank = tonumber(os.getenv("CUGRAPH_RANK"))
      assert(os.getenv("CUGRAPH_WORLD_SIZE") == "2" and os.getenv("CUGRAPH_LOCAL_RANK") == tostring(rank))
      local c = cuda.comm_world()
      assert(c:rank() == rank and c:size() == 2 and cuda.current_device() == rank)
      local x = cuda.buffer("f64", 3):upload { rank + 1, 10, 100 }
      c:all_reduce(x, x)
      local s, y = cuda.stream(), cuda.buffer("f64", 3)
      local g = s:capture(function() c:all_reduce(x, y, "max", s) end)
      g:launch(); s:synchronize()
      print(("rank %d: %s / %s"):format(rank, table.concat(x:download(), " "),
                                         table.concat(y:download(), " ")))
      print(arg[1])
    ]]
    local code, out = launch("2 " .. H.quote(path) .. " hello")
    os.remove(path)
    assert.equals(0, code, out)
    assert.matches("rank 0: 3.0 20.0 200.0 / 3.0 20.0 200.0", out, 1, true)
    assert.matches("rank 1: 3.0 20.0 200.0 / 3.0 20.0 200.0", out, 1, true)
    assert.matches("hello\n.*hello\n", out)
  end)

  it("stops the other ranks and fails when one rank fails", function()
    if not two_devices() then return pending("needs two devices") end
    local path = script [[
      local cuda = require "cugraph"
      if os.getenv("CUGRAPH_RANK") == "1" then error("rank 1 gives up") end
      local c = cuda.comm_world() -- waits for rank 1, which never comes
      local x = cuda.buffer("f32", 1)
      c:all_reduce(x, x)
    ]]
    local t0 = os.time()
    local code, out = launch("2 " .. H.quote(path))
    os.remove(path)
    assert.equals(1, code, out)
    assert.matches("rank 1 gives up", out)
    assert.matches("rank 1 exited with status 1; stopping the others", out)
    assert.is_true(os.time() - t0 < 30)
  end)

  it("stops a failed run's ranks and their children, whole process groups", function()
    local pidfile = os.tmpname()
    local path = script(([[
      if os.getenv("CUGRAPH_RANK") == "0" then
        os.execute("sleep 300 & echo $! > %s")
        error("rank 0 gives up, leaving a child behind")
      end
      os.execute("sleep 300") -- stopped with its group
    ]]):format(pidfile))
    local t0 = os.time()
    local code, out = H.run("--nproc 2 " .. H.quote(path))
    os.remove(path)
    assert.equals(1, code, out)
    assert.matches("rank 0 exited with status 1; stopping the others", out)
    assert.is_true(os.time() - t0 < 30, "the launcher waited for the sleeps")
    local f = assert(io.open(pidfile))
    local child = f:read("n")
    f:close()
    os.remove(pidfile)
    assert.is_number(child)
    assert.is_nil((os.execute("kill -0 " .. child .. " 2>/dev/null")),
                  "rank 0's child outlived the launcher")
  end)

  it("explains its options", function()
    local code, out = H.run("--nproc 0 x.lua")
    assert.equals(1, code)
    assert.matches("%-%-nproc needs an integer from 1 to 1024", out)
    code, out = H.run("--nproc 2")
    assert.equals(1, code)
    assert.matches("usage: cugraph%-lua %-%-nproc N", out)
    code, out = H.run("--nproc 1 --nnodes 2 --node-rank 0 x.lua")
    assert.equals(1, code)
    assert.matches("needs %-%-rendezvous PATH", out)
    code, out = H.run("--nproc 1 --nnodes 2 --node-rank 0 --rendezvous /tmp/r x.lua",
                      "SLURM_JOB_ID=")
    assert.equals(1, code)
    assert.matches("needs %-%-job%-id ID, the same on every machine", out)
  end)
end)
