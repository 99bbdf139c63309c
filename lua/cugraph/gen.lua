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

local element_value = require("cugraph.core").element_value

--- v as an element of type t holds it, or nil and why it cannot be one:
-- the runtime's one conversion of a number (buffers, scalars, k:launch).
G.value = element_value

--- Why the number v does not fit element type t, or nil when it does.
function G.number_error(t, v)
  local got, why = element_value(t, v)
  if got == nil then return why end
end

local floats = { f32 = true, f64 = true, f16 = true, bf16 = true }

--- A C expression of exactly v, a value of element type t (G.value's):
-- floats as hexadecimal literals (-0.0 keeps its sign), integers as C
-- reads them (-2^63 is no literal; a u64 past 2^63 is Lua's negative).
function G.literal(t, v)
  if floats[t] then
    if v ~= v then return "NAN" end
    if v == math.huge or v == -math.huge then return v > 0 and "INFINITY" or "(-INFINITY)" end
    return ("%a"):format(v)
  end
  if v == math.mininteger and t == "i64" then return "(-9223372036854775807LL - 1)" end
  if v < 0 and t == "u64" then return ("0x%xULL"):format(v) end
  return ("%d"):format(v)
end

--- What the caller gave as argument i of the n it gave, as Lua's own
-- argument errors name it: a type, or "no value" past the last.
function G.got(n, i, v)
  return i > n and "no value" or type(v)
end

--- msg without the position the front end's own files give it.
function G.strip(msg)
  return (msg:gsub("^[^\n]-/cugraph/[%w_]+%.lua:%d+: ", "", 1))
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
        a = G.strip(a)
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
