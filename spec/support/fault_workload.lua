-- The fault sweep's workload (spec/60-faults_spec.lua runs it with one
-- driver call failed at a time): every driver call the runtime makes, in
-- one script. It never raises: it prints one line
--   FAULT-RESULT <outcome> <api> <code> <poisoned> <after> <unfreed>
--                <finalizer errors> <last finalizer error>
-- (tab-separated; "-" for none) and exits 0 unless something crashes.
-- outcome: "ok", "error" (an error object) or "message" (any other error,
-- its text in api). poisoned: cuda.status().poisoned right after the error.
-- after: whether the runtime still works ("works"), or refuses to because
-- the context is poisoned ("restart"), or else the error it raised.
-- unfreed: objects whose :free() raised, or "-".
-- With FAULT_WORKLOAD_EXIT set, exits right after the workload without
-- closing the state: a trace then counts the calls the workload made.
local cuda = require "cugraph"
local S = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/sweep.lua")
local build = os.getenv("CUGRAPH_LUA_BUILD") or "build"
local keep, objs = S.keep, S.objs

local N = 256
local function workload()
  cuda.select(0)
  assert(cuda.device_count() == 1)
  local dev = cuda.device()
  assert(dev.free_memory and dev.driver_version)
  local s, side = keep(cuda.stream()), keep(cuda.stream())
  local x, y = keep(cuda.buffer("f32", N)), keep(cuda.buffer("f32", N))
  local out = keep(cuda.buffer("u32", N))
  local b8, b16, b64 = keep(cuda.buffer("u8", 64)), keep(cuda.buffer("i16", 64)),
                       keep(cuda.buffer("f64", 64))
  local t = {}
  for i = 1, N do t[i] = i end
  x:upload(t)                 -- cuMemcpyHtoDAsync
  y:fill(1)                   -- cuMemsetD32Async
  b8:fill(7, s)               -- cuMemsetD8Async
  b16:fill(-2)                -- cuMemsetD16Async
  b64:fill(0.5)               -- cuMemsetD2D32Async
  y:copy(x, s)                -- cuMemcpyDtoDAsync
  assert(y:download()[N] == N) -- cuMemcpyDtoHAsync
  local h = keep(cuda.host_buffer("f32", N)) -- cuMemHostAlloc (cuMemFreeHost
  x:download_into(h, s)       -- at the end), copies from pinned memory
  y:upload(h)
  local img = keep(cuda.pitched("f32", 16, 4)) -- cuMemAllocPitch
  img:copy2d(x, 16, 4):copy3d(img, 8, 2, 1, { src_x = 8, src_y = 2 }) -- cuMemcpy3DAsync
  local tex = keep(cuda.array("f32x4", 4, 4)) -- cuArray3DCreate (cuArrayDestroy at the end)
  tex:copy2d(img, 4, 4); img:copy2d(tex, 4, 4)
  keep(tex:texture { filter = "linear" }) -- cuTexObjectCreate (cuTexObjectDestroy at the end)
  keep(keep(cuda.array("u8x4", 4, 4, { surface = true })):surface()) -- cuSurfObjectCreate
  -- memory and semaphores another API exported (the software driver's
  -- model: memfds, spec/support/peer.c)
  local peer = package.loadlib(build .. "/peer.so", "luaopen_peer")()
  assert(peer.open("memfd"))
  local pm, pt = peer.memory(4096), peer.semaphore("timeline")
  local em = keep(cuda.external_memory(pm:fd(), pm:size())) -- cuImportExternalMemory
  keep(em:buffer("f32", 16)):fill(1)  -- cuExternalMemoryGetMappedBuffer (cuMemFree)
  keep(em:array("f32", 4, 4, { offset = 1024 })) -- ...GetMappedMipmappedArray, cuMipmappedArrayGetLevel
  local es = keep(cuda.external_semaphore(pt:fd(), "timeline")) -- cuImportExternalSemaphore
  s:signal_external(es, 1):wait_external(es, 1) -- cuSignal/WaitExternalSemaphoresAsync
  local at = keep(cuda.scalar("u64", 2))
  local gs = keep(s:capture(function() s:signal_external(es, at); s:wait_external(es, at) end))
  at:set(3)
  gs:launch(s) -- cuGraphExecExternalSemaphores{Signal,Wait}NodeSetParams
  local fence, at32 = keep(cuda.host_buffer("u32", 1)), keep(cuda.scalar("u32", 1))
  s:write_value(fence, 1):wait_value(fence, 1) -- cuStream{Write,Wait}Value32/64
  local c64 = keep(cuda.buffer("u64", 1))
  s:write_value(c64, 2):wait_value(c64, 2, "eq")
  local gf = keep(s:capture(function() s:write_value(fence, at32); s:wait_value(fence, at32) end))
  at32:set(2)
  gf:launch(s) -- cuGraphExecBatchMemOpNodeSetParams
  local mm = keep(cuda.managed("f32", N))     -- cuMemAllocManaged
  mm:advise("read_mostly"):prefetch()         -- cuMemAdvise, cuMemPrefetchAsync
  local gl = keep(cuda.gl_buffer(2, "f32")) -- the software driver's GL stand-in
  gl:map(s, function(b) b:view(0, N):copy(x, s) end) -- cuGraphicsMapResources, ...
  keep(cuda.gl_image(3, "2d")):map(s, function(a) -- cuGraphicsGLRegisterImage,
    a:copy2d(a, 1, 1, { stream = s })               -- ...SubResourceGetMappedArray
  end)
  local a = keep(cuda.scalar("f32", 2))
  local pos = keep(cuda.scalar("u32", 0))
  pos:set(3)
  assert(pos:get() == 3)      -- cuMemcpyDtoHAsync
  local m = keep(cuda.load_module(build .. "/kernels.ptx"))
  local saxpy, add, mark, shared = m.saxpy, m.add_scalar_f32, m.mark_u32, m.shared_u32
  shared:shared(64 * 1024)    -- cuFuncSetAttribute
  saxpy:launch(s, 1, N, 2.0, x, y, N)
  add:launch(s, 1, N, y, a, N)
  shared:launch(s, 1, N, out, N)
  local urgent = keep(cuda.stream { priority = "highest" }) -- cuCtxGetStreamPriorityRange,
  local block = add:block_size()                           -- ...WithPriority; occupancy
  assert(add:occupancy(block) >= 1)
  add:config { cooperative = true, cluster = 1 }            -- cuLaunchKernelEx
  urgent:wait(s) -- saxpy and add on s write y first
  add:launch(urgent, 1, N, y, a, N)
  add:config {}
  urgent:synchronize()
  s:synchronize()
  s:query()
  local t0, t1 = keep(cuda.event()), keep(cuda.event())
  t0:record(s)
  mark:launch(s, 1, 1, out, pos, N)
  t1:record(s)
  t1:synchronize()
  t1:query()
  assert(t1:elapsed(t0) >= 0)
  side:wait(t1)               -- cuStreamWaitEvent on a user event
  local g = keep(s:capture(function()
    saxpy:launch(s, 1, N, 2.0, x, y, N)
    side:wait(s)              -- fork
    add:launch(side, 1, N, y, a, N)
    b8:fill(1, side)
    s:wait(side)              -- join
    y:copy(x, s)
    mark:launch(s, 1, 1, out, pos, N)
  end))
  g:upload()
  g:launch()
  pos:set(5)
  g:replay(3)
  g:update(function()
    saxpy:launch(s, 1, N, 3.0, y, x, N)
    side:wait(s)
    add:launch(side, 1, N, x, a, N)
    b8:fill(2, side)
    s:wait(side)
    x:copy(y, s)
    mark:launch(s, 1, 1, out, pos, N)
  end)
  g:launch(side)
  local f = assert(io.open(build .. "/kernels.ptx"))
  m:reload(f:read("a"))       -- the graph's kernel nodes switch code
  f:close()
  g:launch(side)
  local n, kinds = g:nodes()
  assert(n == 5 and #kinds == 5)
  local dot = os.tmpname()
  g:dot(dot)           -- labelled from the capture's records
  g:dot(dot, true)     -- the driver's own
  s:wait(side) -- the profile runs on s, after g's launches on side
  local p = g:profile { n = 1, trace = dot } -- a copy with event nodes
  assert(#p.nodes == 5 and p.lines[1])
  os.remove(dot)
  local g2 = keep(s:capture(function() b16:fill(3, s) end,
                            { mode = "global", upload = true }))
  g2:launch()
  cuda.synchronize()
  assert(b16:download()[1] == 3)
  -- in place: a kernel node's, a fill's and a copy's buffers, a node's
  -- arguments and its enabled flag
  local x2, y2 = keep(cuda.buffer("f32", N)), keep(cuda.buffer("f32", N))
  local g3 = keep(s:capture(function()
    add:launch(s, 1, N, x2, a, N)
    y2:fill(0, s)
    x2:copy(y2, s)
  end))
  g3:rebind(x2, y, y2, x)
  g3:node(1):set(y, a, N):enable(false)
  g3:node(1):enable(true)
  g3:launch()
  local n3 = g3:nodes("detail")
  assert(n3 == 3)
  -- conditional nodes (while, if), a child graph, and a reload that reaches
  -- kernel nodes inside both
  local c, c2 = keep(cuda.condition(1)), keep(cuda.condition(0))
  local inner = keep(s:capture(function() add:launch(s, 1, N, y, a, N) end))
  local g4 = keep(s:capture(function()
    s:loop_while(c, function()
      add:launch(s, 1, N, y, a, N)
      c:count_down(s, 2)
    end)
    c2:set_when(s, out, ">", 0)
    s:branch(c2, function() mark:launch(s, 1, 1, out, pos, N) end)
    inner:launch(s)
  end))
  g4:launch()
  f = assert(io.open(build .. "/kernels.ptx"))
  m:reload(f:read("a"))
  f:close()
  g4:launch()
  local p4 = g4:profile { n = 1 } -- by stamps: its closure captured again
  assert(p4.method == "stamps" and p4.nodes[2].runs == 2, p4.note)
  -- stream-ordered memory, and memory a graph allocates and frees
  local sb = keep(cuda.buffer("f32", N, { stream = s }))
  sb:fill(1, s)
  sb:free(s)
  local g5 = keep(s:capture(function()
    local gb = cuda.buffer("f32", N, { stream = s })
    add:launch(s, 1, N, gb, a, N)
    gb:free(s)
  end))
  g5:launch()
  s:synchronize()
  assert(cuda.memory().pool and cuda.memory().graph)
  cuda.trim()
  for i = #objs, 1, -1 do objs[i]:free() end -- graphs before what they use
  cuda.buffer("f32", 4)                        -- and one left to the collector
  collectgarbage()
  collectgarbage()
end

local outcome, api, code = S.run(workload, "FAULT_WORKLOAD_EXIT")
local poisoned = cuda.status().poisoned

-- After the failure: a fresh buffer filled and read back, and every stream
-- made still synchronizes, unless the context is poisoned.
local after = "works"
local aok, aerr = pcall(function()
  local b = cuda.buffer("f32", 4):fill(1)
  assert(b:download()[4] == 1, "the probe read back a wrong value")
  b:free()
  for _, o in ipairs(objs) do
    if tostring(o):find("^cugraph.Stream") and not tostring(o):find("freed") then
      o:synchronize()
    end
  end
  cuda.synchronize()
end)
if not aok then
  after = tostring(aerr):find("the process must restart", 1, true) and "restart"
          or tostring(aerr)
end

S.report("FAULT-RESULT", outcome, api, code, poisoned, after)
