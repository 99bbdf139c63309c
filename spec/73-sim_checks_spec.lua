-- What the PTX simulator catches that a GPU punishes with wrong data or a
-- bare error code (docs/simulator.md, "Strict mode"): in its strict mode,
-- on by default, work sent to a stream runs when something waits for it,
-- host memory that a copy still to run writes (or reads) is not to be
-- touched, two streams' accesses of the same memory need something to
-- order them; a kernel's fault, trap or failed assert names the CUDA C
-- line inside the Lua file, the kernel, thread, block and the Lua line of
-- its launch; printf and assert run. Each script runs in a process of its
-- own. On a GPU the same scripts run, and what they show there is said
-- case by case: a missing synchronization gives stale data or a race the
-- timing decides, not an error; faults name no line. The test double
-- (make test) runs work when it is sent and checks nothing: these are
-- the simulator's (and a GPU's where it has them).
local H = require "support.helper"

-- The line of the first line of src holding marker.
local function line_of(src, marker)
  local n = 1
  for line in src:gmatch("([^\n]*)\n?") do
    if line:find(marker, 1, true) then return n end
    n = n + 1
  end
  error("no line holds " .. marker)
end

-- A kernel source most scripts compile: a writer, a reader and a kernel
-- that prints; the source sits in the script, so the simulator names its
-- lines there.
local KERNELS = [[
local cuda = require "cugraph"
local m = cuda.compile([=[
extern "C" __global__ void produce(float *x, float v) {
  x[threadIdx.x] = v + threadIdx.x;                    // PRODUCE
}
extern "C" __global__ void consume(const float *x, float *y) {
  y[threadIdx.x] = 2 * x[threadIdx.x];                 // CONSUME
}
extern "C" __global__ void say(int tag) {
  printf("tag %d block %d thread %d\n", tag, blockIdx.x, threadIdx.x);
}
]=])
local s, s2 = cuda.stream(), cuda.stream()
local x, y = cuda.buffer("f32", 4):fill(0), cuda.buffer("f32", 4):fill(0)
cuda.synchronize()
]]

local function runs_kernels()
  if not (H.sim or H.gpu) then
    pending("the test double runs only the spec kernels' host twins")
    return false
  end
  return true
end

describe("the simulator's strict mode", function()
  it("runs work when something waits for it, and shows printf there", function()
    if not runs_kernels() then return end
    local code, out = H.script(KERNELS .. [[
      m.say:launch(s, 1, 2, 7)
      print("sent")
      s:synchronize()
      print("waited")
    ]])
    assert.equals(0, code, out)
    -- as a GPU flushes its printf buffer: at the synchronization
    assert.matches("sent\ntag 7 block 0 thread 0\ntag 7 block 0 thread 1\nwaited\n", out, 1, true)
  end)

  it("refuses a read of host memory a copy still to run writes, naming both lines", function()
    local src = [[
      local cuda = require "cugraph"
      local s = cuda.stream()
      local x = cuda.buffer("f32", { 1, 2, 3, 4 })
      local h = cuda.host_buffer("f32", 4)
      cuda.synchronize()
      x:download_into(h, s)                                   -- COPY
      local ok, err = pcall(function() return h[2] end)       -- READ
      print("early", ok, err)
      s:synchronize()
      print("after", h[2], table.concat(h:totable(), ","))
    ]]
    local code, out = H.script(src)
    assert.equals(0, code, out)
    assert.matches("after\t3.0\t1.0,2.0,3.0,4.0", out, 1, true)
    if H.strict then
      assert.matches("early\tfalse\t[^\n]*:" .. line_of(src, "-- READ") .. ": host memory read " ..
                     "while a copy into it, sent at [^\n]*:" .. line_of(src, "-- COPY") ..
                     ", has not been waited for", out)
      assert.matches("the synchronization rule", out, 1, true)
      assert.matches("CUDA_SIM_STRICT=0 turns this check off", out, 1, true)
    else
      -- a GPU reads whatever the copy has written so far (stale data,
      -- most often 0.0 here); the test double has done the copy
      assert.matches("early\ttrue\t", out, 1, true)
    end
  end)

  it("refuses every access of pending host memory: totable, tostring, set, h[i] = v", function()
    if not H.strict then
      pending("the simulator's strict mode checks host memory; a GPU races")
      return
    end
    local code, out = H.script([[
      local cuda = require "cugraph"
      local s = cuda.stream()
      local x = cuda.buffer("i32", 4):fill(5)
      local h = cuda.host_buffer("i32", 4)
      cuda.synchronize()
      x:download_into(h, s)
      for _, f in ipairs {
        function() return h:totable() end, function() return h:tostring() end,
        function() h:set({ 1 }, 3) end, function() h[0] = 1 end,
      } do
        local ok, err = pcall(f)
        print(ok, err:match("host memory %a+ while a copy into it"))
      end
      s:synchronize()
      h[0] = 1
      print(table.concat(h:totable(), ","))
    ]])
    assert.equals(0, code, out)
    assert.matches("false\thost memory read while a copy into it\n" ..
                   "false\thost memory read while a copy into it\n" ..
                   "false\thost memory written while a copy into it\n" ..
                   "false\thost memory written while a copy into it\n1,5,5,5", out, 1, true)
  end)

  it("refuses a write of host memory an upload still reads, and lets reads by", function()
    local src = [[
      local cuda = require "cugraph"
      local s = cuda.stream()
      local x = cuda.buffer("f32", 4)
      local h = cuda.host_buffer("f32", { 1, 2, 3, 4 })
      cuda.synchronize()
      x:upload(h, 0, s)                                       -- UPLOAD
      print("read", pcall(function() return h[1] end))
      local ok, err = pcall(function() h[1] = 9 end)          -- WRITE
      print("write", ok, err)
      s:synchronize()
      h[1] = 9
      print("sent", table.concat(x:download(), ","))
    ]]
    local code, out = H.script(src)
    assert.equals(0, code, out)
    assert.matches("read\ttrue\t2.0", out, 1, true)
    if H.strict then
      assert.matches("write\tfalse\t[^\n]*:" .. line_of(src, "-- WRITE") .. ": host memory written " ..
                     "while a copy out of it, sent at [^\n]*:" .. line_of(src, "-- UPLOAD") ..
                     ", has not been waited for: [^\n]*the copy may read the new values, or the old", out)
      assert.matches("sent\t1.0,2.0,3.0,4.0", out, 1, true)
    else
      -- on a GPU the copy may send 9 or 2; the test double has sent 2
      assert.matches("write\ttrue", out, 1, true)
    end
  end)

  it("takes an event's wait, or another stream's, as the synchronization", function()
    local code, out = H.script([[
      local cuda = require "cugraph"
      local s, s2 = cuda.stream(), cuda.stream()
      local x = cuda.buffer("f32", { 1, 2, 3, 4 })
      local h, h2 = cuda.host_buffer("f32", 4), cuda.host_buffer("f32", 4)
      cuda.synchronize()
      x:download_into(h, s)
      local e = cuda.event():record(s)
      e:synchronize()
      print("event", h[3])
      x:download_into(h2, s)
      s2:wait(s)
      s2:synchronize() -- s2 waited for s: s's copy is done too
      print("stream", h2[3])
    ]])
    assert.equals(0, code, out)
    assert.matches("event\t4.0\nstream\t4.0", out, 1, true)
  end)

  it("reports a race between two streams on device memory, naming both launches", function()
    if not runs_kernels() then return end
    local src = KERNELS .. [[
      m.produce:launch(s, 1, 4, x, 1.0)                 -- WRITER
      m.consume:launch(s2, 1, 4, x, y)                  -- READER
      local ok, err = pcall(cuda.synchronize)
      print("race", ok, err)
    ]]
    local code, out = H.script(src)
    assert.equals(0, code, out)
    if H.strict then
      assert.matches("race\tfalse\t[^\n]*cuCtxSynchronize: CUDA_ERROR_NOT_PERMITTED: [^\n]*" ..
                     "a race between streams: kernel 'consume', sent at [^\n]*:" ..
                     line_of(src, "-- READER") .. ", reads bytes 0 to 16 of the memory at " ..
                     "0x%x+, which kernel 'produce', sent at [^\n]*:" .. line_of(src, "-- WRITER") ..
                     " on another stream, writes, and nothing orders the two", out)
      assert.matches("record an event after the first and make the other stream wait on it", out, 1, true)
    else
      -- a GPU runs the two when its streams let it: the consumer may read
      -- zeros or the produced values
      assert.matches("race\ttrue", out, 1, true)
    end
  end)

  it("reports the race through a bounded whole-device wait, whose waiter thread runs the work", function()
    if not runs_kernels() then return end
    local src = KERNELS .. [[
      m.produce:launch(s, 1, 4, x, 1.0)                 -- WRITER
      m.consume:launch(s2, 1, 4, x, y)                  -- READER
      local ok, err = pcall(cuda.synchronize, 30)
      print("race", ok, err)
      print("after", pcall(cuda.synchronize, 30))
    ]]
    local code, out = H.script(src)
    assert.equals(0, code, out)
    if H.strict then -- the report the waiter met, in the caller's error
      assert.matches("race\tfalse\t[^\n]*cuCtxSynchronize: CUDA_ERROR_NOT_PERMITTED: [^\n]*" ..
                     "a race between streams: kernel 'consume', sent at [^\n]*:" ..
                     line_of(src, "-- READER"), out)
      assert.matches("after\ttrue", out, 1, true) -- and in no later one
    else
      assert.matches("race\ttrue", out, 1, true)
    end
  end)

  it("finds no race where an event, a stream wait or a host wait orders the two", function()
    if not runs_kernels() then return end
    local code, out = H.script(KERNELS .. [[
      m.produce:launch(s, 1, 4, x, 1.0)
      s2:wait(cuda.event():record(s))
      m.consume:launch(s2, 1, 4, x, y)
      cuda.synchronize()
      print("event", table.concat(y:download(), ","))
      m.produce:launch(s, 1, 4, x, 2.0)
      s:synchronize()
      m.consume:launch(s2, 1, 4, x, y)
      cuda.synchronize()
      print("host", table.concat(y:download(), ","))
      local z = cuda.buffer("f32", 4)
      m.consume:launch(s, 1, 4, x, y) -- x read by both streams: no race
      m.consume:launch(s2, 1, 4, x, z)
      cuda.synchronize()
      print("reads", table.concat(z:download(), ","))
    ]])
    assert.equals(0, code, out)
    assert.matches("event\t2.0,4.0,6.0,8.0\nhost\t4.0,6.0,8.0,10.0\nreads\t4.0,6.0,8.0,10.0\n",
                   out, 1, true)
    assert.not_matches("race", out)
  end)

  it("reports a copy that races with a kernel on another stream", function()
    if not H.strict then
      pending("the simulator's strict mode; on a GPU the timing decides")
      return
    end
    local src = KERNELS .. [[
      m.produce:launch(s, 1, 4, x, 1.0)                 -- WRITER
      y:copy(x, s2)                                     -- COPY
      print(pcall(s2.synchronize, s2))
      print(pcall(cuda.synchronize))
    ]]
    local code, out = H.script(src)
    assert.equals(0, code, out)
    assert.matches("true\n[^\n]*false\t[^\n]*a race between streams: kernel 'produce', sent at [^\n]*:" ..
                   line_of(src, "-- WRITER") .. ", writes bytes 0 to 16 of the memory at 0x%x+, " ..
                   "which a copy, sent at [^\n]*:" .. line_of(src, "-- COPY") .. " on another stream, reads",
                   out)
  end)

  it("is turned off by CUDA_SIM_STRICT=0: work runs when it is sent, nothing is checked", function()
    if not H.sim then
      pending("the simulator's")
      return
    end
    local code, out = H.script(KERNELS .. [[
      local h = cuda.host_buffer("f32", 4)
      x:upload({ 1, 2, 3, 4 })
      x:download_into(h, s)
      print("read", h[3])
      m.produce:launch(s, 1, 4, x, 1.0)
      m.consume:launch(s2, 1, 4, x, y)
      print("race", pcall(cuda.synchronize))
    ]], "CUDA_SIM_STRICT=0")
    assert.equals(0, code, out)
    assert.matches("read\t4.0\nrace\ttrue", out, 1, true)
  end)
end)

describe("the simulator's source lines", function()
  it("compile from a string chunk, whose name has quotes, with lineinfo", function()
    if not runs_kernels() then return end
    -- NVRTC writes the #line name into the PTX's .file as it is
    local code, out = H.script([=[
      local f = load([[
        local cuda = require "cugraph"
        local m = cuda.compile('extern "C" __global__ void k(int *x) { x[0] = 1; }',
                               { lineinfo = true })
        local x = cuda.buffer("i32", 1):fill(0)
        m.k:launch(cuda.stream(), 1, 1, x)
        return x:download()[1]
      ]])
      print("got", f())
    ]=])
    assert.equals(0, code, out)
    assert.matches("got	1", out, 1, true)
  end)
end)

describe("the simulator's faults", function()
  -- A script whose kernel faults at the line marked FAULT; prints the
  -- wait's error. (Out of bounds by 4 TiB: a GPU faults only on an
  -- unmapped page.)
  local function faulting(body, launch)
    return ([[
      local cuda = require "cugraph"
      local m = cuda.compile([=[
      extern "C" __global__ void k(float *x, int n) {
        %s
      }
      ]=])
      local s = cuda.stream()
      local x = cuda.buffer("f32", 64):fill(0)
      %s
      local ok, err = pcall(s.synchronize, s)
      print("wait", ok, cuda.is_error(err) and err.name)
      print(tostring(err))
      print("then", pcall(cuda.buffer, "f32", 4))
    ]]):format(body, launch or "m.k:launch(s, 2, 32, x, 64)                     -- LAUNCH")
  end

  local cases = {
    { "an out-of-bounds store", "if (blockIdx.x == 1 && threadIdx.x == 3) x[n + (1ull << 40)] = 1; // FAULT",
      "CUDA_ERROR_ILLEGAL_ADDRESS", "out%-of%-bounds global access of 4 bytes", "3,0,0", "1,0,0" },
    { "a misaligned load", "if (threadIdx.x == 5) x[0] = *(float *)((char *)x + 2); // FAULT",
      "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned global access of 4 bytes", "5,0,0", "0,0,0" },
    { "a trap", "if (blockIdx.x == 1 && threadIdx.x == 0) __trap(); // FAULT",
      "CUDA_ERROR_LAUNCH_FAILED", "trap", "0,0,0", "1,0,0" },
  }
  for _, c in ipairs(cases) do
    local what, body, name, msg, thread, block = table.unpack(c)
    it("name " .. what .. "'s CUDA C line, kernel, thread, block and launch line", function()
      if not runs_kernels() then return end
      local src = faulting(body)
      local code, out = H.script(src, nil, { plain = true })
      assert.equals(0, code, out)
      assert.matches("wait\tfalse\t" .. name, out, 1, true)
      -- sticky, as on a GPU
      assert.matches("then\tfalse\t[^\n]*the CUDA context is unusable", out)
      if not H.sim then return end -- a GPU names no line (compute-sanitizer does)
      local where = "kernel k: " .. msg .. "[^\n]*%([^\n]*:" .. line_of(src, "// FAULT") ..
                    ", PTX line %d+%), thread %(" .. thread .. "%) of block %(" .. block ..
                    "%); launched at [^\n]*:" .. line_of(src, "-- LAUNCH")
      assert.matches("cuda sim: " .. where, out) -- on stderr
      assert.matches("cuStreamSynchronize: " .. name .. ": [^\n]*: " .. where, out) -- the error
    end)
  end

  it("name a graph node's fault by the line of its capture and of the graph's launch", function()
    if not runs_kernels() then return end
    local src = faulting("if (threadIdx.x == 2) x[n + (1ull << 40)] = 1; // FAULT", [[
      local g = s:capture(function()
        m.k:launch(s, 1, 32, x, 64)                     -- CAPTURE
      end)
      g:launch()                                        -- GRAPH]])
    local code, out = H.script(src, nil, { plain = true })
    assert.equals(0, code, out)
    assert.matches("wait\tfalse\tCUDA_ERROR_ILLEGAL_ADDRESS", out, 1, true)
    if not H.sim then return end
    assert.matches("kernel k: out%-of%-bounds [^\n]*:" .. line_of(src, "// FAULT") ..
                   ", PTX line %d+%), thread %(2,0,0%) of block %(0,0,0%); its node captured at " ..
                   "[^\n]*:" .. line_of(src, "-- CAPTURE") .. ", the graph launched at [^\n]*:" ..
                   line_of(src, "-- GRAPH"), out)
  end)
end)

describe("printf and assert in kernels", function()
  it("print each launch's lines in thread order, formats as C's printf", function()
    if not runs_kernels() then return end
    local code, out = H.script([[
      local cuda = require "cugraph"
      local m = cuda.compile([=[
      extern "C" __global__ void p(const float *x, long long big) {
        int t = blockIdx.x * blockDim.x + threadIdx.x;
        if (t == 0) printf("%d|%u|%x|%5.2f|%e|%s|%c|%lld|%%|%-4d|\n", -3, 7u, 255u,
                           (double)x[0], 1e10, "str", 'z', big, 12);
        if (t < 6) printf("thread %d of block %d\n", threadIdx.x, blockIdx.x);
      }
      ]=])
      local s = cuda.stream()
      local x = cuda.buffer("f32", { 3.14159 })
      m.p:launch(s, 2, 3, x, 1 << 40)
      s:synchronize()
      print("done")
    ]])
    assert.equals(0, code, out)
    assert.matches("-3|7|ff| 3.14|1.000000e+10|str|z|1099511627776|%|12  |\n", out, 1, true)
    local lines = {}
    for b, t in out:gmatch("thread (%d) of block (%d)") do lines[#lines + 1] = t .. "." .. b end
    if H.sim then -- block by block, thread by thread (a GPU: any order)
      assert.same({ "0.0", "0.1", "0.2", "1.0", "1.1", "1.2" }, lines)
    else
      table.sort(lines)
      assert.same({ "0.0", "0.1", "0.2", "1.0", "1.1", "1.2" }, lines)
    end
  end)

  it("print from a graph's kernel nodes at each launch's synchronization", function()
    if not runs_kernels() then return end
    local code, out = H.script([[
      local cuda = require "cugraph"
      local m = cuda.compile('extern "C" __global__ void p(const int *i) { printf("run %d\\n", *i); }')
      local s = cuda.stream()
      local i = cuda.scalar("i32", 0)
      local g = s:capture(function() m.p:launch(s, 1, 1, i) end)
      for n = 1, 3 do i:set(n); g:launch() end
      print("sent")
      s:synchronize()
    ]])
    assert.equals(0, code, out)
    -- the scalar is read as each launch runs (passed by device pointer)
    assert.matches("sent\nrun 1\nrun 2\nrun 3\n", out, 1, true)
  end)

  it("print a failed assert as the GPU does, and make the context unusable", function()
    if not runs_kernels() then return end
    local src = [[
      local cuda = require "cugraph"
      local m = cuda.compile([=[
      extern "C" __global__ void check(const int *x) {
        assert(x[threadIdx.x] >= 0);                        // ASSERT
      }
      ]=])
      local s = cuda.stream()
      local x = cuda.buffer("i32", { 1, 2, -3, 4 })
      m.check:launch(s, 1, 4, x)                            -- LAUNCH
      local ok, err = pcall(s.synchronize, s)
      print("wait", ok, cuda.is_error(err) and err.name)
      print(tostring(err))
      print("then", pcall(cuda.buffer, "f32", 4))
    ]]
    local code, out = H.script(src, nil, { plain = true })
    assert.equals(0, code, out)
    assert.matches("[^\n]*:" .. line_of(src, "// ASSERT") .. ": void check%(const int %*%): " ..
                   "block: %[0,0,0%], thread: %[2,0,0%] Assertion `x%[threadIdx.x%] >= 0` failed.", out)
    assert.matches("wait\tfalse\tCUDA_ERROR_ASSERT", out, 1, true)
    assert.matches("then\tfalse\t[^\n]*the CUDA context is unusable", out)
    if H.sim then
      assert.matches("kernel check: assertion `x%[threadIdx.x%] >= 0` failed %([^\n]*:" ..
                     line_of(src, "// ASSERT") .. ", PTX line %d+%), thread %(2,0,0%) of block " ..
                     "%(0,0,0%); launched at [^\n]*:" .. line_of(src, "-- LAUNCH"), out)
    end
  end)
end)
