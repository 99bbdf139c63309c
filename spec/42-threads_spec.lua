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
end)
