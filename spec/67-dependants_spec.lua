-- No object pulled out from under the objects that stand on it: every call
-- of the module that makes an object standing on another (its user value 1:
-- a view on its buffer, a texture on its array, a mapping on its external
-- memory, a node on its graph; the list found by running every call the
-- runtime has, spec/support/calls.lua), then the other's __gc run by hand,
-- then every method of the new object and its free. Each call works or
-- raises a clear error, the context is never lost, ASan and valgrind (make
-- test-asan, test-valgrind) see nothing read after it was freed, and the
-- other is released once the last object standing on it has closed.
local H = require "support.helper"
local cuda = H.cuda
local C = require("support.calls")(cuda, H)

local function is_object(v)
  local mt = getmetatable(v)
  return type(v) == "userdata" and type(mt) == "string" and mt:match("^cugraph%.%u") ~= nil
end

-- The objects the call of name (by recipe) makes that stand on one of its
-- arguments: { child, parent } pairs, with the fixtures (kept alive).
local function dependants(name, recipe)
  local F = C.fixtures()
  local fn, args = C.prepare(name, recipe, F)
  if not fn then return {}, F end
  local res = table.pack(pcall(C.invoke, name, fn, args))
  cuda.synchronize()
  local wanted = {}
  for i = 1, args.n do
    if is_object(args[i]) then wanted[args[i]] = true end
  end
  local pairs_ = {}
  for i = 2, res.n do
    local r = res[i]
    if res[1] and is_object(r) then
      local up = debug.getuservalue(r, 1)
      if wanted[up] then pairs_[#pairs_ + 1] = { r, up } end
    end
  end
  return pairs_, F, args
end

-- The methods of a type, from the runtime, with the recipes that give them
-- an object of that type first.
local function methods_of(kind)
  local out = {}
  for _, name in ipairs(C.names()) do
    local t, m = name:match("^(%w+):([%w_]+)$")
    if t == kind and m ~= "free" and m ~= "close" and C.recipes(name) then
      out[#out + 1] = name
    end
  end
  return out
end

local function check_error(err, what)
  if type(err) == "string" then return end
  assert(type(err) == "table" and err.api and err.message,
         what .. ": raised neither a string nor a cugraph.Error: " .. tostring(err))
end

describe("objects that stand on another, after its __gc by hand", function()
  local found = {}
  for _, name in ipairs(C.names()) do
    for _, recipe in ipairs(C.recipes(name) or {}) do
      local list = dependants(name, recipe)
      for _, p in ipairs(list) do
        local child, parent = getmetatable(p[1]):sub(9), getmetatable(p[2]):sub(9)
        found[#found + 1] = { name = name, recipe = recipe, child = child, parent = parent }
      end
      collectgarbage()
    end
  end

  it("are found among the calls the runtime has", function()
    local kinds = {}
    for _, f in ipairs(found) do kinds[f.parent .. " <- " .. f.child] = true end
    -- every view-making call the test double can run; the simulator and the
    -- GPU add module globals, and the peer API mappings of external memory
    for _, k in ipairs { "Buffer <- Buffer", "Array <- Texture", "Array <- Surface",
                         "Graph <- Node", "DLTensor <- Buffer" } do
      assert(kinds[k], "no call makes " .. k)
    end
  end)

  for _, f in ipairs(found) do
    it(("%s: %s on %s"):format(f.name, f.child, f.parent), function()
      local made, _, args = dependants(f.name, f.recipe)
      assert(made[1], f.name .. " made no dependant this time")
      local child, parent = made[1][1], made[1][2]
      debug.getmetatable(parent).__gc(parent)
      collectgarbage()
      for _, m in ipairs(methods_of(f.child)) do
        for _, recipe in ipairs(C.recipes(m)) do
          local F = C.fixtures()
          local fn, a = C.prepare(m, recipe, F)
          if fn then
            a[1] = child
            local ok, err = pcall(C.invoke, m, fn, a)
            if not ok then check_error(err, m) end
            pcall(cuda.synchronize)
            assert.is_nil(cuda.status().poisoned, m)
          end
        end
        collectgarbage()
      end
      cuda.synchronize()
      assert.is_nil(cuda.status().poisoned, f.name)
      -- the child, and whatever else the call made on the parent
      for i = 1, args.n do
        if is_object(args[i]) and args[i] ~= parent then pcall(args[i].free, args[i]) end
      end
      assert(pcall(child.free, child))
      collectgarbage()
      collectgarbage()
      assert.matches("%(freed%)", tostring(parent), f.name .. ": the parent outlives its last dependant")
    end)
  end
end)
