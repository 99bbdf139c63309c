-- Waits that can be bounded: a graph whose while loop never ends (on the
-- software driver CUDA_DOUBLE_HANG makes the device run it for ever, as a
-- GPU does) is waited for with a timeout, per call or from
-- CUGRAPH_LUA_TIMEOUT, and the error names the graph and its loop; the
-- state then closes without waiting for the work.
local H = require "support.helper"
local cuda = H.cuda

local script = [[
  local cuda = require "cugraph"
  local m = cuda.load_module(os.getenv("CUGRAPH_LUA_BUILD") .. "/kernels.ptx")
  local s = cuda.stream()
  local x = cuda.buffer("i32", 8):fill(0)
  local c = cuda.condition(1) -- set at every launch, cleared by nothing
  local sc = cuda.scalar("i32", 7)
  local g = s:capture(function()
    s:loop_while(c, function() m.inc_i32:launch(s, 1, 8, x, 8) end)
  end)
  local start = cuda.event():record(s)
  g:launch()
  local function show(what, fn, ...)
    local t0 = os.time()
    local ok, err = pcall(fn, ...)
    print(what, ok, cuda.is_error(err) and err.name, cuda.is_error(err) and err.api,
          os.time() - t0 < 10)
    if not ok then print(tostring(err)) end
  end
  show("stream", s.synchronize, s, 0.2)
  show("device", cuda.synchronize, 0.2)
  show("event", function() local e = cuda.event():record(s); return e:synchronize(0.2) end)
  show("download", x.download, x) -- CUGRAPH_LUA_TIMEOUT bounds every wait
  show("scalar", sc.get, sc)
  show("elapsed", function() return cuda.event():record(s):elapsed(start) end)
  print("closing")
]]

describe("bounded waits", function()
  it("end a wait for a graph that never completes, naming the graph and its loop", function()
    local code, out = H.script(script, "CUGRAPH_LUA_TIMEOUT=0.2 CUDA_DOUBLE_HANG=100",
                                { plain = true }) -- a sanitizer waits for the graph at exit
    assert.equals(0, code, out)
    for _, what in ipairs { "stream", "device", "event", "download", "scalar", "elapsed" } do
      assert.matches(what .. "\tfalse\tCUDA_ERROR_TIMEOUT\tcu%a+Synchronize\ttrue", out)
    end
    assert.matches("the wait ended after 0%.2 s with work still running: cugraph%.Graph #%d+ "
                   .. "was launched last on this stream %(captured at [^)]*:%d+%); its while "
                   .. "loop node 1 %([^)]*:%d+%) may not end", out)
    assert.matches("closing", out) -- and the state closed without waiting
  end)

  it("make the frees held back after a timeout once a later wait sees the work done", function()
    -- work that takes a while: a loop of 5000 turns on a GPU, and on the
    -- software drivers CUDA_DOUBLE_BUSY (the device busy 300 ms after it)
    local turns = H.gpu and 5000 or 50
    local src = [[
      local cuda = require "cugraph"
      local m = cuda.load_module(os.getenv("CUGRAPH_LUA_BUILD") .. "/kernels.ptx")
      local s = cuda.stream()
      local x = cuda.buffer("i32", 8):fill(0)
      local c = cuda.condition(1)
      local g = s:capture(function()
        s:loop_while(c, function()
          m.inc_i32:launch(s, 1, 8, x, 8)
          c:count_down(s, TURNS)
        end)
      end)
      cuda.synchronize()
      local before = cuda.device().free_memory
      local y = cuda.buffer("u8", 64 << 20)
      g:launch(s)
      local ok, err = pcall(cuda.synchronize, 1e-6)
      print("timed out", not ok and err.name)
      y:free()
      local st = cuda.status()
      print("held", st.held_frees, st.hung, cuda.device().free_memory < before)
      cuda.synchronize()
      st = cuda.status()
      print("after", st.held_frees, st.hung, cuda.device().free_memory == before)
      print("turns", x:download()[1])
    ]]
    local code, out = H.script(src:gsub("TURNS", turns), "CUDA_DOUBLE_BUSY=300")
    assert.equals(0, code, out)
    assert.matches("timed out\tCUDA_ERROR_TIMEOUT", out)
    assert.matches("held\t1\ttrue\ttrue", out)
    -- under make sanitize-gpu the tool's own device memory grows as the
    -- graph runs (seen on an H200), so there the count alone says the free
    -- was made
    assert.matches("after\t0\tfalse\t" .. (H.sanitizer and "%a+" or "true"), out)
    assert.matches("turns\t" .. turns .. "\n", out)
  end)

  -- A loop whose body never clears its condition, at line 7 of the chunk.
  local endless = [[
    local cuda = require "cugraph"
    local m = cuda.load_module(os.getenv("CUGRAPH_LUA_BUILD") .. "/kernels.ptx")
    local s = cuda.stream()
    local x = cuda.buffer("i32", 8):fill(0)
    local c = cuda.condition(1)
    local g = s:capture(function()
      s:loop_while(c, function() m.inc_i32:launch(s, 1, 8, x, 8) end)
    end)
  ]]
  local loop_named = "cugraph%.Graph #1 was launched last on this stream %(captured at [^)]*:%d+%); " ..
                     "its while loop node 1 %([^)]*:7%) may not end"

  it("bound the launch of a graph whose loop never ends, naming the loop's line", function()
    -- On a GPU the launch returns at once and the wait after it times out;
    -- so on the simulator's strict mode, which runs the work inside the
    -- wait; the test double runs it inside the launch, which is then the
    -- wait: bounded the same, by CUGRAPH_LUA_TIMEOUT, the same words
    local code, out = H.script(endless .. [[
      local t0 = os.time()
      local ok, err = pcall(function() g:launch(); s:synchronize() end)
      print(ok, cuda.is_error(err) and err.name, cuda.is_error(err) and err.api,
            os.time() - t0 < 10)
      print(tostring(err))
      print("closing")
    ]], "CUGRAPH_LUA_TIMEOUT=0.3 timeout 120", { plain = true }) -- as above
    assert.equals(0, code, out)
    assert.matches("false\tCUDA_ERROR_TIMEOUT\t" ..
                   ((H.gpu or H.strict) and "cuStreamSynchronize" or "cuGraphLaunch")
                   .. "\ttrue", out)
    assert.matches(loop_named, out)
    assert.matches("closing", out)
  end)

  it("stop simulated work on ^C with an error naming what ran", function()
    if H.gpu then
      pending("a GPU runs the loop on the device: the launch returns at once, and a wait " ..
              "without a timeout blocks in the driver, which no signal ends")
      return
    end
    -- ^C comes once the launch runs (a second would kill the process)
    local code, out = H.script(endless .. [[
      local mark = os.tmpname()
      os.remove(mark)
      local pid = io.open("/proc/self/stat"):read("n")
      io.popen(("while [ ! -e %s ]; do sleep 0.05; done; sleep 0.3; kill -INT %d; rm -f %s")
               :format(mark, pid, mark))
      io.open(mark, "w"):close()
      g:launch()
      s:synchronize() -- strict mode: the work runs here
      print("not reached")
    ]], "timeout 120")
    assert.equals(1, code, out)
    assert.matches("^[^\n]*: [^\n]*:%d+: interrupted! %(the software driver stopped the work of " ..
                   (H.strict and "cuStreamSynchronize" or "cuGraphLaunch") .. ": " .. loop_named, out)
    assert.not_matches("not reached", out)
  end)

  it("bound and stop a kernel that spins for ever on the simulator", function()
    if not H.sim then
      pending(H.gpu and "a GPU runs the kernel on the device: the launch returns at once"
              or "the test double runs host twins of the spec kernels, none of which spins")
      return
    end
    local spin = [[
      local cuda = require "cugraph"
      local m = cuda.compile('extern "C" __global__ void spin(volatile int *flag) { ' ..
                             'while (*flag == 0) {} }')
      local s = cuda.stream()
      local flag = cuda.buffer("i32", 1):fill(0)
    ]]
    -- strict mode: the launch returns, and the wait runs the work
    local api = H.strict and "cuStreamSynchronize" or "cuLaunchKernel"
    local code, out = H.script(spin .. [[
      local ok, err = pcall(function() m.spin:launch(s, 4, 32, flag); s:synchronize() end)
      print(ok, cuda.is_error(err) and err.name, tostring(err))
      flag:fill(1)
      m.spin:launch(s, 4, 32, flag) -- the device is still usable
      s:synchronize()
      print("usable")
    ]], "CUGRAPH_LUA_TIMEOUT=0.3 timeout 120")
    assert.equals(0, code, out)
    assert.matches("false\tCUDA_ERROR_TIMEOUT\t[^\n]*" .. api .. ": CUDA_ERROR_TIMEOUT: the work ran 0%.3 s", out)
    assert.matches("usable", out)
    -- ^C once the launch runs
    code, out = H.script(spin .. [[
      local mark = os.tmpname()
      os.remove(mark)
      local pid = io.open("/proc/self/stat"):read("n")
      io.popen(("while [ ! -e %s ]; do sleep 0.05; done; sleep 0.3; kill -INT %d; rm -f %s")
               :format(mark, pid, mark))
      io.open(mark, "w"):close()
      m.spin:launch(s, 4, 32, flag)
      s:synchronize()
      print("not reached")
    ]], "timeout 120")
    assert.equals(1, code, out)
    assert.matches("interrupted! %(the software driver stopped the work of " .. api, out)
    assert.not_matches("not reached", out)
  end)

  it("take a timeout that is a positive number of seconds", function()
    local s = cuda.stream()
    for _, t in ipairs { 0, -1, 0 / 0, "x" } do
      assert.has_error(function() s:synchronize(t) end)
      assert.has_error(function() cuda.synchronize(t) end)
      assert.has_error(function() cuda.event():record(s):synchronize(t) end)
    end
    s:synchronize(math.huge) -- no bound
    s:synchronize(5)
    cuda.synchronize(5)
  end)
end)
