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
local names, recipes, prepare, invoke = C.names, C.recipes, C.prepare, C.invoke
local touched = C.touched

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

  -- The script's trace (an NVTX tool attached, a CUGRAPH_LUA_PROFILE
  -- file) makes calls that allocate nothing otherwise allocate (a graph's
  -- first traced launch names its nodes): the same list again, in a child
  -- with both on.
  if not os.getenv("CUGRAPH_SPEC_TRACED") then
    it("every call again with the script's trace on", function()
      local trace = os.tmpname()
      local code, out = H.run('"$(command -v busted)" --ignore-lua spec/65-every_call_spec.lua',
        "CUGRAPH_SPEC_TRACED=1 CUGRAPH_LUA_PROFILE=" .. H.quote(trace)
        .. " NVTX_INJECTION64_PATH=" .. H.quote(H.build .. "/libnvtx-tool.so"))
      os.remove(trace)
      assert.equals(0, code, out)
      assert.matches("%d+ passed, %d+ pending[^\n]*, 0 failed", out)
    end)
  end

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
