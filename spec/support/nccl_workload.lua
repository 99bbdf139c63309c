-- The NCCL fault sweep's workload (spec/02-devices_spec.lua runs it with
-- one call of the NCCL double failed at a time, on two devices of the
-- driver double): every NCCL call the runtime makes. It never raises: it
-- prints one line
--   NCCL-RESULT <outcome> <api> <code> <after> <unfreed> <finalizer errors>
--               <last finalizer error>
-- (tab-separated; "-" for none) and exits 0 unless something crashes.
-- outcome: "ok", "error" (an error object) or "message" (any other
-- error). after: "works" when a fresh communicator all-reduces afterwards,
-- else the error it raised. unfreed: objects whose :free() raised. With
-- NCCL_WORKLOAD_EXIT set, exits right after the workload: a trace then
-- counts the calls of the workload itself.
local cuda = require "cugraph"
local S = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/sweep.lua")
local keep, objs = S.keep, S.objs

local function workload()
  assert(cuda.nccl_version() > 0)
  local c = keep(cuda.comm_world())              -- ncclGetUniqueId, ncclCommInitRank
  local s = keep(cuda.stream())
  local x, y = keep(cuda.buffer("f32", 8)):fill(1), keep(cuda.buffer("f32", 8))
  c:all_reduce(x, y)
  c:reduce(x, y, 0, "max")
  c:broadcast(x, y, 0, s)
  c:all_gather(x, y)
  c:reduce_scatter(x, y, "sum", s)
  cuda.nccl_group(function() c:all_reduce(x, y, "sum", s) end)
  local g = keep(s:capture(function() c:all_reduce(x, y, "sum", s) end))
  g:launch()
  s:synchronize()
  local comms = cuda.comms { 0, 1 }               -- ncclCommInitAll
  keep(comms[1]); keep(comms[2])
  local b = { keep(cuda.buffer("f32", 4)):fill(2),
              keep(cuda.on(1, function() return cuda.buffer("f32", 4) end)) }
  cuda.nccl_group(function()
    comms[1]:send(b[1], 1)
    comms[2]:recv(b[2], 0)
  end)
  assert(b[2]:download()[4] == 2)
  for i = #objs, 1, -1 do objs[i]:free() end    -- ncclCommDestroy
  collectgarbage()
end

local outcome, api, code = S.run(workload, "NCCL_WORKLOAD_EXIT")

local after = "works"
local aok, aerr = pcall(function()
  local c = cuda.comm_world()
  local v = cuda.buffer("f32", 2):fill(3)
  c:all_reduce(v, v)
  assert(v:download()[2] == 3, "the probe read back a wrong value")
  c:free()
end)
if not aok then after = tostring(aerr) end

S.report("NCCL-RESULT", outcome, api, code, after)
