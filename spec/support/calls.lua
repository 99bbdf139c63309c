-- luacheck: ignore 212/self 212/F 431/F
-- (every recipe takes the fixtures as F, used or not; F also names their
-- class, whose makers need no self)

-- A call that works for every function and method of the module, for the
-- specs that enumerate them from the runtime (spec/65: a finalizer at every
-- allocation inside every call; spec/66: every bad address at every door).
-- Those specs take the list of names from the runtime and fail on a name
-- that has no entry here: a new method or function gets its entry with it.
--
-- calls[name](F) returns the arguments of one call: the object first for a
-- method ("Buffer:copy"), the arguments only for a function ("cuda.buffer");
-- a list of such functions gives the call's variants (options that take
-- other paths through it).
-- F makes fresh objects for each call; F.mem(type, n) makes the buffers the
-- call uses as device memory (spec/66 gives bad ones in their place),
-- F.buf(type, n) the buffers it does not (a view's buffer, a graph's), and
-- F.fn(body) the Lua functions the call runs (spec/65 tells their code from
-- the call's own). An entry may return nil and a reason where what it needs
-- cannot be had here (no peer API, no NCCL, no GL).
local N = 256

return function(cuda, H)
  local m = H.kernels()
  local ptx
  do
    local f = assert(io.open(H.build .. "/kernels.ptx"))
    ptx = f:read("a")
    f:close()
  end
  local peer = H.peer()
  local nccl = pcall(cuda.nccl_version) and not os.getenv("CUGRAPH_LUA_SANITIZER")
  local gl = not H.gpu -- the software driver's GL stand-in (spec/40)

  local F = {}
  F.__index = F
  local function fixtures(hooks)
    return setmetatable({ hooks = hooks or {}, made = {} }, F)
  end

  function F:buf(t, n) return cuda.buffer(t or "f32", n or N):fill(1) end
  function F:mem(t, n)
    self.nmem = (self.nmem or 0) + 1
    local b = self.hooks.mem and self.hooks.mem(t or "f32", n or N, self.nmem)
    return b or self:buf(t, n)
  end
  function F:fn(body)
    local hook = self.hooks.fn
    return function(...)
      if hook then hook(true) end
      local r = table.pack(body and body(...))
      if hook then hook(false) end
      return table.unpack(r, 1, r.n)
    end
  end
  function F:stream() return cuda.stream() end
  function F:host(t, n) return cuda.host_buffer(t or "f32", n or N) end
  function F:scalar(t, v) return cuda.scalar(t or "f32", v or 1) end
  function F:event() return cuda.event() end
  function F:module() return cuda.load_module(H.build .. "/kernels.ptx") end
  function F:kernel() return self:module().inc_i32 end
  function F:condition() return cuda.condition(0) end
  function F:graph()
    local s, x = cuda.stream(), self:buf("i32")
    return s:capture(self:fn(function() m.inc_i32:launch(s, 1, N, x, N) end))
  end
  function F:array() return cuda.array("f32", 16, 16) end
  function F:texture() return self:array():texture() end
  function F:surface() return cuda.array("f32", 16, 16, nil, { surface = true }):surface() end
  function F:blas() return cuda.blas() end
  function F:fft() return cuda.fft(N, "c2c") end
  function F:rng() return cuda.rng(1) end
  function F:elementwise()
    return cuda.elementwise("f32 x, f32 y -> f32 z", "z = x + y")
  end
  function F:reduction()
    return cuda.reduction { input = "f32 x", reduce = "a + b", identity = 0 }
  end
  function F:extmem()
    if not peer then return nil end
    local pm = peer.memory(N * 8)
    self.made[#self.made + 1] = pm
    return cuda.external_memory(pm:fd(), pm:size())
  end
  function F:extsem()
    if not peer then return nil end
    local p = peer.semaphore("binary")
    self.made[#self.made + 1] = p
    return cuda.external_semaphore(p:fd())
  end
  function F:comm() return nccl and cuda.comms({ 0 })[1] or nil end
  function F:glres() return gl and cuda.gl_buffer(7, "f32") or nil end
  function F:path()
    local p = os.tmpname()
    self.made[#self.made + 1] = p
    return p
  end
  function F:npy()
    local p = self:path()
    cuda.buffer("f32", { 1, 2, 3 }):save(p)
    return p
  end

  local no_peer = "no API to import from here (spec/support/peer.c)"
  local no_nccl = "no NCCL here"
  local no_gl = "no GL here"
  local function need(v, why)
    if v == nil then return nil, why end
    return v
  end

  local calls = {}
  local function def(name, f) calls[name] = f end

  -- Stream
  def("Stream:capture", function(F)
    local s, x = F:stream(), F:buf("i32")
    return s, F:fn(function() m.inc_i32:launch(s, 1, N, x, N) end)
  end)
  def("Stream:label", function(F)
    local s, x = F:stream(), F:buf("i32")
    return s, "step", F:fn(function(ls) m.inc_i32:launch(ls, 1, N, x, N) end)
  end)
  def("Stream:wait", function(F) return F:stream(), F:event():record() end)
  def("Stream:wait_external", function(F)
    local e = F:extsem()
    if not e then return nil, no_peer end
    local s = F:stream()
    s:signal_external(e)
    return s, e
  end)
  def("Stream:signal_external", function(F)
    local e = F:extsem()
    if not e then return nil, no_peer end
    return F:stream(), e
  end)
  def("Stream:wait_value", {
    function(F) return F:stream(), F:mem("u32", 2), 0 end, -- any filled value
    function(F) return F:stream(), F:host("u64", 1), F:scalar("u64", 0), "eq" end,
  })
  def("Stream:write_value", {
    function(F) return F:stream(), F:mem("u64", 2), 5 end,
    function(F) return F:stream(), F:scalar("u32", 0), F:scalar("u32", 7) end,
  })
  def("Stream:host", function(F)
    local fn, data = H.hostfn()
    if not fn then return nil, data end
    return F:stream(), fn, data
  end)
  def("Stream:synchronize", function(F) return F:stream() end)
  def("Stream:query", function(F) return F:stream() end)
  def("Stream:priority", function(F) return F:stream() end)
  def("Stream:handle", function(F) return F:stream() end)
  -- these record nodes: called inside a capture on their stream (in_capture)
  def("Stream:loop_while", function(F)
    local c, y = cuda.condition(1), F:buf("i32")
    return F:stream(), c, F:fn(function(bs)
      m.inc_i32:launch(bs, 1, N, y, N)
      c:count_down(bs, 1)
    end)
  end)
  local function body(F, x)
    return F:fn(function(bs) m.inc_i32:launch(bs, 1, N, x, N) end)
  end
  def("Stream:branch", function(F)
    local x = F:buf("i32")
    return F:stream(), F:condition(), body(F, x), body(F, x)
  end)
  def("Stream:switch", function(F)
    local x = F:buf("i32")
    return F:stream(), F:condition(), { body(F, x), body(F, x) }
  end)

  -- Condition
  def("Condition:set", function(F) return F:condition(), F:stream(), 1 end)
  def("Condition:set_when", function(F)
    return F:condition(), F:stream(), F:mem("f32"), "<", 2, 0
  end)
  def("Condition:count_down", function(F) return cuda.condition(1), F:stream(), 1 end)
  def("Condition:default", function(F) return F:condition() end)

  -- GLResource
  def("GLResource:map", function(F)
    local r = F:glres()
    if not r then return nil, no_gl end
    return r, F:stream(), F:fn(function(b) b:fill(1) end)
  end)

  -- Event
  def("Event:record", function(F) return F:event(), F:stream() end)
  def("Event:synchronize", function(F) return F:event():record() end)
  def("Event:query", function(F) return F:event():record() end)
  def("Event:elapsed", function(F)
    local a, b = F:event():record(), F:event()
    b:record():synchronize()
    return b, a
  end)

  -- Buffer
  local data = {}
  for i = 1, N do data[i] = i end
  def("Buffer:upload", function(F) return F:mem("f32"), data, 0, F:stream() end)
  def("Buffer:download_into", function(F) return F:mem("f32"), F:host("f32"), 0, F:stream() end)
  def("Buffer:view", function(F) return F:buf("f32"), 8, 8 end)
  def("Buffer:managed", function(F) return F:buf() end)
  def("Buffer:pitch", function(F) return F:buf() end)
  def("Buffer:shape", function(F) return F:buf() end)
  def("Buffer:copy2d", function(F) return F:mem("f32"), F:mem("f32"), 16, 16 end)
  def("Buffer:copy3d", function(F) return F:mem("f32"), F:mem("f32"), 8, 8, 4 end)
  def("Buffer:prefetch", function(F) return cuda.managed("f32", N), "device" end)
  def("Buffer:advise", function(F) return cuda.managed("f32", N), "read_mostly" end)
  def("Buffer:parent", function(F) return F:buf():view(4) end)
  def("Buffer:download", function(F) return F:mem("f32"), "table", 0, 16 end)
  def("Buffer:fill", function(F) return F:mem("f32"), 2, F:stream() end)
  def("Buffer:copy", function(F) return F:mem("f32"), F:mem("f32"), F:stream() end)
  def("Buffer:type", function(F) return F:buf() end)
  def("Buffer:bytes", function(F) return F:buf() end)
  def("Buffer:address", function(F) return F:buf() end)
  def("Buffer:save", function(F) return F:mem("f32"), F:path() end)
  def("Buffer:dlpack", function(F) return F:mem("f32") end)

  -- DLTensor
  def("DLTensor:shape", function(F) return F:buf():dlpack() end)
  def("DLTensor:type", function(F) return F:buf():dlpack() end)

  -- Comm
  local function comm2(F, ...)
    local c = F:comm()
    if not c then return nil, no_nccl end
    return c, ...
  end
  def("Comm:all_reduce", function(F) return comm2(F, F:mem(), F:mem(), "sum", F:stream()) end)
  def("Comm:reduce", function(F) return comm2(F, F:mem(), F:mem(), 0, "sum", F:stream()) end)
  def("Comm:broadcast", function(F) return comm2(F, F:mem(), F:mem(), 0, F:stream()) end)
  def("Comm:all_gather", function(F) return comm2(F, F:mem(), F:mem(), F:stream()) end)
  def("Comm:reduce_scatter", function(F) return comm2(F, F:mem(), F:mem(), "sum", F:stream()) end)
  def("Comm:send", function() return nil, "send and recv need a peer: one rank here" end)
  def("Comm:recv", function() return nil, "send and recv need a peer: one rank here" end)
  def("Comm:rank", function(F) return comm2(F) end)
  def("Comm:size", function(F) return comm2(F) end)

  -- Blas
  def("Blas:gemm", function(F)
    return F:blas(), F:mem("f32"), F:mem("f32"), F:mem("f32"), { m = 16, n = 16, k = 16 }
  end)
  def("Blas:matmul", function(F)
    return F:blas(), F:mem("f32"), F:mem("f32"), F:mem("f32"), { m = 16, n = 16, k = 16 }
  end)
  def("Blas:gemv", function(F)
    return F:blas(), F:mem("f32"), F:mem("f32", 16), F:mem("f32", 16), { m = 16, n = 16 }
  end)
  def("Blas:axpy", function(F) return F:blas(), 2, F:mem("f32"), F:mem("f32") end)
  def("Blas:dot", function(F) return F:blas(), F:mem("f32"), F:mem("f32"), F:mem("f32", 1) end)
  def("Blas:nrm2", function(F) return F:blas(), F:mem("f32"), F:mem("f32", 1) end)
  def("Blas:workspace", function(F) return F:blas() end)

  -- FFT
  def("FFT:forward", function(F) return F:fft(), F:mem("f32", 2 * N), F:mem("f32", 2 * N) end)
  def("FFT:inverse", function(F) return F:fft(), F:mem("f32", 2 * N), F:mem("f32", 2 * N) end)
  def("FFT:elements", function(F) return F:fft() end)
  def("FFT:workspace", function(F) return F:fft() end)

  -- HostBuffer
  def("HostBuffer:set", function(F) return F:host("f32"), data, 0 end)
  def("HostBuffer:copy2d", function(F) return F:host("f32"), F:mem("f32"), 16, 16 end)
  def("HostBuffer:copy3d", function(F) return F:host("f32"), F:mem("f32"), 8, 8, 4 end)
  def("HostBuffer:totable", function(F) return F:host() end)
  def("HostBuffer:__index", function(F) return F:host(), 3 end)
  def("HostBuffer:__newindex", function(F) return F:host(), 3, 1.5 end)
  def("HostBuffer:tostring", function(F) return F:host() end)
  def("HostBuffer:bytes", function(F) return F:host() end)
  def("HostBuffer:type", function(F) return F:host() end)

  -- Array, Texture, Surface
  def("Array:shape", function(F) return F:array() end)
  def("Array:format", function(F) return F:array() end)
  def("Array:bytes", function(F) return F:array() end)
  def("Array:copy2d", function(F) return F:array(), F:mem("f32"), 16, 16 end)
  def("Array:copy3d", function(F) return F:array(), F:mem("f32"), 16, 16, 1 end)
  def("Array:texture", function(F) return F:array(), { filter = "linear" } end)
  def("Array:surface", function(F) return cuda.array("f32", 16, 16, nil, { surface = true }) end)
  def("Texture:array", function(F) return F:texture() end)
  def("Texture:handle", function(F) return F:texture() end)
  def("Surface:array", function(F) return F:surface() end)
  def("Surface:handle", function(F) return F:surface() end)

  -- ExternalMemory, ExternalSemaphore
  local function ext(F, ...)
    local e = F:extmem()
    if not e then return nil, no_peer end
    return e, ...
  end
  def("ExternalMemory:buffer", function(F) return ext(F, "f32", N, 0) end)
  def("ExternalMemory:array", function(F) return ext(F, "f32", 8, 8) end)
  def("ExternalMemory:size", function(F) return ext(F) end)
  def("ExternalMemory:handle", function(F) return ext(F) end)
  def("ExternalSemaphore:kind", function(F) return need(F:extsem(), no_peer) end)
  def("ExternalSemaphore:handle", function(F) return need(F:extsem(), no_peer) end)

  -- Scalar
  def("Scalar:set", function(F) return F:scalar("f32"), 2 end)
  def("Scalar:get", function(F) return F:scalar("f32") end)
  def("Scalar:type", function(F) return F:scalar() end)
  def("Scalar:address", function(F) return F:scalar() end)

  -- Rng, Elementwise, Reduction (the front end's objects)
  def("Rng:uniform", function(F) return F:rng(), F:mem("f32"), 0, 1 end)
  def("Rng:normal", function(F) return F:rng(), F:mem("f32"), 0, 1 end)
  def("Rng:bits", function(F) return F:rng(), F:mem("u32") end)
  def("Rng:seed", function(F) return F:rng(), 5, 1 end)
  def("Rng:offset", function(F) return F:rng() end)
  def("Rng:set_offset", function(F) return F:rng(), 4 end)
  def("Elementwise:source", function(F) return F:elementwise() end)
  def("Elementwise:kernel", function(F) return F:elementwise() end)
  def("Elementwise:__call", function(F)
    return F:elementwise(), F:mem("f32"), F:mem("f32"), F:mem("f32")
  end)
  def("Reduction:source", function(F) return F:reduction() end)
  def("Reduction:kernels", function(F) return F:reduction() end)
  def("Reduction:__call", function(F) return F:reduction(), F:mem("f32"), F:mem("f32", 1) end)

  -- Module, Kernel
  def("Module:kernel", function(F) return F:module(), "saxpy" end)
  def("Module:kernels", function(F) return F:module() end)
  def("Module:global", function()
    return cuda.compile("__device__ unsigned counter[4];\n"
      .. 'extern "C" __global__ void k(unsigned *x) { x[0] = counter[0]; }'), "counter"
  end)
  def("Module:reload", function(F) return F:module(), ptx, "again.ptx" end)
  def("Kernel:launch", function(F) return F:kernel(), F:stream(), 1, N, F:mem("i32"), N end)
  def("Kernel:name", function(F) return F:kernel() end)
  def("Kernel:config", function(F) return F:kernel(), { priority = 0 } end)
  def("Kernel:occupancy", function(F) return F:kernel(), 128 end)
  def("Kernel:programmatic", function(F) return F:kernel() end)
  def("Kernel:block_size", function(F) return F:kernel() end)
  def("Kernel:signature", function(F) return F:kernel() end)
  def("Kernel:params", function(F) return F:kernel() end)
  def("Kernel:shared", function(F) return F:kernel(), 0 end)

  -- Graph, Node
  def("Graph:launch", function(F) return F:graph(), F:stream() end)
  def("Graph:replay", function(F) return F:graph(), 2, F:stream() end)
  def("Graph:upload", function(F) return F:graph(), F:stream() end)
  def("Graph:update", function(F)
    local s, x = F:stream(), F:buf("i32")
    local g = s:capture(function() m.inc_i32:launch(s, 1, N, x, N) end)
    return g, F:fn(function() m.inc_i32:launch(s, 1, N, x, N) end)
  end)
  def("Graph:nodes", function(F) return F:graph(), "detail" end)
  def("Graph:node", function(F) return F:graph(), 1 end)
  def("Graph:rebind", function(F)
    local s, x = F:stream(), F:buf("i32")
    local g = s:capture(function() m.inc_i32:launch(s, 1, N, x, N) end)
    return g, x, F:mem("i32")
  end)
  def("Graph:dot", {
    function(F) return F:graph(), F:path() end,
    function(F) return F:graph(), F:path(), true end,
    function(F)
      local g = F:graph()
      return g, F:path(), { profile = g:profile(2) }
    end,
  })
  def("Graph:memory", function(F) return F:graph() end)
  def("Graph:profile", {
    function(F) return F:graph(), 2 end,
    function(F) return F:graph(), { n = 2, stream = F:stream(), trace = F:path() } end,
    function(F) return F:graph(), { n = 2, method = "stamps", stream = F:stream() } end,
    function(F) return F:graph(), { n = 2, method = "activity", stream = F:stream() } end,
  })
  def("Graph:launches", function(F) return F:graph() end)
  def("Graph:id", function(F) return F:graph() end)
  def("Graph:handle", function(F) return F:graph() end)
  def("Node:set", function(F)
    local s, x = F:stream(), F:buf("i32")
    local g = s:capture(function() m.inc_i32:launch(s, 1, N, x, N) end)
    return g:node(1), F:mem("i32"), N
  end)
  def("Node:enable", function(F) return F:graph():node(1), false end)
  def("Node:enabled", function(F) return F:graph():node(1) end)
  def("Node:info", function(F) return F:graph():node(1) end)
  def("Node:index", function(F) return F:graph():node(1) end)
  def("Node:handle", function(F) return F:graph():node(1) end)

  -- Graphed
  function F:graphed()
    local x = self:buf("i32")
    local f = cuda.graphed(function(st, n) m.inc_i32:launch(st, 1, N, x, n) end)
    local s = self:stream()
    f(s, N)
    s:synchronize() -- the calls that follow use x on other streams
    return f
  end
  def("Graphed:__call", function(F) return F:graphed(), F:stream(), N end)
  def("Graphed:graphs", function(F) return F:graphed() end)
  def("Graphed:stats", function(F) return F:graphed() end)

  -- the module's functions
  def("cuda.array", function() return "f32", 16, 16 end)
  def("cuda.available", function() end)
  def("cuda.blas", function(F) return F:stream() end)
  def("cuda.blas_version", function() end)
  def("cuda.buffer", function() return "f32", { 1, 2, 3 } end)
  def("cuda.can_access_peer", function() return 0, 0 end)
  def("cuda.comm", function()
    if not nccl then return nil, no_nccl end
    return cuda.nccl_id(), 1, 0
  end)
  def("cuda.comm_world", function() return nil, "needs a launcher's ranks (spec/02)" end)
  def("cuda.comms", function()
    if not nccl then return nil, no_nccl end
    return { 0 }
  end)
  def("cuda.compile", function()
    return 'extern "C" __global__ void k(float *x) { x[threadIdx.x] += 1; }'
  end)
  def("cuda.compile_cache_dir", function() end)
  def("cuda.condition", function() return 1 end)
  def("cuda.current_device", function() end)
  def("cuda.device", function() return 0 end)
  def("cuda.device_count", function() end)
  def("cuda.device_of", function(F) return F:buf() end)
  def("cuda.elementwise", function() return "f32 x -> f32 y", "y = 2 * x" end)
  def("cuda.graphed", function(F) return F:fn(function() end), { graphs = 2 } end)
  def("cuda.enable_peer_access", function() return 0, 0 end)
  def("cuda.entries", function() return ptx end)
  def("cuda.event", function() return { timing = false } end)
  def("cuda.external_memory", function(F)
    if not peer then return nil, no_peer end
    local pm = peer.memory(N * 4)
    F.made[#F.made + 1] = pm
    return pm:fd(), pm:size()
  end)
  def("cuda.external_semaphore", function(F)
    if not peer then return nil, no_peer end
    local p = peer.semaphore("binary")
    F.made[#F.made + 1] = p
    return p:fd()
  end)
  def("cuda.fft", function() return { 16, 16 }, "c2c" end)
  def("cuda.fft_version", function() end)
  def("cuda.from_dlpack", function(F) return F:buf():dlpack() end)
  def("cuda.gl_buffer", function()
    if not gl then return nil, no_gl end
    return 8, "f32"
  end)
  def("cuda.gl_image", function() return nil, "needs a GL texture (spec/40 covers it)" end)
  def("cuda.graph_memory_cap", function() return false end)
  def("cuda.host_buffer", function() return "f32", { 1, 2, 3 } end)
  def("cuda.info", function() end)
  def("cuda.is_error", function() return 1 end)
  def("cuda.load", function(F) return F:npy() end)
  def("cuda.load_module", function() return H.build .. "/kernels.ptx" end)
  def("cuda.managed", function() return "f32", 64 end)
  def("cuda.memory", function(F) F:graph() end)
  def("cuda.module", function() return ptx, "k.ptx" end)
  def("cuda.nccl_group", function(F) return F:fn(function() end) end)
  def("cuda.nccl_id", function()
    if not nccl then return nil, no_nccl end
  end)
  def("cuda.nccl_rendezvous", function() return nil, "needs several ranks (spec/02)" end)
  def("cuda.nccl_rendezvous_tcp", function() return nil, "needs several ranks (spec/02)" end)
  def("cuda.nccl_version", function()
    if not nccl then return nil, no_nccl end
  end)
  def("cuda.on", function(F) return 0, F:fn(function() return cuda.buffer("f32", 4) end) end)
  def("cuda.pitched", function() return "f32", 16, 16 end)
  def("cuda.ptx", function()
    return 'extern "C" __global__ void k(float *x) { x[threadIdx.x] += 1; }'
  end)
  def("cuda.reduction", function()
    return { input = "f32 x", reduce = "a + b", identity = 0 }
  end)
  def("cuda.rng", function() return 3 end)
  def("cuda.scalar", function() return "u32", 3 end)
  def("cuda.select", function() return 0 end)
  def("cuda.status", function() end)
  def("cuda.stream", function() return { priority = 0 } end)
  def("cuda.synchronize", function() end)
  def("cuda.trim", function() return 0 end)
  def("cuda.watch", function(F) return F:npy(), F:fn(function() end) end)
  def("cuda.world", function() end)

  -- calls made inside a capture: each makes the call (call(args...)) in
  -- the body of a capture on the call's stream, with what it needs there
  local x = cuda.buffer("i32", N)
  local function looped(call, c, s, ...) -- c drives the loop it counts down
    local args = table.pack(...)
    s:loop_while(c, function(bs)
      m.inc_i32:launch(bs, 1, N, x, N)
      call(c, bs, table.unpack(args, 1, args.n))
    end)
  end
  local function driving(call, c, s, ...) -- c drives a node of its own
    call(c, s, ...)
    s:loop_while(c, function(bs) m.inc_i32:launch(bs, 1, N, x, N) end)
  end
  local plain = function(call, ...) call(...) end
  local in_capture = { ["Stream:loop_while"] = plain, ["Stream:branch"] = plain,
    ["Stream:switch"] = plain, ["Stream:label"] = plain,
    ["Condition:set"] = driving, ["Condition:set_when"] = driving,
    ["Condition:count_down"] = looped }
  -- the calls the test double cannot run: they launch kernels of their own
  local runs_kernels = { ["Elementwise:__call"] = true, ["Reduction:__call"] = true,
    ["Rng:uniform"] = true, ["Rng:normal"] = true, ["Rng:bits"] = true,
    ["Module:global"] = true }
  -- an object of each type, for the methods every type has (free, close,
  -- __tostring, ...)
  local makers = {
    Stream = F.stream, Buffer = F.buf, HostBuffer = F.host, Scalar = F.scalar,
    Event = F.event, Module = F.module, Kernel = F.kernel, Graph = F.graph,
    Node = function(F) return F:graph():node(1) end, Condition = F.condition,
    Array = F.array, Texture = F.texture, Surface = F.surface, Blas = F.blas,
    FFT = F.fft, Rng = F.rng, Elementwise = F.elementwise,
    Reduction = F.reduction, ExternalMemory = F.extmem,
    ExternalSemaphore = F.extsem, Comm = F.comm, GLResource = F.glres,
    DLTensor = function(F) return F:buf():dlpack() end,
    Graphed = F.graphed,
  }
  -- the calls that hand a bare pointer to code of the script's: how much
  -- of it the code touches is the code's own
  local raw = { ["Kernel:launch"] = true, ["Node:set"] = true }
  local C = { calls = calls, fixtures = fixtures, in_capture = in_capture,
              runs_kernels = runs_kernels, makers = makers, raw = raw }

  -- The names of every function and method, from the runtime.
  function C.names()
    local list, seen = {}, {}
    local function add(name)
      if not seen[name] then seen[name], list[#list + 1] = true, name end
    end
    for k, v in pairs(cuda) do
      if type(v) == "function" then add("cuda." .. k) end
    end
    local types = {}
    for name, mt in pairs(debug.getregistry()) do -- the core's types
      if type(name) == "string" and type(mt) == "table" and name:match("^cugraph%.%u")
         and type(mt.methods) == "table" then
        types[name:sub(9)] = mt
      end
    end
    for _, t in ipairs { "Rng", "Elementwise", "Reduction" } do -- the front end's
      types[t] = debug.getmetatable(C.makers[t](C.fixtures()))
    end
    for t, mt in pairs(types) do
      for k, v in pairs(mt.methods) do
        if type(v) == "function" then add(t .. ":" .. k) end
      end
      for k, v in pairs(mt) do
        if type(v) == "function" and k:match("^__") and k ~= "__gc" and k ~= "__close" then
          add(t .. ":" .. k)
        end
      end
    end
    table.sort(list)
    return list
  end

  -- Metamethods of one argument, and what every type has, made generically.
  C.generic = { free = true, close = true, __tostring = true, __len = true,
    __index = true }

  -- The calls of name: its recipe, or the list of its variants.
  function C.recipes(name)
    local t, method = name:match("^(%w+):([%w_]+)$")
    local r = C.calls[name]
    if not r and t and C.generic[method] and C.makers[t] then
      r = function(F) return C.makers[t](F), method == "__index" and "free" or nil end
    end
    if type(r) == "function" then return { r } end
    return r
  end

  -- The function and the arguments of the call of name by recipe, or nil
  -- and why.
  function C.prepare(name, recipe, F)
    local t, method = name:match("^(%w+):([%w_]+)$")
    local args = table.pack(recipe(F))
    if args[1] == nil and (args.n >= 2 or t) then -- what is missing here
      return nil, args[2] or ("no " .. t .. " here")
    end
    if not t then return cuda[name:sub(6)], args end
    local mt = debug.getmetatable(args[1])
    return rawget(mt.methods, method) or mt[method], args
  end

  -- The objects of the runtime among the arguments (and in their tables),
  -- and those they stand on (user value 1: a view's buffer, a kernel's
  -- module, a node's graph).
  function C.touched(args)
    local list, seen = {}, {}
    local function add(v, depth)
      if type(v) == "table" and depth < 2 and not getmetatable(v) then
        for _, e in pairs(v) do add(e, depth + 1) end
      elseif type(v) == "userdata" or (type(v) == "table" and getmetatable(v)) then
        if seen[v] or not pcall(function() return v.free end) or not v.free then return end
        seen[v], list[#list + 1] = true, v
        if type(v) == "userdata" then add(debug.getuservalue(v, 1), depth) end
      end
    end
    for i = 1, args.n do add(args[i], 0) end
    return list
  end

  local function first_stream(args)
    for i = 1, args.n do
      if getmetatable(args[i]) == "cugraph.Stream" then return args[i] end
    end
  end

  -- The call itself, inside a capture where it records a node (the capture
  -- on its first stream; the graph is freed).
  function C.invoke(name, fn, args)
    local wrap = C.in_capture[name]
    if not wrap then return fn(table.unpack(args, 1, args.n)) end
    local s = first_stream(args)
    s:capture(function() wrap(fn, table.unpack(args, 1, args.n)) end):free()
  end

  return C
end
