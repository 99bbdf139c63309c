-- Threads (spec/hosts/threads.c): 8 states on 8 threads whose first GPU
-- calls race, a state handed from one thread to another, finalizers and
-- lua_close on threads that did not make the state. Runs on the driver the
-- suite runs on (CUGRAPH_LUA_LIBCUDA is inherited), with a fresh NVRTC
-- cache each time so that the threads' cache writes race too.
local H = require "support.helper"

local function threads(n)
  local cmd = ('d=$(mktemp -d) && XDG_CACHE_HOME="$d" %s %s %s %d 2>&1; '
               .. 'rc=$?; rm -rf "$d"; exit $rc'):format(
    H.sanitized(H.quote(H.build .. "/threads")), H.quote(H.build .. "/../lua"),
    H.quote(H.build .. "/kernels.ptx"), n)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  local _, _, code = p:close()
  return code, out
end

-- Runs each Lua source in a state of its own on a thread of its own
-- (spec/hosts/turns.c: post, await and now order them), after env.
local function turns(env, ...)
  local paths, args = {}, {}
  for i, src in ipairs { ... } do
    paths[i] = os.tmpname()
    local f = assert(io.open(paths[i], "w"))
    f:write(src)
    f:close()
    args[i] = H.quote(paths[i])
  end
  local p = assert(io.popen(("%s %s %s %s 2>&1"):format(env or "",
    H.sanitized(H.quote(H.build .. "/turns")), H.quote(H.build .. "/../lua"),
    table.concat(args, " "))))
  local out = p:read("a")
  local _, _, code = p:close()
  for _, path in ipairs(paths) do os.remove(path) end
  return code, out
end

describe("threads", function()
  it("run states on any thread, one thread at a time each (5 runs of 8 threads)", function()
    for run = 1, 5 do
      local code, out = threads(8)
      assert.equals(0, code, ("run %d:\n%s"):format(run, out))
      assert.matches("ok %(a%) 8 states on 8 threads at once", out)
      assert.matches("ok %(b%)", out)
      assert.matches("ok %(c%)", out)
    end
  end)

  it("restrict each other's calls during a capture as the capture's mode says (spec/hosts/modes.c)", function()
    -- a global capture refuses another thread's allocation, a thread-local
    -- or relaxed one does not; a relaxed capture lets its own thread allocate
    local p = assert(io.popen(H.sanitized(H.quote(H.build .. "/modes")) .. " 2>&1"))
    local out = p:read("a")
    local _, _, code = p:close()
    assert.equals(0, code, out)
    for _, mode in ipairs { "global", "thread_local", "relaxed" } do
      assert.matches("ok " .. mode .. ":", out)
    end
  end)

  it("bound a wait for the whole device that another thread's capture holds back", function()
    -- the wait cannot begin while a capture of the device is open (the
    -- driver would break the capture): its timeout counts from the call
    local capturing = [[
      local cuda = require "cugraph"
      local s = cuda.stream()
      local x = cuda.buffer("f32", 8)
      local g = s:capture(function()
        x:fill(1, s)
        post("open")
        assert(await("waited"), "the other thread's wait did not end")
      end)
      g:launch(s)
      s:synchronize()
    ]]
    local waiting = [[
      local cuda = require "cugraph"
      cuda.stream() -- the context is ready
      assert(await("open"))
      local t0 = now()
      local ok, err = pcall(cuda.synchronize, 0.2)
      print("waited", ok, err and err.name, err and err.api, now() - t0 < 2)
      print(tostring(err))
      post("waited")
      cuda.synchronize(5) -- unbounded by the capture now that it ended
      print("then", true)
    ]]
    local code, out = turns(nil, capturing, waiting)
    assert.equals(0, code, out)
    assert.matches("waited\tfalse\tCUDA_ERROR_TIMEOUT\tcuCtxSynchronize\ttrue", out)
    assert.matches("cuCtxSynchronize: CUDA_ERROR_TIMEOUT: the wait ended after 0%.2 s: " ..
                   "another thread's graph capture on this device was still open", out)
    assert.matches("then\ttrue", out)
  end)

  it("bound a capture that another thread's wait for the whole device holds back", function()
    -- a wait for the whole device holds new captures back while it waits
    -- for open ones: a third thread's capture meanwhile waits at most the
    -- state's timeout (CUGRAPH_LUA_TIMEOUT)
    local holding = [[
      local cuda = require "cugraph"
      local s = cuda.stream()
      local x = cuda.buffer("f32", 8)
      local g = s:capture(function()
        x:fill(1, s)
        post("open")
        assert(await("tried"), "the third thread's capture did not end")
      end)
    ]]
    local waiting = [[
      local cuda = require "cugraph"
      assert(await("open"))
      post("waiting")
      cuda.synchronize(10) -- holds captures back until the first one ends
      post("waited")
    ]]
    local capturing = [[
      local cuda = require "cugraph"
      local s = cuda.stream()
      local x = cuda.buffer("f32", 8)
      assert(await("waiting"))
      local t0 = now()
      while now() - t0 < 0.5 do end -- the wait is at the gate by now
      t0 = now()
      local ok, err = pcall(s.capture, s, function() x:fill(2, s) end)
      print("capture", ok, err and err.name, err and err.api, now() - t0 < 2)
      print(tostring(err))
      post("tried")
      assert(await("waited"), "the wait for the device did not end")
      local g = s:capture(function() x:fill(3, s) end) -- the wait has ended
      g:launch(s)
      print("then", x:download()[1])
    ]]
    local code, out = turns("CUGRAPH_LUA_TIMEOUT=0.3", holding, waiting, capturing)
    assert.equals(0, code, out)
    assert.matches("capture\tfalse\tCUDA_ERROR_TIMEOUT\tcuStreamBeginCapture\ttrue", out)
    assert.matches("cuStreamBeginCapture: CUDA_ERROR_TIMEOUT: the wait ended after 0%.3 s: " ..
                   "another thread's wait for the whole device", out)
    assert.matches("then\t3", out)
  end)
end)
