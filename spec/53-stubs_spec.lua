-- The editor annotations (types/cugraph.lua) against the runtime: every
-- annotated function and method is called as its annotation says (every
-- parameter, then the required ones alone), what it returns is checked
-- against its @return lines (a function annotated with none returns
-- nothing), and an object of the wrong kind where a cugraph object is
-- required must raise. spec/51 checks that the same names exist both ways.
local H = require "support.helper"
local cuda = H.cuda

-- Each function: { params = {{name, type, opt}}, returns = {{type, name}} }.
-- An overload, "fun(self: T, a: A, b?: B): R", as params and returns.
local function overload(text)
  local args, ret = text:match("^fun%((.-)%):?%s*(.*)$")
  local params = {}
  for a in (args .. ","):gmatch("%s*(.-),") do
    local name, opt, t = a:match("^([%w_]+)(%??):%s*(.+)$")
    if name and name ~= "self" then params[#params + 1] = { name = name, type = t, opt = opt == "?" } end
  end
  return { params = params, returns = ret ~= "" and { { type = ret, name = "" } } or {} }
end

-- Each function: { params = {{name, type, opt}}, returns = {{type, name}} };
-- an overload is "name@overload" (then @overload2, ...).
local function annotations(path)
  local out, params, returns, overloads = {}, {}, {}, {}
  for line in io.lines(path) do
    local pname, popt, ptype = line:match("^%-%-%-@param ([%w_%.]+)(%??) (%S+)")
    local rtype, rname = line:match("^%-%-%-@return (%S+)%s*(%S*)")
    local over = line:match("^%-%-%-@overload (fun%(.*)$")
    local fname = line:match("^function ([%w_%.:]+)%(")
    if pname then
      params[#params + 1] = { name = pname, type = ptype, opt = popt == "?" }
    elseif rtype then
      returns[#returns + 1] = { type = rtype, name = rname }
    elseif over then
      overloads[#overloads + 1] = overload(over)
    elseif fname then
      out[fname] = { params = params, returns = returns }
      for i, o in ipairs(overloads) do out[fname .. "@overload" .. (i > 1 and i or "")] = o end
      params, returns, overloads = {}, {}, {}
    elseif not line:match("^%-%-%-") then
      params, returns, overloads = {}, {}, {}
    end
  end
  return out
end

-- The aliases: name -> the type they stand for (a list of quoted strings:
-- "string").
local function aliases(path)
  local out, open = {}, nil
  for line in io.lines(path) do
    local name, def = line:match("^%-%-%-@alias ([%w_%.]+)%s*(.*)$")
    if name then
      out[name] = def ~= "" and def or "string"
      open = def == "" and name or nil
    elseif open and not line:match("^%-%-%-|") then
      open = nil
    end
  end
  return out
end
local ALIASES = aliases("types/cugraph.lua")

local OBJECTS = {
  Stream = true, Event = true, Buffer = true, Scalar = true, Module = true, Kernel = true,
  Graph = true, Node = true, Condition = true, HostBuffer = true, Comm = true, GLResource = true,
  DLTensor = true, Rng = true, Elementwise = true, Reduction = true, Blas = true, FFT = true,
  Array = true, Texture = true, Surface = true, ExternalMemory = true, ExternalSemaphore = true,
  Graphed = true,
}

-- Whether v is of the annotated type t (a LuaCATS type, as the stubs write them).
local function is(v, t)
  if t:sub(-1) == "?" then return v == nil or is(v, t:sub(1, -2)) end
  if ALIASES[t] then return is(v, ALIASES[t]) end
  if t:sub(1, 1) == "{" then return type(v) == "table" end
  if t:find("^fun%(") then return type(v) == "function" end
  if t:find("|", 1, true) and not t:find("(", 1, true) then
    for alt in t:gmatch("[^|]+") do
      if is(v, alt) then return true end
    end
    return false
  end
  if t:sub(-2) == "[]" then return type(v) == "table" end
  if t == "any" or t == "T" or t == "..." then return true end
  if t == "integer" then return math.type(v) == "integer" end
  if t == "lightuserdata" then return type(v) == "userdata" and not debug.getmetatable(v) end
  if t:match('^".*"$') then return v == t:sub(2, -2) end
  local class = t:match("^cugraph%.(%w+)$")
  if class then
    if OBJECTS[class] then
      local mt = debug.getmetatable(v)
      return type(mt) == "table" and mt.__name == t
    end
    if class == "ElementType" then return type(v) == "string" end
    return type(v) == "table"
  end
  return type(v) == t
end

-- Fresh objects for the calls. Each recipe returns the receiver (methods)
-- and the arguments in the annotation's order, all of them.
local function fixtures()
  local F = {}
  F.s = cuda.stream()
  F.m = H.kernels()
  F.buf = function(n, t) return cuda.buffer(t or "f32", n or 4):fill(0) end
  F.graph = function()
    local b = F.buf(4, "i32")
    local g = F.s:capture(function() F.m.inc_i32:launch(F.s, 1, 32, b, 4) end)
    return g, b
  end
  F.ptx = io.open(H.build .. "/kernels.ptx"):read("a")
  return F
end

local SRC = 'extern "C" __global__ void k(int *x) { *x = 1; }'

-- Memory and semaphores a peer exports (spec/support/peer.c); its
-- objects live as long as the process.
local peer_kept = {}
local function ext_memory()
  local m = assert(H.peer()).memory(4096)
  peer_kept[#peer_kept + 1] = m
  return cuda.external_memory(m:fd(), m:size())
end
local function ext_semaphore(kind, signalled)
  local p = assert(H.peer()).semaphore(kind)
  peer_kept[#peer_kept + 1] = p
  if signalled then p:signal() end
  return cuda.external_semaphore(p:fd(), kind)
end

local recipes = {
  ["Stream:capture"] = function(F)
    local b = F.buf()
    return F.s, function(s) b:fill(1, s) end, { upload = true }
  end,
  ["Stream:label"] = "capture",
  ["Stream:wait"] = function(F) return F.s, cuda.event():record(cuda.stream()) end,
  ["Stream:synchronize"] = function(F) return F.s end,
  ["Stream:query"] = function(F) return F.s end,
  ["Stream:priority"] = function(F) return F.s end,
  ["Stream:handle"] = function(F) return F.s end,
  ["Stream:free"] = function() return cuda.stream() end,
  ["Stream:close"] = function() return cuda.stream() end,
  ["Event:record"] = function(F) return cuda.event(), F.s end,
  ["Event:synchronize"] = function(F) return cuda.event():record(F.s) end,
  ["Event:query"] = function(F) return cuda.event():record(F.s) end,
  ["Event:elapsed"] = function(F)
    local a, b = cuda.event():record(F.s), cuda.event():record(F.s)
    b:synchronize()
    return b, a
  end,
  ["Event:free"] = function() return cuda.event() end,
  ["Event:close"] = function() return cuda.event() end,
  ["Buffer:upload"] = function(F) return F.buf(), { 1, 2 }, 1, F.s end,
  ["Buffer:download_into"] = function(F) return F.buf(), cuda.host_buffer("f32", 2), 1, F.s end,
  ["Buffer:upload@overload"] = function(F) return F.buf(), cuda.host_buffer("f32", 4), F.s end,
  ["Buffer:download_into@overload"] = function(F) return F.buf(), cuda.host_buffer("f32", 4), F.s end,
  ["Buffer:view"] = function(F) return F.buf(), 1, 2, "i32" end,
  ["Buffer:managed"] = function(F) return F.buf() end,
  ["Buffer:pitch"] = function() return cuda.pitched("f32", 5, 3) end,
  ["Buffer:shape"] = function() return cuda.pitched("f32", 5, 3, 2) end,
  ["Buffer:copy2d"] = function(F) return cuda.pitched("f32", 5, 3), F.buf(15), 5, 3, { stream = F.s } end,
  ["Buffer:copy3d"] = function(F) return cuda.pitched("f32", 2, 2, 2), F.buf(8), 2, 2, 2, { stream = F.s } end,
  ["Buffer:prefetch"] = function(F) return cuda.managed("f32", 4), "device", F.s end,
  ["Buffer:advise"] = function() return cuda.managed("f32", 4), "preferred_location", "device" end,
  ["Buffer:parent"] = function(F) return F.buf():view(1) end,
  ["Buffer:download"] = function(F) return F.buf(), "table", 1, 2 end,
  ["Buffer:fill"] = function(F) return F.buf(), 3, F.s end,
  ["Buffer:copy"] = function(F) return F.buf(), F.buf(), { count = 2 }, F.s end,
  ["Buffer:type"] = function(F) return F.buf() end,
  ["Buffer:bytes"] = function(F) return F.buf() end,
  ["Buffer:address"] = function(F) return F.buf() end,
  ["Buffer:save"] = function(F) return F.buf(), F.tmp, { 2, 2 } end,
  ["Buffer:free"] = function(F) return F.buf(), F.s end,
  ["Buffer:close"] = function(F) return F.buf() end,
  ["Condition:set"] = "capture", ["Condition:set_when"] = "capture", ["Condition:count_down"] = "capture",
  ["Stream:loop_while"] = "capture", ["Stream:branch"] = "capture", ["Stream:switch"] = "capture",
  ["Condition:default"] = function() return cuda.condition(3) end,
  ["Condition:free"] = function() return cuda.condition() end,
  ["Condition:close"] = function() return cuda.condition() end,
  ["HostBuffer:set"] = function() return cuda.host_buffer("f32", 4), { 1, 2 }, 1 end,
  ["HostBuffer:copy2d"] = function(F) return cuda.host_buffer("f32", 6), F.buf(6), 3, 2, { src_pitch = 3 } end,
  ["HostBuffer:copy3d"] = function(F) return cuda.host_buffer("f32", 8), F.buf(8), 2, 2, 2, {} end,
  ["HostBuffer:totable"] = function() return cuda.host_buffer("f32", 2) end,
  ["HostBuffer:tostring"] = function() return cuda.host_buffer("f32", 2) end,
  ["HostBuffer:bytes"] = function() return cuda.host_buffer("f32", 2) end,
  ["HostBuffer:type"] = function() return cuda.host_buffer("f32", 2) end,
  ["HostBuffer:free"] = function() return cuda.host_buffer("f32", 2) end,
  ["HostBuffer:close"] = function() return cuda.host_buffer("f32", 2) end,
  ["Array:shape"] = function() return cuda.array("f32", 4, 2) end,
  ["Array:format"] = function() return cuda.array("u8x4", 4) end,
  ["Array:bytes"] = function() return cuda.array("f32x2", 4) end,
  ["Array:copy2d"] = function(F) return cuda.array("f32", 3, 2), F.buf(6), 3, 2, {} end,
  ["Array:copy3d"] = function(F) return cuda.array("f32", 2, 2, 2), F.buf(8), 2, 2, 2, {} end,
  ["Array:texture"] = function() return cuda.array("f32", 2), { filter = "linear" } end,
  ["Array:surface"] = function() return cuda.array("f32", 2, { surface = true }) end,
  ["Texture:array"] = function() return cuda.array("f32", 2):texture() end,
  ["Texture:handle"] = function() return cuda.array("f32", 2):texture() end,
  ["Texture:free"] = function() return cuda.array("f32", 2):texture() end,
  ["Texture:close"] = function() return cuda.array("f32", 2):texture() end,
  ["Surface:array"] = function() return cuda.array("f32", 2, { surface = true }):surface() end,
  ["Surface:handle"] = function() return cuda.array("f32", 2, { surface = true }):surface() end,
  ["Surface:free"] = function() return cuda.array("f32", 2, { surface = true }):surface() end,
  ["Surface:close"] = function() return cuda.array("f32", 2, { surface = true }):surface() end,
  ["cuda.external_memory"] = function()
    local m = assert(H.peer()).memory(4096)
    peer_kept[#peer_kept + 1] = m
    return m:fd(), m:size(), { dedicated = false }
  end,
  ["cuda.external_semaphore"] = function()
    local p = assert(H.peer()).semaphore("timeline")
    peer_kept[#peer_kept + 1] = p
    return p:fd(), "timeline"
  end,
  ["ExternalMemory:buffer"] = function() return ext_memory(), "f32", 4, 16 end,
  ["ExternalMemory:array"] = function() return ext_memory(), "f32", 4, 2, 1, { surface = true } end,
  ["ExternalMemory:array@overload"] = function() return ext_memory(), "u8x4", 4, 2, { offset = 64 } end,
  ["ExternalMemory:size"] = ext_memory,
  ["ExternalMemory:handle"] = ext_memory,
  ["ExternalMemory:free"] = ext_memory,
  ["ExternalMemory:close"] = ext_memory,
  ["ExternalSemaphore:kind"] = function() return ext_semaphore("binary") end,
  ["ExternalSemaphore:handle"] = function() return ext_semaphore("timeline") end,
  ["ExternalSemaphore:free"] = function() return ext_semaphore("timeline") end,
  ["ExternalSemaphore:close"] = function() return ext_semaphore("binary") end,
  ["Stream:wait_external"] = function(F) return F.s, ext_semaphore("timeline"), 0 end,
  ["Stream:wait_external@overload"] = function(F) return F.s, ext_semaphore("binary", true) end,
  ["Stream:signal_external"] = function(F) return F.s, ext_semaphore("timeline"), cuda.scalar("u64", 3) end,
  ["Stream:signal_external@overload"] = function(F) return F.s, ext_semaphore("binary") end,
  ["Stream:host"] = function(F)
    local fn, data = H.hostfn()
    return F.s, assert(fn, data), data
  end,
  ["Stream:wait_value"] = function(F) return F.s, cuda.host_buffer("u32", 1), 0, "geq" end,
  ["Stream:write_value"] = function(F) return F.s, cuda.scalar("u64"), cuda.scalar("u64", 3) end,
  ["Array:free"] = function() return cuda.array("f32", 2) end,
  ["Array:close"] = function() return cuda.array("f32", 2) end,
  ["Scalar:set"] = function() return cuda.scalar("f32"), 2 end,
  ["Scalar:get"] = function() return cuda.scalar("i32", 5) end,
  ["Scalar:type"] = function() return cuda.scalar("f32") end,
  ["Scalar:address"] = function() return cuda.scalar("f32") end,
  ["Scalar:free"] = function() return cuda.scalar("f32") end,
  ["Scalar:close"] = function() return cuda.scalar("f32") end,
  ["Module:kernel"] = function(F) return F.m, "saxpy", "float a, const float *x, float *y, int n" end,
  ["Module:kernels"] = function(F) return F.m end,
  ["Module:global"] = function(F) return F.global, "g", "i32" end,
  ["Module:reload"] = function(F) return cuda.module(F.ptx), F.ptx, "again" end,
  ["Module:free"] = function(F) return cuda.module(F.ptx) end,
  ["Module:close"] = function(F) return cuda.module(F.ptx) end,
  ["Kernel:launch"] = function(F) return F.m.inc_i32, F.s, 1, { 32, 1, 1 }, F.buf(4, "i32"), 4 end,
  ["Kernel:name"] = function(F) return F.m.saxpy end,
  ["Kernel:config"] = function(F) return cuda.module(F.ptx).saxpy, { priority = 0 } end,
  ["Kernel:occupancy"] = function(F) return F.m.saxpy, 128, 0 end,
  ["Kernel:block_size"] = function(F) return F.m.saxpy, 0 end,
  ["Kernel:programmatic"] = function(F) return F.m.saxpy end,
  ["Kernel:signature"] = function(F) return F.m.saxpy end,
  ["Kernel:params"] = function(F) return F.m.saxpy end,
  ["Kernel:shared"] = function(F) return cuda.module(F.ptx).shared_u32, 64 end,
  ["Kernel:free"] = function(F) return cuda.module(F.ptx).saxpy end,
  ["Kernel:close"] = function(F) return cuda.module(F.ptx).saxpy end,
  ["Graph:launch"] = function(F) return (F.graph()), F.s end,
  ["Graph:replay"] = function(F) return (F.graph()), 3, F.s end,
  ["Graph:upload"] = function(F) return (F.graph()), F.s end,
  ["Graph:update"] = function(F)
    local g, b = F.graph()
    return g, function(s) F.m.inc_i32:launch(s, 1, 32, b, 4) end
  end,
  ["Graph:nodes"] = function(F) return (F.graph()), true end,
  ["Graph:node"] = function(F) return (F.graph()), 1 end,
  ["Graph:rebind"] = function(F)
    local g, b = F.graph()
    return g, b, F.buf(4, "i32")
  end,
  ["Graph:dot"] = function(F) return (F.graph()), F.tmp, true end,
  ["Graph:launches"] = function(F) return (F.graph()) end,
  ["Graph:memory"] = function(F) return (F.graph()), true end,
  ["Graph:profile"] = function(F) return (F.graph()), 2 end,
  ["Graph:id"] = function(F) return (F.graph()) end,
  ["Graph:handle"] = function(F) return (F.graph()) end,
  ["Graph:free"] = function(F) return (F.graph()) end,
  ["Graph:close"] = function(F) return (F.graph()) end,
  ["Node:set"] = function(F) return F.graph():node(1), F.buf(4, "i32"), 2 end,
  ["Node:enable"] = function(F) return F.graph():node(1), false end,
  ["Node:enabled"] = function(F) return F.graph():node(1) end,
  ["Node:info"] = function(F) return F.graph():node(1) end,
  ["Node:index"] = function(F) return F.graph():node(1) end,
  ["Node:handle"] = function(F) return F.graph():node(1) end,
  ["Node:free"] = function(F) return F.graph():node(1) end,
  ["Node:close"] = function(F) return F.graph():node(1) end,
  ["Comm:all_reduce"] = function(F) local b = F.buf(); return F.comm, b, b, "max", F.s end,
  ["Comm:reduce"] = function(F) return F.comm, F.buf(), F.buf(), 0, "sum", F.s end,
  ["Comm:broadcast"] = function(F) return F.comm, F.buf(), F.buf(), 0, F.s end,
  ["Comm:all_gather"] = function(F) return F.comm, F.buf(), F.buf(), F.s end,
  ["Comm:reduce_scatter"] = function(F) return F.comm, F.buf(), F.buf(), "sum", F.s end,
  ["Comm:send"] = "group", ["Comm:recv"] = "group",
  ["Comm:rank"] = function(F) return F.comm end,
  ["Comm:size"] = function(F) return F.comm end,
  ["Comm:free"] = function() return cuda.comm_world() end,
  ["Comm:close"] = function() return cuda.comm_world() end,
  ["Blas:gemm"] = function(F)
    return F.blas, F.buf(), F.buf(), F.buf(), { m = 2, n = 2, k = 2, alpha = 2, beta = 1 }, F.s
  end,
  ["Blas:matmul"] = function(F)
    return F.blas, F.buf(), F.buf(), F.buf(), { m = 2, n = 2, k = 2, bias = F.buf(2), epilogue = "relu" }, F.s
  end,
  ["Blas:gemv"] = function(F) return F.blas, F.buf(), F.buf(2), F.buf(2), { m = 2, n = 2 }, F.s end,
  ["Blas:axpy"] = function(F) return F.blas, 2, F.buf(), F.buf(), { n = 4 }, F.s end,
  ["Blas:dot"] = function(F) return F.blas, F.buf(), F.buf(), cuda.scalar("f32"), { n = 4 }, F.s end,
  ["Blas:nrm2"] = function(F) return F.blas, F.buf(), F.buf(1), { n = 4 }, F.s end,
  ["Blas:workspace"] = function(F) return F.blas end,
  ["Blas:free"] = function() return cuda.blas() end,
  ["Blas:close"] = function() return cuda.blas() end,
  ["cuda.blas"] = function(F) return F.s, { workspace = 1 << 20 } end,
  ["cuda.blas@overload"] = function() return { workspace = 0 } end,
  ["cuda.blas_version"] = function() end,
  ["FFT:forward"] = function(F) return cuda.fft(4, "c2c"), F.buf(8), F.buf(8), F.s end,
  ["FFT:inverse"] = function(F) return cuda.fft(4, "c2r"), F.buf(6), F.buf(4), F.s end,
  ["FFT:elements"] = function() return cuda.fft({ 2, 4 }, "r2c") end,
  ["FFT:workspace"] = function() return cuda.fft(4, "c2c") end,
  ["FFT:free"] = function() return cuda.fft(4, "c2c") end,
  ["FFT:close"] = function() return cuda.fft(4, "c2c") end,
  ["cuda.fft"] = function(F) return { 2, 4 }, "c2c", { type = "f64", batch = 2, stream = F.s } end,
  ["cuda.fft_version"] = function() end,
  ["cuda.condition"] = function() return 1 end,
  ["cuda.watch"] = function(F) return F.tmp, function() end end,
  ["cuda.device"] = function() return 0 end,
  ["cuda.device_count"] = function() end,
  ["cuda.available"] = function() end,
  ["cuda.select"] = function() return 0 end,
  ["cuda.synchronize"] = function() end,
  ["cuda.on"] = function() return 0, function(x) return x end, 5 end,
  ["cuda.current_device"] = function() end,
  ["cuda.device_of"] = function(F) return F.s end,
  ["cuda.can_access_peer"] = function() return 0, 0 end,
  ["cuda.nccl_version"] = function() end,
  ["cuda.nccl_id"] = function() end,
  ["cuda.nccl_rendezvous"] = function(F) return F.tmp, 0, 5, "job" end,
  ["cuda.nccl_rendezvous_tcp"] = function() return "127.0.0.1:" .. H.free_port(), 0, 1, 5, "job" end,
  ["cuda.world"] = function() end,
  ["cuda.from_dlpack"] = function(F) return F.buf():dlpack() end,
  ["Buffer:dlpack"] = function(F) return F.buf(4), { 2, 2 } end,
  ["DLTensor:shape"] = function(F) return F.buf(4):dlpack({ 2, 2 }) end,
  ["DLTensor:type"] = function(F) return F.buf(4):dlpack() end,
  ["DLTensor:free"] = function(F) return F.buf(4):dlpack() end,
  ["DLTensor:close"] = function(F) return F.buf(4):dlpack() end,
  ["cuda.comm"] = function() return cuda.nccl_id(), 1, 0 end,
  ["cuda.comms"] = function() return { 0 } end,
  ["cuda.comm_world"] = function() end,
  ["cuda.nccl_group"] = function() return function(x) return x end, 3 end,
  ["cuda.status"] = function() end,
  ["cuda.info"] = function() end,
  ["cuda.is_error"] = function() return "x" end,
  ["cuda.stream"] = function() return { priority = "highest" } end,
  ["cuda.event"] = function() return { timing = false } end,
  ["cuda.buffer"] = function(F) return "f32", 4, { stream = F.s } end,
  ["cuda.memory"] = function() end,
  ["cuda.trim"] = function() return 0 end,
  ["cuda.graph_memory_cap"] = function() return false end,
  ["cuda.pitched"] = function() return "f32", 5, 3, 2 end,
  ["cuda.managed"] = function() return "f32", { 1, 2 } end,
  ["cuda.host_buffer"] = function() return "f32", { 1, 2 } end,
  ["cuda.array"] = function() return "f32x4", 4, 2, 2, { surface = true } end,
  ["cuda.array@overload"] = function() return "f32", 4, { surface = true } end,
  ["cuda.array@overload2"] = function() return "u8x4", 4, 2, {} end,
  ["cuda.scalar"] = function() return "f32", 1.5 end,
  ["cuda.module"] = function(F) return F.ptx, "kernels" end,
  ["cuda.load_module"] = function() return H.build .. "/kernels.ptx", "kernels" end,
  ["cuda.compile"] = function() return SRC, { arch = H.gpu and nil or "sm_90", cache = false } end,
  ["cuda.ptx"] = function() return SRC, { arch = "sm_90" } end,
  ["cuda.compile_cache_dir"] = function() end,
  ["cuda.entries"] = function(F) return F.ptx end,
  ["cuda.load"] = function(F) return F.npy end,
  ["cuda.rng"] = function() return 1, { subsequence = 2 } end,
  ["cuda.elementwise"] = function() return "f32 x -> f32 y", "y = 2 * x", { name = "twice", block = 128 } end,
  ["cuda.reduction"] = function() return { input = "f32 x", reduce = "a + b", identity = 0 } end,
  ["Rng:uniform"] = function(F) return cuda.rng(1), F.buf(4), -1, 1, F.s end,
  ["Rng:uniform@overload"] = function(F) return cuda.rng(1), F.buf(4), F.s end,
  ["Rng:normal"] = function(F) return cuda.rng(1), F.buf(4, "f64"), 2, 3, F.s end,
  ["Rng:normal@overload"] = function(F) return cuda.rng(1), F.buf(4), F.s end,
  ["Rng:bits"] = function(F) return cuda.rng(1), F.buf(4, "u32"), F.s end,
  ["Rng:seed"] = function() return cuda.rng(1), 5, 2 end,
  ["Rng:offset"] = function() return cuda.rng(1) end,
  ["Rng:set_offset"] = function() return cuda.rng(1), 3 end,
  ["Rng:free"] = function() return cuda.rng(1) end,
  ["Rng:close"] = function() return cuda.rng(1) end,
  ["Elementwise:source"] = function() return cuda.elementwise("f32 x -> f32 y", "y = x") end,
  ["Elementwise:kernel"] = function() return cuda.elementwise("f32 x -> f32 y", "y = x") end,
  ["Reduction:source"] = function() return cuda.reduction { input = "f32 x", reduce = "a + b", identity = 0 } end,
  ["Reduction:kernels"] = function() return cuda.reduction { input = "f32 x", reduce = "a + b", identity = 0 } end,
  ["cuda.graphed"] = function(F)
    return function(st) F.m.inc_i32:launch(st, 1, 4, F.buf(4, "i32"), 4) end,
           { graphs = 2, key = function() return 1 end, stream = F.s, eager = false }
  end,
  ["Graphed:graphs"] = function() return cuda.graphed(function() end) end,
  ["Graphed:stats"] = function() return cuda.graphed(function() end) end,
  ["Graphed:free"] = function() return cuda.graphed(function() end) end,
  ["Graphed:close"] = function() return cuda.graphed(function() end) end,
}

-- Calls that launch kernels of the runtime's own (the test double runs
-- only host twins of the spec kernels).
local LAUNCHES = {
  ["Rng:uniform"] = true, ["Rng:uniform@overload"] = true, ["Rng:normal"] = true,
  ["Rng:normal@overload"] = true, ["Rng:bits"] = true,
}

-- Calls that must run inside a capture (setters and conditional nodes) or
-- an NCCL group: the call is made there, and checked as the others.
local function special(name, F, call)
  if name == "Comm:send" or name == "Comm:recv" then
    local out
    cuda.nccl_group(function()
      local b, c = F.buf(), F.buf()
      out = { call(name == "Comm:send" and { F.comm, b, 0, F.s } or { F.comm, c, 0, F.s }) }
      if name == "Comm:send" then F.comm:recv(c, 0, F.s) else F.comm:send(b, 0, F.s) end
    end)
    return table.unpack(out)
  end
  local out
  local c = cuda.condition(name == "Condition:count_down" and 1 or 0)
  local b = F.buf()
  F.s:capture(function(s)
    local body = function(t) b:fill(1, t) end
    local args = ({
      ["Condition:set"] = { c, s, 0 },
      ["Condition:set_when"] = { c, s, b, ">", 1, 0 },
      ["Condition:count_down"] = "loop",
      ["Stream:loop_while"] = { s, c, function(t) body(t); c:set(t, 0) end },
      ["Stream:branch"] = { s, c, body, body },
      ["Stream:switch"] = { s, c, { body, body } },
      ["Stream:label"] = { s, "a", function() body(s); return 7 end },
    })[name]
    F.last = args
    if args == "loop" then
      s:loop_while(c, function(t) body(t); out = { call({ c, t, 2 }) } end)
    else
      out = { call(args) }
      if name:find("^Condition:") then s:branch(c, body) end   -- a node for the setter's condition
    end
  end)
  return table.unpack(out)
end

describe("types/cugraph.lua against the runtime", function()
  local ann = annotations("types/cugraph.lua")
  local F

  setup(function()
    F = fixtures()
    F.tmp = os.tmpname()
    F.npy = os.tmpname() .. ".npy"
    F.buf(4):save(F.npy, { 2, 2 })
    F.comm = cuda.comm_world()
    F.blas = cuda.blas()
    if H.gpu or H.sim then
      F.global = cuda.compile('__device__ int g; extern "C" __global__ void k() { g = 1; }',
                              { arch = H.gpu and nil or "sm_90" })
    end
  end)
  teardown(function()
    os.remove(F.tmp)
    os.remove(F.npy)
  end)

  it("has a call for every annotated function, and for nothing else", function()
    for name in pairs(ann) do
      if not name:find("^GLResource:") and name ~= "cuda.gl_buffer" and name ~= "cuda.gl_image"
         and name ~= "cuda.enable_peer_access" then
        assert.is_not_nil(recipes[name], "no call for " .. name)
      end
    end
    for name in pairs(recipes) do assert.is_not_nil(ann[name], "not annotated: " .. name) end
  end)

  local names = {}
  for name in pairs(recipes) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    it(name, function()
      if (name == "Comm:send" or name == "Comm:recv") and F.comm:size() == 1 then
        pending("send and recv need a peer: one rank here")
        return
      end
      if LAUNCHES[name] and not (H.gpu or H.sim) then
        pending("launches the runtime's own kernels (GPU or simulator)")
        return
      end
      if name == "Module:global" and not F.global then
        pending("a module's globals need kernels run (GPU or simulator)")
        return
      end
      if (name:find("^External") or name:find("external")) and not H.peer() then
        pending(select(2, H.peer()))
        return
      end
      local a = ann[name]
      local method = name:find(":", 1, true) ~= nil
      local fname = name:match("[.:]([%w_]+)[@%w]*$")
      local function call(args)
        local f = method and args[1][fname] or cuda[fname]
        assert.is_function(f, name)
        return f(table.unpack(args, 1, args.n or #args))
      end
      local function results(args)
        if type(recipes[name]) == "string" then
          return table.pack(special(name, F, call))
        end
        return table.pack(call(args))
      end
      local full = type(recipes[name]) == "function" and table.pack(recipes[name](F)) or nil
      local nargs = full and full.n - (method and 1 or 0)
      -- the recipe gives every parameter the annotation names (a vararg: at least one)
      if full then
        local named = #a.params
        local vararg = named > 0 and a.params[named].name == "..."
        if vararg then
          assert.is_true(nargs >= named - 1, name .. ": " .. nargs .. " arguments for " .. named .. " parameters")
        else
          assert.equals(named, nargs, name .. ": the call's arguments against the annotation's parameters")
        end
        for i, p in ipairs(a.params) do
          if p.name ~= "..." then
            assert.is_true(is(full[i + (method and 1 or 0)], p.type .. (p.opt and "?" or "")),
                           name .. ": argument " .. p.name .. " is not " .. p.type)
          end
        end
      end
      local r = results(full)
      if #a.returns == 0 then
        assert.equals(0, r.n, name .. " returns " .. r.n .. " values; its annotation none")
      else
        local open = a.returns[#a.returns].type == "..." or a.returns[#a.returns].name == "..."
        assert.is_true(open or r.n <= #a.returns, name .. " returns " .. r.n .. " values, annotated "
                       .. #a.returns)
        for i, ret in ipairs(a.returns) do
          if ret.name == "self" then
            assert.is_true(rawequal(r[i], (full or F.last)[1]), name .. ": does not return self")
          elseif ret.type ~= "..." and ret.name ~= "..." then
            assert.is_true(is(r[i], ret.type), name .. ": result " .. i .. " (" .. tostring(r[i])
                           .. ") is not " .. ret.type)
          end
        end
      end
      if not full then return end
      -- the required parameters alone
      local last = #a.params
      while last > 0 and a.params[last].opt do last = last - 1 end
      if last < #a.params and a.params[#a.params].name ~= "..." then
        local again = table.pack(recipes[name](F))
        again.n = last + (method and 1 or 0)
        call(again)
      end
      -- a plain table where a cugraph object is required raises
      for i, p in ipairs(a.params) do
        local class = p.type:match("^cugraph%.(%w+)$")
        if class and OBJECTS[class] and not p.opt then
          local bad = table.pack(recipes[name](F))
          bad[i + (method and 1 or 0)] = {}
          local ok = pcall(call, bad)
          assert.is_false(ok, name .. " took a table for " .. p.name)
        end
      end
    end)
  end
end)
