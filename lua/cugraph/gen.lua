-- What the front end's generated kernels share (cuda.rng, cuda.elementwise,
-- cuda.reduction): element types as C types, the module of each generated
-- source (compiled once per device of a state), a stream per device for
-- calls made without one, and checks that raise at the user's line.
local G = {}

--- C type of each element type the generated kernels take.
G.ctype = {
  f32 = "float", f64 = "double", i8 = "signed char", u8 = "unsigned char",
  i16 = "short", u16 = "unsigned short", i32 = "int", u32 = "unsigned int",
  i64 = "long long", u64 = "unsigned long long", f16 = "__half", bf16 = "__nv_bfloat16",
}
G.type_list = "f32 f64 i8 u8 i16 u16 i32 u32 i64 u64 f16 bf16"

-- Integer types: their ranges, for numbers passed by value.
local int_range = {
  i8 = { -128, 127 }, u8 = { 0, 255 }, i16 = { -32768, 32767 }, u16 = { 0, 65535 },
  i32 = { -2147483648, 2147483647 }, u32 = { 0, 4294967295 },
  i64 = { math.mininteger, math.maxinteger }, u64 = { 0, math.maxinteger },
}
local FLT_MAX, HALF_MAX, BF16_MAX = 3.4028234663852886e38, 65504.0, 3.3895313892515355e38

--- Why the number v does not fit element type t, or nil when it does. A
-- u64 takes integers up to 2^63-1 (Lua's), as everywhere in the runtime.
function G.number_error(t, v)
  local r = int_range[t]
  if r then
    local i = math.tointeger(v)
    if not i then return ("expected an integer, got %s"):format(v) end
    if i < r[1] or i > r[2] then return ("%d is out of range for %s"):format(i, t) end
    return nil
  end
  local max = t == "f32" and FLT_MAX or t == "f16" and HALF_MAX or t == "bf16" and BF16_MAX
  if max and v == v and v ~= math.huge and v ~= -math.huge and (v > max or v < -max) then
    return ("%s is out of range for %s"):format(v, t)
  end
end

--- The headers a source of these element types needs.
function G.includes(types)
  local h = {}
  for _, t in ipairs(types) do
    if t == "f16" then h.f16 = "#include <cuda_fp16.h>\n" end
    if t == "bf16" then h.bf16 = "#include <cuda_bf16.h>\n" end
  end
  return (h.f16 or "") .. (h.bf16 or "")
end

--- Installs what needs the module table and the front end's raise(e,
-- level): G.module, G.stream, G.dummy, G.begin_unstreamed, G.raise, G.call.
function G.init(cuda, raise, guard_methods)
  G.raise = raise
  -- an unknown key of a front-end object raises as the core's objects do
  G.guard_methods = guard_methods
  --- fn(...), its error raised at `level` above the caller.
  -- A position the front end gave (its own line, not the user's) is
  -- dropped first.
  function G.call(level, fn, ...)
    local ok, a, b = pcall(fn, ...)
    if not ok then
      if type(a) == "string" then
        a = a:gsub("^[^\n]-/cugraph/[%w_]+%.lua:%d+: ", "", 1)
      elseif cuda.is_error(a) then
        a.where = nil
      end
      raise(a, level + 1)
    end
    return a, b
  end

  local modules = {}   -- device ordinal -> source -> Module
  local streams = {}   -- device ordinal -> Stream for calls without one
  local dummies = {}   -- device ordinal -> type -> 1-element Buffer

  --- The Module of source on the current device, compiled at the first
  -- call (the disk cache then serves other processes).
  function G.module(source, name)
    local dev = cuda.current_device()
    local per = modules[dev]
    if not per then per = {}; modules[dev] = per end
    local m = per[source]
    if not m then
      m = cuda.compile(source, { name = name .. ".cu" })
      per[source] = m
    end
    return m, dev
  end

  --- The stream a call without one runs on, on device dev.
  function G.stream(dev)
    local s = streams[dev]
    if not s then
      s = cuda.on(dev, cuda.stream)
      streams[dev] = s
    end
    return s
  end

  --- A buffer of one element of type t on device dev: the pointer a
  -- kernel parameter gets when its value comes by value.
  function G.dummy(dev, t)
    local per = dummies[dev]
    if not per then per = {}; dummies[dev] = per end
    local b = per[t]
    if not b then
      b = cuda.on(dev, cuda.buffer, t, 1)
      per[t] = b
    end
    return b
  end

  local sync, status = cuda.synchronize, cuda.status
  --- Before a call made without a stream: waits for the device (the
  -- runtime's rule for such calls); inside a capture raises what the
  -- runtime says there, at `level` above the caller.
  function G.begin_unstreamed(what, level)
    local ok, err = pcall(sync)
    if not ok then
      if status().capturing then
        error(what .. " without a stream inside a graph capture: pass the capture stream", level + 1)
      end
      raise(err, level + 1)
    end
  end
end

--- "a C identifier" check for names that become C.
function G.is_ident(s)
  return type(s) == "string" and s:match("^[%a_][%w_]*$") ~= nil
end

--- What v is, for messages: "number", "cugraph.Buffer of i32", ...
function G.what(v)
  local mt = getmetatable(v)
  if mt == "cugraph.Buffer" or mt == "cugraph.Scalar" then return mt .. " of " .. v:type() end
  if type(mt) == "string" then return mt end
  return type(v)
end

return G
