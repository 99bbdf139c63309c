-- The simulator against the GPU: spec/support/sim_compare.lua runs every
-- spec kernel, bench kernel and example kernel on fixed inputs, once on the
-- GPU and once on the simulator (build/libcuda-sim.so), each in its own
-- process, and the buffers they leave must agree: integers bit for bit,
-- floats within the tolerances below (the same PTX runs on both sides, so
-- only approximate instructions such as ex2.approx, and f64 atomics that
-- meet in another order, may differ at all). Runs under make test-gpu.
local H = require "support.helper"

-- Largest difference allowed, relative to the largest magnitude in the
-- buffer. The GPU's code generator may fuse a mul and an add that PTX
-- leaves apart (a rounding fewer), hence a few ulps anywhere;
-- model.lua's softmax and GELU go through ex2.approx and rcp.approx
-- (relative error 2^-22 each); cg.step sums f64 partial sums of several
-- blocks with atomics, in any order, and cg.step_loop's 40 iterations of
-- conjugate gradients carry any difference on.
local TOLERANCE = { f32 = 1e-6, f64 = 1e-13 }
local CASE_TOLERANCE = { model = 2e-5, ["cg.step"] = 1e-11, ["cg.step_loop"] = 1e-8 }

local FORMAT = { f32 = "<f", f64 = "<d" }

-- Differences between two result lists, as lines; and how many float
-- buffers matched bit for bit.
local function compare(gpu, sim)
  local bad, exact = {}, 0
  if #gpu ~= #sim then
    return { ("%d buffers on the GPU, %d on the simulator"):format(#gpu, #sim) }, 0
  end
  for i, g in ipairs(gpu) do
    local s = sim[i]
    local what = g[1] .. "." .. g[2]
    if s[1] ~= g[1] or s[2] ~= g[2] or #s[4] ~= #g[4] then
      bad[#bad + 1] = what .. ": not the same buffer"
    elseif s[4] == g[4] then
      if FORMAT[g[3]] then exact = exact + 1 end
    elseif not FORMAT[g[3]] then
      bad[#bad + 1] = ("%s (%s): differs"):format(what, g[3])
    else
      local fmt, size = FORMAT[g[3]], g[3] == "f32" and 4 or 8
      local tol = CASE_TOLERANCE[g[1]] or TOLERANCE[g[3]]
      local scale, worst, at = 0, 0, 0
      for pos = 1, #g[4], size do
        scale = math.max(scale, math.abs(string.unpack(fmt, g[4], pos)))
      end
      for pos = 1, #g[4], size do
        local a, b = string.unpack(fmt, g[4], pos), string.unpack(fmt, s[4], pos)
        local err = (a == b or (a ~= a and b ~= b)) and 0
                    or math.abs(a - b) / math.max(scale, 1e-300)
        if err ~= err then err = math.huge end
        if err > worst then worst, at = err, (pos - 1) // size end
      end
      if worst > tol then
        bad[#bad + 1] = ("%s (%s): element %d differs by %.3g of the buffer's " ..
                         "largest value (tolerance %g)"):format(what, g[3], at, worst, tol)
      end
    end
  end
  return bad, exact
end

describe("the simulator against the GPU", function()
  if not H.gpu then
    it("needs a GPU", function()
      pending("compares the GPU's results with the simulator's: make test-gpu")
    end)
    return
  end

  it("gives the GPU's results for every spec, bench and example kernel", function()
    local sim_lib = H.build .. "/libcuda-sim.so"
    assert.is_truthy(io.open(sim_lib), "build the simulator: make " .. sim_lib)
    local function run(env)
      local path = os.tmpname()
      local code, out = H.run(H.quote("spec/support/sim_compare.lua") .. " " ..
                              H.quote(path) .. " " .. H.quote(H.build), env)
      assert.equals(0, code, out)
      local results = dofile(path)
      os.remove(path)
      return results
    end
    local gpu = run()
    local sim = run("CUGRAPH_LUA_LIBCUDA=" .. H.quote(sim_lib))
    assert.is_true(#gpu >= 40, "only " .. #gpu .. " buffers")
    local bad, exact = compare(gpu, sim)
    assert.same({}, bad)
    print(("\n%d buffers agree; %d float buffers bit for bit"):format(#gpu, exact))
  end)
end)

return { compare = compare }
