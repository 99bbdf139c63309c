-- No object pulled out from under a call: every function and method of the
-- module (the list taken from the runtime: the module table, the methods
-- and metamethods of every type in the registry and of the front end's
-- objects), called while a finalizer runs at every allocation, which at its
-- k-th run inside the call frees one of the objects the call touches, for
-- every k the call reaches and every such object. The call either works or
-- raises "attempt to use a freed ..."; the context is never lost; ASan and
-- valgrind (make test-asan, test-valgrind) check that nothing is read after
-- it was freed. spec/support/calls.lua has a call that works for each
-- name: a name without one fails here.
local H = require "support.helper"
local cuda = H.cuda
local C = require("support.calls")(cuda, H)

-- The names of every function and method, from the runtime.
local function names()
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
local generic = { free = true, close = true, __tostring = true, __len = true,
  __index = true }

-- The calls of name: its recipe, or the list of its variants.
local function recipes(name)
  local t, method = name:match("^(%w+):([%w_]+)$")
  local r = C.calls[name]
  if not r and t and generic[method] and C.makers[t] then
    r = function(F) return C.makers[t](F), method == "__index" and "free" or nil end
  end
  if type(r) == "function" then return { r } end
  return r
end

-- The function and the arguments of the call of name by recipe, or nil
-- and why.
local function prepare(name, recipe, F)
  local t, method = name:match("^(%w+):([%w_]+)$")
  local args = table.pack(recipe(F))
  if args[1] == nil and args.n >= 2 then return nil, args[2] end
  if not t then return cuda[name:sub(6)], args end
  if args[1] == nil then return nil, "no " .. t .. " here" end
  local mt = debug.getmetatable(args[1])
  return mt.methods[method] or mt[method], args
end

-- The objects of the runtime among the arguments (and in their tables),
-- and those they stand on (user value 1: a view's buffer, a kernel's
-- module, a node's graph).
local function touched(args)
  local list, seen = {}, {}
  local function add(v, depth)
    if type(v) == "table" and depth < 2 and not getmetatable(v) then
      for _, x in pairs(v) do add(x, depth + 1) end
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
local function invoke(name, fn, args)
  local wrap = C.in_capture[name]
  if not wrap then return fn(table.unpack(args, 1, args.n)) end
  local s = first_stream(args)
  s:capture(function() wrap(fn, table.unpack(args, 1, args.n)) end):free()
end

-- Runs the call of name with a finalizer that runs at every allocation;
-- at its k-th run inside the call (not inside the Lua functions the call
-- runs) it calls on_k. Returns the runs inside, and pcall's results.
local inside = false
local function run(name, recipe, k, on_k)
  local F = C.fixtures { fn = function(entering) inside = not entering end }
  local fn, args = prepare(name, recipe, F)
  if not fn then return nil, args end
  local runs, armed = 0, true
  local mt
  mt = { __gc = function()
    if not armed then return end
    if inside then
      runs = runs + 1
      if runs == k then on_k(args) end
    end
    setmetatable({}, mt)
  end }
  collectgarbage("incremental", 1, 1000, 30)
  collectgarbage("collect")
  setmetatable({}, mt)
  local ok, err = pcall(function()
    inside = true
    invoke(name, fn, args)
    inside = false
  end)
  inside, armed = false, false
  collectgarbage("incremental", 200, 100, 13)
  collectgarbage("collect")
  return runs, ok, err, args
end

describe("every call under a finalizer at every allocation", function()
  local list = names()

  it("has a working call for every name the runtime has", function()
    local missing = {}
    for _, name in ipairs(list) do
      if not recipes(name) then missing[#missing + 1] = name end
    end
    assert.same({}, missing)
  end)

  for _, name in ipairs(list) do
    local variants = recipes(name) or {}
    for v, recipe in ipairs(variants) do
      local title = #variants > 1 and ("%s (%d of %d)"):format(name, v, #variants) or name
      it(title, function()
        if H.double and not H.sim and C.runs_kernels[name] then
          return pending("launches kernels of the runtime's own: make test-sim, test-gpu")
        end
        local runs, ok, err, args = run(name, recipe, 0)
        if runs == nil then return pending(ok) end
        assert(ok, title .. ": the call itself fails: " .. tostring(err))
        local n = #touched(args)
        if os.getenv("CUGRAPH_SPEC_VERBOSE") then
          io.stderr:write(("%s: %d runs inside, %d objects\n"):format(title, runs, n))
        end
        for k = 1, runs do
          for j = 1, n do
            local _, ok2, err2 = run(name, recipe, k, function(a)
              local o = touched(a)[j]
              if o then pcall(o.free, o) end
            end)
            if not ok2 then
              assert.matches("freed", tostring(err2),
                             ("%s: finalizer run %d freeing object %d"):format(title, k, j))
            end
            assert.is_nil(cuda.status().poisoned, title)
          end
        end
      end)
    end
  end
end)
