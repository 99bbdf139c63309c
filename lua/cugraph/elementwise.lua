-- cuda.elementwise and cuda.reduction: kernels from a signature and a line
-- of CUDA C, generated here and compiled with NVRTC once per source and
-- device (cuda.compile's disk cache serves later processes). Each object's
-- call is a Lua function generated for its parameter count, so a call
-- checks every argument, picks grid and block and launches without making
-- Lua garbage.
--
-- An input parameter is a Buffer (read at each element), a Scalar (read
-- once on the device, so a replay sees the value set before it) or a
-- number (by value). One kernel serves all three: each input is a pointer
-- and a value, and two bit masks say which inputs are indexed and which
-- are read through their pointer (a number's pointer is a one-element
-- buffer the kernel never reads).
local G = require "cugraph.gen"

local MAX_INPUTS = 32
local REDUCE_BLOCK = 256    -- threads of each reduction block (a power of two)
local REDUCE_ITEMS = 8      -- elements per thread before a second block is used
local REDUCE_GRID = 1024    -- at most this many partial results

local reserved = { i = true, n = true }

-- {type, name} of "f32 x, f32 y" (empty text: none). Raises at level.
local function parse_params(text, what, level)
  local list, seen = {}, {}
  if text:match("^%s*$") then return list end
  for part in (text .. ","):gmatch("([^,]*),") do
    local t, name = part:match("^%s*([%w_]+)%s+([%a_][%w_]*)%s*$")
    if not t then
      error(("%s: malformed parameter '%s' (expected a type and a name, e.g. 'f32 x')")
            :format(what, part:match("^%s*(.-)%s*$")), level + 1)
    end
    if not G.ctype[t] then
      error(("%s: unknown type '%s' of '%s' (valid: %s)"):format(what, t, name, G.type_list), level + 1)
    end
    if reserved[name] or name:find("^cg_") then
      error(("%s: '%s' cannot name a parameter (i and n are the index and length; cg_ is the runtime's)")
            :format(what, name), level + 1)
    end
    if seen[name] then error(("%s: parameter '%s' is named twice"):format(what, name), level + 1) end
    seen[name] = true
    list[#list + 1] = { type = t, name = name }
  end
  return list
end

-- got: what the caller gave (G.got), when v is an argument.
local function check_string(v, field, what, level, optional, got)
  if v == nil and optional then return nil end
  if type(v) ~= "string" or (not optional and v:match("^%s*$")) then
    error(("%s: %s must be a%s string, got %s"):format(what, field, optional and "" or " non-empty",
          got or type(v)), level + 1)
  end
  return v
end

local function check_opts(opts, valid, what, level)
  if opts == nil then return {} end
  if type(opts) ~= "table" then error(what .. ": opts must be a table, got " .. type(opts), level + 1) end
  local list = {}
  for k in pairs(valid) do list[#list + 1] = k end
  table.sort(list)
  for k in pairs(opts) do
    if not valid[k] then
      error(("%s: unknown option '%s' (valid: %s)"):format(what, tostring(k), table.concat(list, ", ")),
            level + 1)
    end
  end
  return opts
end

local function check_name(name, default, what, level)
  if name == nil then return default end
  if not G.is_ident(name) or name:find("^cg_") then
    error(("%s: opts.name must be a C identifier (it names the kernel), got %s")
          :format(what, type(name) == "string" and ("'" .. name .. "'") or type(name)), level + 1)
  end
  return name
end

-- The kernel parameters of the inputs, then the buffers after them.
local function input_params(inputs)
  local p = {}
  for j, a in ipairs(inputs) do
    local c = G.ctype[a.type]
    p[#p + 1] = ("const %s *cg_p%d, %s cg_v%d"):format(c, j, c, j)
  end
  return p
end

-- Before the loop: each input that is not indexed, read once.
local function input_scalars(inputs)
  local s = {}
  for j, a in ipairs(inputs) do
    local bit = ("0x%xu"):format(1 << (j - 1))
    s[#s + 1] = ("  const %s cg_s%d = (cg_pt & %s) ? *cg_p%d : cg_v%d;\n")
                :format(G.ctype[a.type], j, bit, j, j)
  end
  return table.concat(s)
end

-- In the loop: each input by name, for element cg_i.
local function input_values(inputs)
  local s = {}
  for j, a in ipairs(inputs) do
    local bit = ("0x%xu"):format(1 << (j - 1))
    s[#s + 1] = ("    const %s %s = (cg_ix & %s) ? cg_p%d[cg_i] : cg_s%d;\n")
                :format(G.ctype[a.type], a.name, bit, j, j)
  end
  return table.concat(s)
end

local function types_of(...)
  local t = {}
  for _, list in ipairs { ... } do
    for _, a in ipairs(list) do t[#t + 1] = type(a) == "table" and a.type or a end
  end
  return t
end

-- INFINITY and NAN as <math.h> has them (NVRTC's headers lack both).
local CONSTANTS = [[
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
]]

local function user_code(name, part, text)
  return ('#line 1 "%s: %s"\n%s\n'):format(name, part, text)
end

-- The Lua function that checks and launches, for `count` arguments (inputs
-- then outputs) and `body` (Lua text that launches, given the locals).
local function launcher(count, body, env, chunk)
  local a = {}
  for j = 1, count do a[j] = "a" .. j end
  local args = table.concat(a, ", ")
  local src = ([[
local E = ...
local input, output, start, finish, count_error, raise = E.input, E.output, E.start, E.finish, E.count_error, E.raise
local pcall, select = pcall, select
return function(self, ...)
  local c = select("#", ...)
  if c ~= %d and c ~= %d then count_error(self, c) end
  local %s, s = ...
  local n, ix, pt = -1, 0, 0
%s
end]]):format(count, count + 1, args, body)
  return assert(load(src, "=" .. chunk, "t"))(env)
end

return function(cuda)
  local dev_sms = {}
  local function grid_cap(dev)
    local c = dev_sms[dev]
    if not c then
      c = cuda.device(dev).multiprocessors * 32
      dev_sms[dev] = c
    end
    return c
  end

  -- Argument checks shared by both kinds: each raises at the user's line
  -- (level 4: arg_error, the check, the generated function, its caller;
  -- deeper by `depth` more).
  local function arg_error(self, j, msg, depth)
    local p = self.params[j]
    error(("%s: argument %d '%s' (%s%s): %s"):format(self.name, j, p.name, p.type,
          j > #self.inputs and " output" or "", msg), 4 + (depth or 0))
  end

  local function length_message(self, len, n)
    local f = self.first
    return ("%d elements, but argument %d '%s' has %d: buffers must have equal lengths")
           :format(len, f, self.params[f].name, n)
  end

  local E = { raise = G.raise }

  local function type_length(a)
    if getmetatable(a) == "cugraph.Buffer" then return a:type(), #a end
    return a:type()
  end
  --- The element type and length (a Buffer's) of a Buffer or Scalar a,
  -- argument j: a freed one is an error at the user's line, as any other
  -- argument error.
  local function describe(self, j, a)
    local ok, t, len = pcall(type_length, a)
    if not ok then arg_error(self, j, G.strip(tostring(t)), 1) end
    return t, len
  end

  --- An input: pointer, value, length so far, and the two masks.
  function E.input(self, j, a, n, ix, pt)
    local t = self.params[j].type
    local mt = getmetatable(a)
    if mt == "cugraph.Buffer" then
      local at, len = describe(self, j, a)
      if at ~= t then arg_error(self, j, "expected a cugraph.Buffer of " .. t .. ", got " .. G.what(a)) end
      if n < 0 then
        self.first = j
      elseif len ~= n then
        arg_error(self, j, length_message(self, len, n))
      end
      return a, 0, len, ix | (1 << (j - 1)), pt
    elseif mt == "cugraph.Scalar" then
      if describe(self, j, a) ~= t then arg_error(self, j, "expected a cugraph.Scalar of " .. t .. ", got " .. G.what(a)) end
      return a, 0, n, ix, pt | (1 << (j - 1))
    elseif type(a) == "number" then
      local bad = G.number_error(t, a)
      if bad then arg_error(self, j, bad) end
      return self.dummies[j], a, n, ix, pt
    end
    arg_error(self, j, "expected a cugraph.Buffer, cugraph.Scalar or number, got " .. G.what(a))
  end

  --- An output buffer (elementwise): the length so far.
  function E.output(self, j, a, n)
    local t = self.params[j].type
    if getmetatable(a) ~= "cugraph.Buffer" then
      arg_error(self, j, "expected a cugraph.Buffer of " .. t .. ", got " .. G.what(a))
    end
    local at, len = describe(self, j, a)
    if at ~= t then arg_error(self, j, "expected a cugraph.Buffer of " .. t .. ", got " .. G.what(a)) end
    if n < 0 then
      self.first = j
    elseif len ~= n then
      arg_error(self, j, length_message(self, len, n))
    end
    return len
  end

  --- The stream of a call (the front end's own without one) and whether
  -- it is that one.
  function E.start(self, s)
    if s == nil then
      G.begin_unstreamed(self.name, 3)
      return G.stream(self.dev), true
    end
    if getmetatable(s) ~= "cugraph.Stream" then
      error(("%s: argument %d (the stream): expected cugraph.Stream, got %s")
            :format(self.name, #self.params + 1, G.what(s)), 3)
    end
    return s, false
  end

  function E.finish(st, own)
    if own then
      local ok, err = pcall(st.synchronize, st)
      if not ok then G.raise(err, 3) end
    end
  end

  function E.count_error(self, c)
    local names = {}
    for j, p in ipairs(self.params) do names[j] = p.name end
    error(("%s: expected %d arguments (%s) and an optional stream, got %d")
          :format(self.name, #self.params, table.concat(names, ", "), c), 3)
  end

  local function dummies(inputs, dev)
    local d = {}
    for j, a in ipairs(inputs) do d[j] = G.call(3, G.dummy, dev, a.type) end
    return d
  end

  local function object(kind, self, call)
    local methods = kind.methods
    return setmetatable(self, {
      __name = kind.name, __index = methods, methods = methods, __metatable = kind.name, __call = call,
      __tostring = function(o) return ("%s %s (%s)"):format(kind.name, o.name, o.signature) end,
    })
  end

  ------------------------------------------------------------------------
  -- cuda.elementwise

  local Elementwise = {}
  local ew_kind = { name = "cugraph.Elementwise", methods = Elementwise }
  G.guard_methods(Elementwise, ew_kind.name, "ew")

  --- e:source() -> string: the CUDA C it compiled.
  function Elementwise.source(e) return e.src end
  --- e:kernel() -> Kernel
  function Elementwise.kernel(e) return e.k end

  local function elementwise_source(name, inputs, outputs, body, preamble)
    local p = input_params(inputs)
    for j, a in ipairs(outputs) do p[#p + 1] = ("%s *cg_o%d"):format(G.ctype[a.type], j) end
    p[#p + 1] = "unsigned cg_ix, unsigned cg_pt, unsigned long long cg_n"
    local refs = {}
    for j, a in ipairs(outputs) do
      refs[#refs + 1] = ("    %s &%s = cg_o%d[cg_i];\n"):format(G.ctype[a.type], a.name, j)
    end
    return G.includes(types_of(inputs, outputs)) .. CONSTANTS
      .. (preamble and user_code(name, "preamble", preamble) .. '#line 1 "' .. name .. '.cu"\n' or "")
      .. ('extern "C" __global__ void %s(%s) {\n'):format(name, table.concat(p, ", "))
      .. input_scalars(inputs)
      .. "  const unsigned long long cg_step = (unsigned long long)blockDim.x * gridDim.x;\n"
      .. "  for (unsigned long long cg_i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
      .. "       cg_i < cg_n; cg_i += cg_step) {\n"
      .. "    const unsigned long long i = cg_i, n = cg_n;\n"
      .. "    (void)i; (void)n;\n"
      .. input_values(inputs) .. table.concat(refs)
      .. "    {\n" .. user_code(name, "body", body) .. ";\n    }\n  }\n}\n"
  end

  --- cuda.elementwise(signature, body [, opts]) -> Elementwise
  function cuda.elementwise(...)
    local signature, body, opts = ...
    local what, n = "cuda.elementwise", select("#", ...)
    check_string(signature, "the signature", what, 2, false, G.got(n, 1, signature))
    check_string(body, "the body", what, 2, false, G.got(n, 2, body))
    opts = check_opts(opts, { name = true, preamble = true, block = true }, what, 2)
    local ins, outs = signature:match("^(.-)%->(.*)$")
    if not ins then
      error(what .. ": the signature must read 'inputs -> outputs', e.g. 'f32 x, f32 a -> f32 y', got '"
            .. signature .. "'", 2)
    end
    local inputs = parse_params(ins, what, 2)
    local outputs = parse_params(outs, what, 2)
    if #outputs == 0 then error(what .. ": the signature names no output", 2) end
    if #inputs > MAX_INPUTS then error(what .. ": more than " .. MAX_INPUTS .. " inputs", 2) end
    local params = {}
    for _, a in ipairs(inputs) do params[#params + 1] = a end
    for _, a in ipairs(outputs) do
      for _, b in ipairs(inputs) do
        if a.name == b.name then error(("%s: parameter '%s' is named twice"):format(what, a.name), 2) end
      end
      params[#params + 1] = a
    end
    local name = check_name(opts.name, "elementwise", what, 2)
    local preamble = check_string(opts.preamble, "opts.preamble", what, 2, true)
    local block = opts.block or 256
    block = type(block) == "number" and math.tointeger(block) or block
    if math.type(block) ~= "integer" or block < 32 or block > 1024 or block % 32 ~= 0 then
      error(what .. ": opts.block must be a multiple of 32 from 32 to 1024, got " .. tostring(block), 2)
    end
    local src = elementwise_source(name, inputs, outputs, body, preamble)
    local m, dev = G.call(2, G.module, src, name)
    local self = {
      name = name, signature = signature, inputs = inputs, params = params, src = src,
      k = m[name], dev = dev, block = block, cap = grid_cap(dev), first = 1,
      dummies = dummies(inputs, dev),
    }
    -- the launch: inputs' pointer and value pairs, outputs, masks, n
    local lines, pass = {}, {}
    for j = 1, #inputs do
      lines[#lines + 1] = ("  local p%d, v%d\n  p%d, v%d, n, ix, pt = input(self, %d, a%d, n, ix, pt)")
                          :format(j, j, j, j, j, j)
      pass[#pass + 1] = ("p%d, v%d"):format(j, j)
    end
    for j = #inputs + 1, #params do
      lines[#lines + 1] = ("  n = output(self, %d, a%d, n)"):format(j, j)
      pass[#pass + 1] = "a" .. j
    end
    lines[#lines + 1] = ([[
  local st, own = start(self, s)
  local block, k = self.block, self.k
  local grid = (n + block - 1) // block
  if grid > self.cap then grid = self.cap end
  local ok, err = pcall(k.launch, k, st, grid, block, %s, ix, pt, n)
  if not ok then raise(err, 2) end
  finish(st, own)]]):format(table.concat(pass, ", "))
    return object(ew_kind, self, launcher(#params, table.concat(lines, "\n"), E, name))
  end

  ------------------------------------------------------------------------
  -- cuda.reduction

  local Reduction = {}
  local red_kind = { name = "cugraph.Reduction", methods = Reduction }
  G.guard_methods(Reduction, red_kind.name, "red")

  --- red:source() -> string
  function Reduction.source(r) return r.src end
  --- red:kernels() -> Kernel, Kernel: the per-block pass and the final one.
  function Reduction.kernels(r) return r.k_part, r.k_final end

  local function reduction_source(name, inputs, d)
    local acc, out = G.ctype[d.accumulate], G.ctype[d.output]
    local B = REDUCE_BLOCK
    local tree = ([[
  cg_sh[threadIdx.x] = cg_a;
  __syncthreads();
  for (unsigned cg_k = %d; cg_k > 0; cg_k >>= 1) {
    if (threadIdx.x < cg_k) cg_sh[threadIdx.x] = cg_reduce(cg_sh[threadIdx.x], cg_sh[threadIdx.x + cg_k]);
    __syncthreads();
  }
]]):format(B // 2)
    local p = input_params(inputs)
    return G.includes(types_of(inputs, { d.accumulate, d.output })) .. CONSTANTS
      .. (d.preamble and user_code(name, "preamble", d.preamble) or "")
      .. ('#line 1 "%s.cu"\ntypedef %s cg_acc;\ntypedef %s cg_out;\n'):format(name, acc, out)
      .. "__device__ __forceinline__ cg_acc cg_reduce(cg_acc a, cg_acc b) {\n  return (cg_acc)(\n"
      .. user_code(name, "reduce", d.reduce) .. ");\n}\n"
      .. "__device__ __forceinline__ cg_acc cg_identity() {\n  return (cg_acc)(\n"
      .. user_code(name, "identity", d.identity) .. ");\n}\n"
      .. "__device__ __forceinline__ cg_out cg_post(cg_acc r, unsigned long long n) {\n"
      .. "  (void)r; (void)n;\n  return (cg_out)(\n"
      .. user_code(name, "post", d.post) .. ");\n}\n"
      .. ('extern "C" __global__ void %s_part(%s%scg_acc *cg_part, cg_out *cg_res,\n'):format(
           name, table.concat(p, ", "), #p > 0 and ", " or "")
      .. "    unsigned cg_ix, unsigned cg_pt, unsigned long long cg_n) {\n"
      .. ("  __shared__ cg_acc cg_sh[%d];\n"):format(B)
      .. input_scalars(inputs)
      .. "  cg_acc cg_a = cg_identity();\n"
      .. "  const unsigned long long cg_step = (unsigned long long)blockDim.x * gridDim.x;\n"
      .. "  for (unsigned long long cg_i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
      .. "       cg_i < cg_n; cg_i += cg_step) {\n"
      .. "    const unsigned long long i = cg_i, n = cg_n;\n"
      .. "    (void)i; (void)n;\n"
      .. input_values(inputs)
      .. "    cg_a = cg_reduce(cg_a, (cg_acc)(\n" .. user_code(name, "map", d.map) .. "));\n  }\n"
      .. tree
      .. "  if (threadIdx.x == 0) {\n"
      .. "    if (gridDim.x == 1) *cg_res = cg_post(cg_sh[0], cg_n);\n"
      .. "    else cg_part[blockIdx.x] = cg_sh[0];\n  }\n}\n"
      .. ('extern "C" __global__ void %s_final(const cg_acc *cg_part, cg_out *cg_res,\n'):format(name)
      .. "    unsigned cg_g, unsigned long long cg_n) {\n"
      .. ("  __shared__ cg_acc cg_sh[%d];\n"):format(B)
      .. "  cg_acc cg_a = cg_identity();\n"
      .. ("  for (unsigned cg_j = threadIdx.x; cg_j < cg_g; cg_j += %d) cg_a = cg_reduce(cg_a, cg_part[cg_j]);\n")
         :format(B)
      .. tree
      .. "  if (threadIdx.x == 0) *cg_res = cg_post(cg_sh[0], cg_n);\n}\n"
  end

  local function type_field(v, field, what, level, default)
    if v == nil then return default end
    if not G.ctype[v] then
      error(("%s: %s must be an element type (%s), got %s"):format(what, field, G.type_list, tostring(v)),
            level + 1)
    end
    return v
  end

  --- The result argument of a reduction: a Buffer (element 0) or Scalar.
  function E.result(self, j, a)
    local t = self.out_type
    local mt = getmetatable(a)
    if (mt ~= "cugraph.Buffer" and mt ~= "cugraph.Scalar") or describe(self, j, a) ~= t then
      arg_error(self, j, "expected a cugraph.Buffer or cugraph.Scalar of " .. t .. ", got " .. G.what(a))
    end
  end

  function E.no_length(self)
    error(self.name .. ": no input is a buffer: the length comes from the input buffers", 3)
  end

  --- cuda.reduction(spec) -> Reduction
  function cuda.reduction(...)
    local spec = ...
    local what = "cuda.reduction"
    if type(spec) ~= "table" then
      error(what .. ": expected a table of fields, got " .. G.got(select("#", ...), 1, spec), 2)
    end
    check_opts(spec, { input = true, map = true, reduce = true, identity = true, post = true,
                       output = true, accumulate = true, name = true, preamble = true }, what, 2)
    check_string(spec.input, "input", what, 2)
    local inputs = parse_params(spec.input, what, 2)
    if #inputs > MAX_INPUTS then error(what .. ": more than " .. MAX_INPUTS .. " inputs", 2) end
    local d = {}
    d.map = check_string(spec.map, "map", what, 2, true)
    if not d.map then
      if #inputs ~= 1 then error(what .. ": map is needed with more than one input", 2) end
      d.map = inputs[1].name
    end
    check_string(d.map, "map", what, 2)
    d.reduce = check_string(spec.reduce, "reduce", what, 2)
    d.post = check_string(spec.post, "post", what, 2, true) or "r"
    check_string(d.post, "post", what, 2)
    d.output = type_field(spec.output, "output", what, 2, nil)
    d.accumulate = type_field(spec.accumulate, "accumulate", what, 2, d.output or inputs[1].type)
    d.output = d.output or d.accumulate
    local id = spec.identity
    if type(id) == "number" then -- the accumulator's value, written exactly
      local v, why = G.value(d.accumulate, id)
      if v == nil then
        error(("%s: identity (accumulate %s): %s"):format(what, d.accumulate, why), 2)
      end
      d.identity = G.literal(d.accumulate, v)
    else
      d.identity = check_string(id, "identity (a number or a C expression)", what, 2)
    end
    d.preamble = check_string(spec.preamble, "preamble", what, 2, true)
    local name = check_name(spec.name, "reduction", what, 2)
    local src = reduction_source(name, inputs, d)
    local m, dev = G.call(2, G.module, src, name)
    local params = {}
    for j, a in ipairs(inputs) do params[j] = a end
    params[#params + 1] = { type = d.output, name = "result" }
    local self = {
      name = name, signature = spec.input .. " -> " .. d.output, inputs = inputs, params = params,
      src = src, k_part = m[name .. "_part"], k_final = m[name .. "_final"], dev = dev, first = 1,
      out_type = d.output, dummies = dummies(inputs, dev),
      partial = G.call(2, cuda.buffer, d.accumulate, REDUCE_GRID),
    }
    local lines, pass = {}, {}
    for j = 1, #inputs do
      lines[#lines + 1] = ("  local p%d, v%d\n  p%d, v%d, n, ix, pt = input(self, %d, a%d, n, ix, pt)")
                          :format(j, j, j, j, j, j)
      pass[#pass + 1] = ("p%d, v%d, "):format(j, j)
    end
    local r = #params
    lines[#lines + 1] = ([[
  E.result(self, %d, a%d)
  if n < 0 then E.no_length(self) end
  local st, own = start(self, s)
  local grid = (n + %d) // %d
  if grid > %d then grid = %d end
  local k, part = self.k_part, self.partial
  local ok, err = pcall(k.launch, k, st, grid, %d, %spart, a%d, ix, pt, n)
  if ok and grid > 1 then
    k = self.k_final
    ok, err = pcall(k.launch, k, st, 1, %d, part, a%d, grid, n)
  end
  if not ok then raise(err, 2) end
  finish(st, own)]]):format(r, r, REDUCE_BLOCK * REDUCE_ITEMS - 1, REDUCE_BLOCK * REDUCE_ITEMS,
                            REDUCE_GRID, REDUCE_GRID, REDUCE_BLOCK, table.concat(pass), r,
                            REDUCE_BLOCK, r)
    return object(red_kind, self, launcher(#params, table.concat(lines, "\n"), E, name))
  end
end
