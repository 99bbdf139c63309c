-- The fault sweep: every driver call the runtime makes, failed in turn
-- (CUDA_DOUBLE_FAULT of the test double) with an out-of-memory and with a
-- sticky code, in a subprocess running spec/support/fault_workload.lua.
-- Each case checks: no crash, the right error object (its api names the
-- failed call, its code is the injected one), the context poisoned exactly
-- when the code is sticky, the runtime still working after a recoverable
-- error, a failed destroy recorded in cuda.status() instead of raised, and
-- every object still freeable. Under make test-valgrind the children run
-- under valgrind too (a leak on an error path fails the case).
--
-- Cases: the first, middle and last call of each entry point in the
-- workload, and its last call when that comes later (the frees after it,
-- lua_close); CUGRAPH_FULL_SWEEP=1 takes every call
-- (make fault-sweep). Under valgrind: the first call of each, out of memory.
local H = require "support.helper"

local WORKLOAD = "spec/support/fault_workload.lua"
local CODES = { [2] = "CUDA_ERROR_OUT_OF_MEMORY", [700] = "CUDA_ERROR_ILLEGAL_ADDRESS" }
local STICKY = { [700] = true }
-- Calls that release a handle: their failure is recorded, never raised.
local DESTROY = {
  cuMemFree = true, cuModuleUnload = true, cuStreamDestroy = true,
  cuEventDestroy = true, cuGraphExecDestroy = true, cuGraphDestroy = true,
  cuMemFreeHost = true, cuGraphicsUnregisterResource = true, cuArrayDestroy = true,
  cuTexObjectDestroy = true, cuSurfObjectDestroy = true, cuDestroyExternalMemory = true,
  cuDestroyExternalSemaphore = true, cuMipmappedArrayDestroy = true,
  cuDevicePrimaryCtxRelease = true, -- a share's, when its object frees it
  cuLaunchHostFunc = true, -- a launched graph's release, its keep behind it
}
-- Calls that acquisitions and releases both make: raised from the one,
-- recorded from the other (a launched graph with conditional nodes lets
-- its exec go behind its last launch through a share: cg_keep_exec_after).
local EITHER = { cuDevicePrimaryCtxRetain = true }

-- Calls per entry point of one run of the workload: name -> count.
local function trace(env) return H.trace(WORKLOAD, "CUDA_DOUBLE_TRACE", env) end

-- What is wrong with the outcome of case c (nil when nothing is).
local function problems(c, status, out)
  local bad = {}
  local function want(ok, fmt, ...)
    if not ok then bad[#bad + 1] = fmt:format(...) end
  end
  want(status == 0, "exit status %s: a crash, or a valgrind error", tostring(status))
  local line = out:match("FAULT%-RESULT\t[^\n]*")
  if not line then
    want(false, "no result line")
    return bad
  end
  local _, outcome, api, code, poisoned, after, unfreed, nfin, lastfin = table.unpack(H.fields(line))
  local name, sticky = CODES[c.code], STICKY[c.code]
  want(unfreed == "-", "objects could not be freed: %s", unfreed)
  if c.later then -- the workload was done: frees, probes and lua_close
    want(outcome == "ok", "the workload failed: %s %s", outcome, api)
  elseif c.api == "cuInit" then -- start-up errors are plain messages
    want(outcome == "message" and api:find("cuInit: " .. name, 1, true),
         "expected the message \"cuInit: %s: ...\", got %s %s", name, outcome, api)
  else
    if DESTROY[c.api] or (EITHER[c.api] and lastfin == c.api .. ": " .. name) then
      want(tonumber(nfin) and tonumber(nfin) >= 1 and lastfin == c.api .. ": " .. name,
           "the failed %s was not recorded in cuda.status(): %s finalizer errors, last %s",
           c.api, nfin, lastfin)
      want(outcome == "ok" or (sticky and outcome == "error" and api == c.api),
           "a failed %s raised: %s %s %s", c.api, outcome, api, code)
    else
      want(outcome == "error", "expected an error object, got %s: %s", outcome, api)
      want(api == c.api, "err.api is %s, expected %s", api, c.api)
      want(code == tostring(c.code), "err.code is %s, expected %d", code, c.code)
      want(nfin == "0", "finalizer errors: %s (last: %s)", nfin, lastfin)
    end
    want(poisoned == (sticky and name or "-"), "cuda.status().poisoned is %s right after the error, expected %s",
         poisoned, sticky and name or "nil")
    want(after == (sticky and "restart" or "works"), "afterwards the runtime %s: %s",
         sticky and "should refuse every call (the process must restart)" or "should work", after)
  end
  return #bad > 0 and table.concat(bad, "; ") or nil
end

local function indexes(before, total)
  local pick = {}
  if os.getenv("CUGRAPH_FULL_SWEEP") == "1" then
    for i = 1, total do pick[#pick + 1] = i end
    return pick
  end
  if H.valgrind then return { 1 } end
  local seen = {}
  for _, i in ipairs { 1, (before + 1) // 2, before, total > before and total or 0 } do
    if i >= 1 and not seen[i] then
      seen[i] = true
      pick[#pick + 1] = i
    end
  end
  table.sort(pick)
  return pick
end

describe("the fault sweep", function()
  if H.gpu then
    it("needs the test double", function() pending("fault injection is a feature of the test double") end)
    return
  end

  local total, tstatus, tout = trace()
  local before = trace("FAULT_WORKLOAD_EXIT=1") -- calls of the workload itself

  it("has a workload that runs clean and reaches every entry point", function()
    assert.equals(0, tstatus, tout)
    assert.matches("FAULT%-RESULT\tok\t%-\t%-\t%-\tworks\t%-\t0\t%-", tout)
    local src = assert(io.open("src/base/driver.h")):read("a")
    -- not reached by one device's script: error texts, module globals and event instruction
    -- counts (the simulator's), C graphs' copies, an engine's arrays (C
    -- only: spec/41), peers (two devices: the NCCL and devices specs); and
    -- the software driver's bounds on simulated work, which take no lock
    -- and count no call (a signal handler calls one); the simulator's
    -- checks, which count no call (they are no part of the work); host
    -- functions (a C function's: spec/43); user objects (the keeps of C
    -- graphs and of graphs with conditional nodes: spec/41, spec/43); an
    -- engine's page-locked memory (C only: spec/43)
    local beside = {
      cuGetErrorName = true, cuGetErrorString = true, cuGraphClone = true,
      cuUserObjectCreate = true, cuGraphRetainUserObject = true,
      cuUserObjectRelease = true,
      cuMemHostGetDevicePointer = true,
      cuModuleGetGlobal = true, cuSimEventInstructions = true,
      cuSimSetWorkLimit = true, cuSimInterrupt = true, cuSimStopReason = true,
      cuSimSetLuaLine = true, cuSimHostAccess = true, cuSimTakeReport = true,
      cuDeviceCanAccessPeer = true, cuArray3DGetDescriptor = true,
      cuCtxEnablePeerAccess = true, cuMemcpyPeerAsync = true,
    }
    for _, set in ipairs { "CG_DRIVER_FUNCS", "CG_DRIVER_OPTIONAL" } do
      local list = src:match("#define " .. set .. "%(X%)(.-)\n\n")
      for name in list:gmatch("X%((cu%w+)%)") do
        if not beside[name] then
          assert.is_truthy(total[name], name .. " is never called by the workload")
        end
      end
    end
  end)

  it("keeps an error object whole when cuGetErrorName and cuGetErrorString fail", function()
    local status, out = H.script([[
      local ok, err = pcall(require("cugraph").buffer, "f32", 4)
      print(ok, err.api, err.code, err.name, err.message)
    ]], "CUDA_DOUBLE_FAULT=cuGetErrorName:1:2,cuGetErrorString:1:2,cuMemAlloc:1:2")
    assert.equals(0, status, out)
    assert.matches("false\tcuMemAlloc\t2\tCUDA_ERROR_2\tunknown error", out)
  end)

  it("ends a capture whose end failed and left it going", function()
    local status, out = H.script([[
      local cuda = require "cugraph"
      local m = cuda.module(os.getenv("CUGRAPH_LUA_BUILD") .. "/kernels.ptx")
      local s, x = cuda.stream(), cuda.buffer("i32", 8):fill(0)
      local function body() m.inc_i32:launch(s, 1, 8, x, 8) end
      local ok, err = pcall(s.capture, s, body)
      print(ok, err.api, err.name)
      s:synchronize()
      s:capture(body):launch()
      print(x:download()[1], cuda.status().capturing)
    ]], "CUDA_DOUBLE_FAULT=cuStreamEndCapture:1:908")
    assert.equals(0, status, out)
    assert.matches("false\tcuStreamEndCapture\tCUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD\n1\tfalse", out)
  end)

  it("records a failed destroy of the partial graph of a failed capture", function()
    local status, out = H.script([[
      local cuda = require "cugraph"
      local m = cuda.module(os.getenv("CUGRAPH_LUA_BUILD") .. "/kernels.ptx")
      local s, x = cuda.stream(), cuda.buffer("i32", 8):fill(0)
      print(pcall(s.capture, s, function() m.inc_i32:launch(s, 1, 8, x, 8); error("stop") end))
      local st = cuda.status()
      print(st.finalizer_errors, st.last_finalizer_error)
    ]], "CUDA_DOUBLE_FAULT=cuGraphDestroy:1:2")
    assert.equals(0, status, out)
    assert.matches("false\t[^\n]*stop", out)
    assert.matches("\n1\tcuGraphDestroy: CUDA_ERROR_OUT_OF_MEMORY", out)
  end)

  local apis = {}
  for name in pairs(total) do apis[#apis + 1] = name end
  table.sort(apis)
  local codes = H.valgrind and { 2 } or { 2, 700 }
  for _, api in ipairs(apis) do
    local b = before[api] or 0
    for _, i in ipairs(indexes(b, total[api])) do
      for _, code in ipairs(codes) do
        local c = { api = api, index = i, code = code, later = i > b }
        local label = ("%s call %d of %d%s, %s"):format(api, i, total[api],
          c.later and " (after the workload)" or "", CODES[code])
        it(label, function()
          local env = ("CUDA_DOUBLE_FAULT=%s:%d:%d"):format(api, i, code)
          local status, out = H.run(H.quote(WORKLOAD), env)
          local why = problems(c, status, out)
          assert(not why, (why or "") .. "\n[" .. env .. "]\n" .. out)
        end)
      end
    end
  end
end)

-- NVRTC's calls failed in turn (build/libnvrtc-fault.so in front of the
-- real NVRTC; spec/support/nvrtc_workload.lua compiles to PTX and to a
-- cubin, and a source that does not compile). Each failure is an error
-- object naming the call and its code, and the next compile works, except
-- where the runtime documents a fallback: a failed destroy or error text
-- is ignored, the lowered names that spell kernel types and the second,
-- front-end-only compile that spells the types of kernels the source's
-- text hides (nvrtcCompileProgram-syntax in the trace) leave the kernels
-- their PTX types,
-- and a failed nvrtcVersion leaves NVRTC unusable for the process.
describe("the NVRTC fault sweep", function()
  local WL = "spec/support/nvrtc_workload.lua"
  local lib = H.build .. "/libnvrtc-fault.so"
  local OOM = 1 -- NVRTC_ERROR_OUT_OF_MEMORY
  local function env(extra)
    return "CUGRAPH_LUA_LIBNVRTC=" .. H.quote(lib) .. (extra and " " .. extra or "")
  end
  local total, tstatus, tout = H.trace(WL, "NVRTC_FAULT_TRACE", env())
  assert(total.nvrtcCreateProgram, "no trace of the NVRTC stand-in: " .. tout)
  local before = H.trace(WL, "NVRTC_FAULT_TRACE", env("NVRTC_WORKLOAD_COUNT=1"))

  it("has a workload that runs clean and makes every NVRTC call the runtime loads", function()
    assert.equals(0, tstatus, tout)
    assert.matches("NVRTC%-RESULT\tok\t%-\t%-\tworks", tout)
    local src = assert(io.open("src/kernel/nvrtc.c")):read("a")
    for name in src:match("#define NV_FUNCS%(X%)(.-)\n\n"):gmatch("X%((nvrtc%w+)%)") do
      assert.is_truthy(before[name], name .. " is never called by the workload")
    end
  end)

  local ignored = { nvrtcDestroyProgram = true, nvrtcGetErrorString = true,
                    nvrtcGetLoweredName = true, ["nvrtcCompileProgram-syntax"] = true }
  local apis = {}
  for name in pairs(total) do apis[#apis + 1] = name end
  table.sort(apis)
  for _, api in ipairs(apis) do
    local b = before[api] or 0
    for _, i in ipairs(indexes(b, total[api])) do
      it(("%s call %d of %d%s"):format(api, i, total[api], i > b and " (the compile after)" or ""), function()
        local status, out = H.run(H.quote(WL), env(("NVRTC_FAULT=%s:%d:%d"):format(api, i, OOM)))
        assert.equals(0, status, out)
        local r = H.fields(assert(out:match("NVRTC%-RESULT\t[^\n]*"), out))
        local outcome, eapi, code, after = r[2], r[3], r[4], r[5]
        if api == "nvrtcVersion" then
          assert.equals("message", outcome, out)
          assert.matches("nvrtcVersion failed: NVRTC_ERROR_OUT_OF_MEMORY", eapi)
          assert.matches("nvrtcVersion failed", after)
        elseif i > b then
          assert.equals("ok", outcome, out)
          if not ignored[api] then
            assert.equals(api .. " " .. OOM, after, out)
          end
        elseif ignored[api] then
          assert.same({ "ok", "works" }, { outcome, after }, out)
        else
          assert.same({ "error", api, tostring(OOM), "works" }, { outcome, eapi, code, after })
        end
      end)
    end
  end
end)
