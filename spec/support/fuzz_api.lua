-- Random calls of every function and method of the module with random
-- arguments, inside and outside captures, with frees and collections
-- interleaved (spec/61-fuzz_spec.lua runs it in chunks). Seeded and
-- reproducible: CUGRAPH_FUZZ_SEED, CUGRAPH_FUZZ_COUNT (calls), and
-- CUGRAPH_FUZZ_VERBOSE=1 to print each call on stderr before it is made.
-- Every call runs under pcall; what fails the run: a crash, an error that is
-- neither a string nor a cugraph.Error, or device memory not given back
-- once everything is freed and collected. Prints "FUZZ-OK ..." at the end,
-- or "FUZZ-FAIL ..." and exits 1.
-- Run it with CUDA_DOUBLE_MEM_LIMIT small: random sizes are allocated.
local cuda = require "cugraph"

local seed = tonumber(os.getenv("CUGRAPH_FUZZ_SEED") or "1") // 1
local count = tonumber(os.getenv("CUGRAPH_FUZZ_COUNT") or "1000") // 1
local verbose = os.getenv("CUGRAPH_FUZZ_VERBOSE") == "1"
local build = os.getenv("CUGRAPH_LUA_BUILD") or "build"
math.randomseed(seed)
local R = math.random
local function pick(t) return t[R(#t)] end
local step, depth = 0, 0
local capturing -- the stream a capture body was given, while it runs

local function fail(fmt, ...)
  print(("FUZZ-FAIL seed=%d step=%d: " .. fmt):format(seed, step, ...))
  os.exit(1, false)
end

-- Objects made so far, by type; freed ones stay (using them must raise).
local kinds = { "Stream", "Buffer", "Scalar", "Event", "Module", "Kernel", "Graph", "Comm",
  "HostBuffer", "Condition", "Node", "Array", "Texture", "Surface", "ExternalMemory",
  "ExternalSemaphore" }
local pool = {}
for _, k in ipairs(kinds) do pool[k] = {} end
local function add(kind, o)
  local p = pool[kind]
  if #p < 24 then p[#p + 1] = o else p[R(#p)] = o end
  return o
end
local function anyobj()
  local p = pool[pick(kinds)]
  return p[1] and pick(p) or nil
end

-- Memory and semaphores another API exports (spec/support/peer.c: memfds);
-- its objects live as long as the process. Semaphores are only signalled:
-- a wait nothing satisfies would block the double.
local peer = package.loadlib(build .. "/peer.so", "luaopen_peer")()
assert(peer.open("memfd"))
local exported = {}

local ptxpath = build .. "/kernels.ptx"
local dotpath = os.tmpname()
local types = { "f32", "f64", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64" }
local ints = { 0, 1, 2, 3, 4, 7, 8, 16, 64, 255, 256, 1000, -1, -2, 2147483647,
  2147483648, 4294967295, 4294967296, 1 << 53, math.maxinteger, math.mininteger }
local floats = { 0.5, -0.5, 1.5, 3.0, -0.0, 1 / 0, -1 / 0, 0 / 0, 1e308, 2.0 ^ 53 }
local strings = { "", "f32", "u64", "f16", "bogus", "global", "thread_local",
  "relaxed", "table", "string", "saxpy", "noop", "iota_u32", "\0\1\2\3",
  "\127ELF\2\1\1" .. ("\0"):rep(57), "\127ELF\2\1\1" .. ("\255"):rep(200),
  "\80\237\85\186" .. ("\255"):rep(20), "\80\237\85\186\1\0\16\0" .. ("\0"):rep(16),
  ".version 7.0\n.target sm_75\n.address_size 64\n\n.visible .entry e(\n.param .u64 p\n)\n{\nret;\n}\n",
  ".version 7.0\n.target sm_75\n.visible .entry (\n", "not ptx\n",
  "float a, const float *x, float *y, int n", "f32, f32*, f32*, i32", "u64|ptr", "x\ny" }
local modes = { "global", "thread_local", "relaxed", "bogus" }

local action -- forward: one random call

-- A random Lua value of any kind.
local function value()
  local r = R(100)
  if r <= 8 then return nil
  elseif r <= 12 then return R(2) == 1
  elseif r <= 35 then return pick(ints)
  elseif r <= 42 then return pick(floats)
  elseif r <= 55 then
    local s = R(8)
    if s == 1 then return ("ab"):rep(R(0, 20000)) end
    if s == 2 then
      local b = {}
      for i = 1, R(0, 40) do b[i] = string.char(R(0, 255)) end
      return table.concat(b)
    end
    return R(3) == 1 and pick(types) or pick(strings)
  elseif r <= 65 then
    local t = R(9)
    if t == 1 then return {} end
    if t == 2 then return { 1, 2, 3 } end
    if t == 3 then return { 1.5, "x", true } end
    if t == 4 then return { 1, nil, 3 } end
    if t == 5 then
      local a = {}
      for i = 1, R(0, 300) do a[i] = R(-5, 300) end
      return a
    end
    if t == 6 then return { mode = pick(modes), upload = R(2) == 1, auto_free = R(2) == 1 } end
    if t == 7 then
      return pick { { timing = R(2) == 1 }, { stream = pool.Stream[1] and pick(pool.Stream) },
                    { dst_offset = R(0, 4), count = R(0, 4) },
                    { bogus = 1 } }
    end
    if t == 8 then return { R(0, 3), R(0, 3), R(0, 2) } end
    return setmetatable({}, { __index = function() error("fuzz: __index") end })
  elseif r <= 70 then
    local f = R(3)
    if f == 1 then return function() end end
    if f == 2 then return function() error("fuzz: closure error") end end
    return function(...) -- a capture body (or any callback): more random calls
      if depth < 2 then
        local outer = capturing
        capturing = getmetatable((...)) == "cugraph.Stream" and (...) or capturing
        depth = depth + 1
        local ok, err = pcall(function() for _ = 1, R(0, 5) do action() end end)
        depth = depth - 1
        capturing = outer
        if not ok then error(err, 0) end
      end
      return ...
    end
  elseif r <= 72 then return cuda
  elseif r <= 73 then return coroutine.create(function() end)
  else return anyobj() end
end

-- Grid and block values: a few that the double can run quickly, and bad ones.
local function dims()
  local r = R(16)
  if r <= 10 then return R(1, 4) end
  if r <= 12 then return { R(1, 2), R(1, 2), 1 } end
  return pick { 0, -1, 0.5, 1 << 32, "x", { 0, 1, 1 }, { 1, 1, 65536 }, { 1, 2 }, 2048, {} }
end

local function some(kind)
  local p = pool[kind]
  return p[1] and pick(p) or nil
end

-- A stream: most often the one being captured, while a capture runs.
local function stream()
  if capturing and R(4) > 1 then return capturing end
  return some("Stream")
end

-- An object of the kind holding elements of type t, or any of the kind.
local function typed(kind, t)
  local p, hit = pool[kind], {}
  for _, o in ipairs(p) do
    local ok, ot = pcall(o.type, o)
    if ok and ot == t then hit[#hit + 1] = o end
  end
  return hit[1] and pick(hit) or some(kind)
end

-- Parameters of the spec kernels: "b"/"s" (buffer/scalar) and element
-- type, "n" a count within every buffer made here, "x" an f32 value.
local signatures = {
  saxpy = { "x", "bf32", "bf32", "n" }, inc_i32 = { "bi32", "n" }, noop = {},
  iota_u32 = { "bu32", "n", "n" }, add_scalar_f32 = { "bf32", "sf32", "n" },
  mark_u32 = { "bu32", "su32", "n" },
}

-- Arguments a method could well take, so that calls get past the checks.
local plausible = {
  upload = function() local t = {} for i = 1, R(0, 16) do t[i] = R(0, 9) end
                      return { t, R(0, 2), R(2) == 1 and stream() or nil } end,
  download = function() return { pick { "table", "string" }, R(0, 2), R(0, 8) } end,
  fill = function() return { R(0, 9), R(2) == 1 and stream() or nil } end,
  copy = function() return { some("Buffer"), R(2) == 1 and stream() or nil } end,
  set = function() return { R(0, 9) } end,
  record = function() return { stream() } end,
  elapsed = function() return { some("Event") } end,
  wait = function() return { R(2) == 1 and stream() or some("Event") } end,
  capture = function() return { value(), R(3) == 1 and { mode = pick(modes) } or nil } end,
  update = function() return { value() } end,
  replay = function() return { R(0, 3), stream() } end,
  dot = function() return { dotpath, R(2) == 1 } end,
  profile = function()
    return { R(2) == 1 and R(1, 3) or { n = R(1, 3), trace = R(2) == 1 and dotpath or nil } }
  end,
  kernel = function() return { pick { "saxpy", "noop", "inc_i32", "mark_u32", "x" } } end,
  save = function() return { dotpath .. ".npy", R(2) == 1 and { R(1, 4) } or nil } end,
  view = function() return { R(0, 8), R(2) == 1 and R(1, 8) or nil, R(2) == 1 and pick(types) or nil } end,
  download_into = function() return { some("HostBuffer"), R(0, 2), R(2) == 1 and stream() or nil } end,
  rebind = function() return { some("Buffer"), some("Buffer") } end,
  buffer = function()
    return { pick(types), pick { 1, 4, 64, 1024, 0, -1 }, R(2) == 1 and pick { 0, 4, 8, 3, -4, 1 << 40 } or nil }
  end,
  array = function()
    return { pick { "f32", "u8x4", "f32x3", "i16x2" }, R(1, 8), R(2) == 1 and R(1, 8) or nil,
             R(2) == 1 and { surface = R(2) == 1, offset = pick { 0, 64, 7, 1 << 20 } } or nil }
  end,
  signal_external = function()
    return { some("ExternalSemaphore"), pick { R(0, 9), some("Scalar") or 1, -1, 1.5, nil } }
  end,
  texture = function()
    return { R(2) == 1 and {} or { filter = pick { "point", "linear", "cubic" },
                                   address = pick { "clamp", "wrap", "border", { "mirror" }, 3 },
                                   normalized = R(2) == 1, read = pick { "element", "normalized" } } }
  end,
  copy2d = function()
    return { pick { some("Buffer"), some("Array"), some("HostBuffer") }, R(1, 8), R(1, 4),
             R(2) == 1 and { stream = stream(), src_x = R(0, 2), dst_y = R(0, 2) } or nil }
  end,
  copy3d = function()
    return { pick { some("Buffer"), some("Array") }, R(1, 4), R(1, 4), R(1, 3),
             R(2) == 1 and { stream = stream(), src_z = R(0, 1) } or nil }
  end,
  node = function() return { R(1, 4) } end,
  enable = function() return { R(2) == 1 } end,
  set_when = function() return { stream(), some("Buffer"), pick { "<", ">", "==", "~=", "bogus" },
                                 pick(ints), R(0, 2) } end,
  count_down = function() return { stream(), R(0, 4) } end,
  label = function() return { "l" .. R(9), value() } end,
  loop_while = function() return { some("Condition"), value() } end,
  branch = function() return { some("Condition"), value(), R(2) == 1 and value() or nil } end,
  switch = function() return { some("Condition"), { value(), value() } } end,
  reload = function() return { pick { "not ptx\n", strings[#strings - 5] } } end,
  shared = function() return { pick { 0, 1024, 65536, 300000 } } end,
  launch = function(k)
    local a = { stream(), dims(), dims() }
    local ok, name = pcall(function() return k:name() end) -- a Graph has no name
    local sig = ok and signatures[name]
    if sig and R(4) > 1 then
      for i, p in ipairs(sig) do
        a[3 + i] = p == "n" and R(0, 16) or p == "x" and 2.0
                   or typed(p:sub(1, 1) == "b" and "Buffer" or "Scalar", p:sub(2))
      end
      return a
    end
    for i = 4, R(3, 6) do
      a[i] = pick { some("Buffer") or 1, some("Scalar") or 1, R(0, 16), 2.0, value() }
    end
    return a
  end,
}

local function args(n)
  local a = {}
  for i = 1, n do a[i] = value() end
  return a, n
end

local function describe_value(v)
  if type(v) == "string" then return ("%q"):format(#v > 40 and v:sub(1, 40) .. "..." or v) end
  return tostring(v)
end

local methods = {
  Stream = { "synchronize", "query", "wait", "handle", "capture", "free", "close", "label",
             "loop_while", "branch", "switch", "priority", "signal_external" },
  Buffer = { "upload", "download", "fill", "copy", "type", "bytes", "address", "free", "close",
             "view", "parent", "download_into", "save", "copy2d", "copy3d", "dlpack",
             "prefetch", "advise", "managed", "pitch", "shape" },
  Scalar = { "set", "get", "type", "address", "free", "close" },
  Event = { "record", "synchronize", "query", "elapsed", "free", "close" },
  Module = { "kernel", "kernels", "free", "close", "saxpy", "noop", "inc_i32", "bogus", "reload",
             "global" },
  Kernel = { "launch", "shared", "name", "signature", "params", "free", "close", "config", "programmatic" },
  Graph = { "launch", "replay", "upload", "nodes", "dot", "update", "launches", "id", "free", "close",
            "rebind", "node", "handle", "profile", "memory" },
  Comm = { "all_reduce", "reduce", "broadcast", "all_gather", "reduce_scatter", "send", "recv",
           "rank", "size", "free", "close" },
  HostBuffer = { "set", "totable", "tostring", "bytes", "type", "free", "close", "copy2d" },
  Condition = { "set", "set_when", "count_down", "default", "free", "close" },
  Node = { "set", "enable", "enabled", "info", "index", "handle", "free", "close" },
  Array = { "shape", "format", "bytes", "copy2d", "copy3d", "texture", "surface", "free",
            "close" },
  Texture = { "array", "handle", "free", "close" },
  Surface = { "array", "handle", "free", "close" },
  ExternalMemory = { "buffer", "array", "size", "handle", "free", "close" },
  ExternalSemaphore = { "kind", "handle", "free", "close" },
}
local metamethods = { "__gc", "__close", "__tostring", "__len", "__index", "__call" }
local funcs = { "buffer", "scalar", "stream", "event", "module", "device", "device_count",
  "synchronize", "status", "entries", "select", "on", "current_device", "device_of",
  "can_access_peer", "enable_peer_access", "comm_world", "host_buffer", "condition",
  "memory", "trim", "load", "array", "managed", "gl_image" }

-- The calls, as (description, function, arguments...) for call().
local makers = {
  function() -- a well-formed object, so that methods have something to work on
    local r = R(8)
    if r == 8 then
      local q = R(8)
      if q == 7 then
        local m = peer.memory(R(1, 16) * 256)
        exported[#exported + 1] = m
        return "external memory", function()
          return add("ExternalMemory", cuda.external_memory(m:fd(), m:size()))
        end
      end
      if q == 8 then
        local t = peer.semaphore(R(2) == 1 and "timeline" or "binary")
        exported[#exported + 1] = t
        return "external semaphore", function()
          return add("ExternalSemaphore", cuda.external_semaphore(t:fd(), pick { "timeline", "binary" }))
        end
      end
      if q == 1 then return "comm", function() return add("Comm", cuda.comm_world()) end end
      if q == 2 then
        local t, n = pick { "f32", "i32", pick(types) }, R(1, 64)
        return "host buffer", function() return add("HostBuffer", cuda.host_buffer(t, n)) end
      end
      if q == 3 then
        return "condition", function() return add("Condition", cuda.condition(R(0, 2) > 0 and R(0, 3) or nil)) end
      end
      if q == 4 then
        local g = pool.Graph[1] and pick(pool.Graph)
        return "node", function() return add("Node", g:node(R(1, 3))) end
      end
      if q == 6 then
        local f = pick { "f32", "u8x4", "i32x2", "f16", "f64", "f32x3" }
        local w, h, d = R(1, 16), R(0, 8), R(0, 3)
        return "array", function()
          return add("Array", cuda.array(f, w, h > 0 and h or nil, h > 0 and d > 0 and d or nil,
                                         R(3) == 1 and { surface = R(2) == 1 } or nil))
        end
      end
      if q == 5 then
        local b = some("Buffer")
        return "view", function() return add("Buffer", b:view(R(0, 8), R(2) == 1 and R(1, 8) or nil)) end
      end
      local st, t = stream(), pick { "f32", "i32" }
      return "stream-ordered buffer", function()
        return add("Buffer", cuda.buffer(t, R(16, 64), { stream = st }))
      end
    end
    if r == 1 then
      local t, n = pick { "f32", "f32", "i32", "u32", pick(types) }, R(16, 300)
      return "buffer", function() return add("Buffer", cuda.buffer(t, n)) end
    elseif r == 2 then
      local t = pick { "f32", "u32", pick(types) }
      return "scalar", function() return add("Scalar", cuda.scalar(t, R(0, 9))) end
    elseif r == 3 then return "stream", function() return add("Stream", cuda.stream()) end
    elseif r == 4 then return "event", function() return add("Event", cuda.event()) end
    elseif r == 5 then return "module", function() return add("Module", cuda.load_module(ptxpath)) end
    elseif r == 6 then
      local m = pool.Module[1] and pick(pool.Module)
      local name = pick { "saxpy", "inc_i32", "noop", "iota_u32", "add_scalar_f32", "mark_u32",
                          "oob_write", "dims_u32", "pair_sum" }
      return "kernel " .. name, function() return add("Kernel", m[name]) end
    end
    local s, body = some("Stream"), value()
    if R(2) == 1 then -- a body that records work among its random calls
      local b, random = some("Buffer"), body
      body = function(st)
        if type(random) == "function" then random(st) end
        b:fill(R(0, 9), st)
        if type(random) == "function" then random(st) end
      end
    end
    local opts = R(3) == 1 and value() or nil
    return "capture", function() return add("Graph", s:capture(body, opts)) end
  end,
  function() -- a method of an object, with random arguments
    local kind = pick(kinds)
    local o = pool[kind][1] and pick(pool[kind])
    if not o then return "nothing", function() end end
    local name = kind == "Kernel" and R(2) == 1 and "launch" or pick(methods[kind])
    local a, n
    if plausible[name] and (R(3) > 1 or name == "launch" or name == "replay"
                            or name == "dot" or name == "save" or name == "profile") then
      a = plausible[name](o)
      n = R(0, 1) + #a
    else
      a, n = args(R(0, 4))
    end
    return kind .. ":" .. name .. "(" .. n .. " args)", function()
      local f = o[name]
      if type(f) ~= "function" then return f end
      local r = f(o, table.unpack(a, 1, n))
      if kind == "Array" and (name == "texture" or name == "surface") then
        add(name == "texture" and "Texture" or "Surface", r)
      elseif kind == "ExternalMemory" and (name == "buffer" or name == "array") then
        add(name == "buffer" and "Buffer" or "Array", r)
      end
      return r
    end
  end,
  function() -- a method called on the wrong object
    local kind = pick(kinds)
    local o = pool[kind][1] and pick(pool[kind])
    if not o then return "nothing", function() end end
    local name = pick(methods[kind])
    if name == "dot" or name == "save" or name == "profile" then
      name = "nodes" -- a random path would be written, or 3 * 2^53 replays run
    end
    local a, n = args(R(0, 3))
    if name == "replay" and type(a[2]) == "number" and a[2] > 3 then
      a[2] = 3 -- a graph as self replays a[2] times: 2^53 would never end
    end
    return kind .. ":" .. name .. " on " .. describe_value(a[1]), function()
      local f = o[name]
      if type(f) == "function" then return f(table.unpack(a, 1, n)) end
    end
  end,
  function() -- a metamethod by hand
    local o = anyobj()
    if not o then return "nothing", function() end end
    local name = pick(metamethods)
    local a, n = args(R(0, 2))
    return "metamethod " .. name .. " of " .. tostring(o), function()
      local f = debug.getmetatable(o)[name]
      if type(f) == "function" then return f(o, table.unpack(a, 1, n)) end
    end
  end,
  function() -- a function of the module with random arguments
    local name = pick(funcs)
    local a, n = args(R(0, 3))
    if name == "select" and (type(a[1]) ~= "number" or R(4) > 1) then a[1] = 0 end
    if name == "module" and type(a[1]) == "string" and not a[1]:find("\n") then a[1] = ptxpath end
    if name == "buffer" and math.type(a[2]) == "integer" and a[2] > 1 << 24 then a[2] = 1 << 24 end
    if name == "host_buffer" and math.type(a[2]) == "integer" and a[2] > 1 << 20 then
      a[2] = 1 << 20 -- the double's pinned memory is the host's, unlimited: 2^31 f32 are 8 GiB
    end
    return "cuda." .. name .. "(" .. n .. " args)", function()
      local r = { cuda[name](table.unpack(a, 1, n)) }
      for _, v in ipairs(r) do
        local mt = getmetatable(v)
        if type(mt) == "string" and mt:find("^cugraph%.") then add(mt:sub(9), v) end
      end
    end
  end,
  function() -- the collector, and objects dropped
    local r = R(4)
    if r == 1 then return "collect", function() collectgarbage() end end
    if r == 2 then return "step", function() collectgarbage("step", R(0, 64)) end end
    local p = pool[pick(kinds)]
    return "drop", function() if p[1] then table.remove(p, R(#p)) end end
  end,
}

local function check(ok, err, what)
  if ok or type(err) == "string" then return end
  if type(err) == "table" and tostring(err) and err.api and err.code and err.name and err.message then
    return
  end
  fail("%s raised a %s that is neither a string nor a cugraph.Error: %s", what, type(err),
       tostring(err))
end

local weights = { 3, 6, 1, 1, 1, 1 } -- of the makers, in order
local weighted = {}
for i, w in ipairs(weights) do
  for _ = 1, w do weighted[#weighted + 1] = makers[i] end
end

function action()
  local what, f = pick(weighted)()
  step = step + 1
  if verbose then io.stderr:write(step, " ", what, "\n") end
  if depth > 0 then return f() end -- inside a capture body: errors end the capture
  check(pcall(f), what)
end

local start = cuda.device().free_memory
for _ = 1, count do action() end

-- Everything freed (graphs first) and collected: device memory comes back.
for _, kind in ipairs { "Node", "Graph", "Kernel", "Event", "Scalar", "Condition", "Buffer",
                        "HostBuffer", "Texture", "Surface", "Array", "Comm", "Stream",
                        "Module" } do
  for _, o in ipairs(pool[kind]) do
    if kind ~= "Kernel" then check(pcall(o.free, o), "free of " .. tostring(o)) end
  end
  pool[kind] = nil
end
collectgarbage()
collectgarbage()
os.remove(dotpath)
-- a wait that timed out above holds frees back until a wait sees its work done
pcall(cuda.synchronize)
local st = cuda.status()
if st.poisoned then
  print(("FUZZ-OK seed=%d calls=%d (poisoned: %s)"):format(seed, step, st.poisoned))
else
  local now = cuda.device().free_memory
  if now ~= start then
    fail("%d bytes of device memory not given back (hung: %s, held frees: %d)", start - now,
         st.hung, st.held_frees)
  end
  print(("FUZZ-OK seed=%d calls=%d"):format(seed, step))
end
