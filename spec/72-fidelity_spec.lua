-- Fidelity: every form of every value instruction the simulator's decoder
-- takes (spec/support/fidelity.lua writes them from the PTX ISA's syntax
-- and asks the decoder which it runs), on edge values: zeros of both signs,
-- ones, the extremes of each type, NaNs, infinities, subnormals, shift
-- counts past the width, ties of the roundings, lanes away from a warp
-- instruction.
--
-- On the simulator (make test-sim): each form's results against a host
-- reference where one is exact (integers, bits, comparisons, conversions
-- between integers, f64 and f32 .rn arithmetic), approximate math within
-- the ISA's bounds, every opcode of the decoder's table covered. On a GPU
-- (make test-gpu): the same kernels run on the GPU and on the simulator,
-- each in its own process (spec/support/fidelity_run.lua), compared bit for
-- bit, approximate math within the bounds; the counts go to
-- build/fidelity-report.txt. The comparison also runs on the simulator
-- against itself, which checks the comparison.
local H = require "support.helper"
local F = require "support.fidelity"
local cuda = H.cuda

-- Forms of the ISA the decoder refuses, as docs/simulator.md says.
local REFUSED = {
  ["mad.hi.sat.s32"] = "mad.hi.sat", ["mul24.hi.u32"] = "mul24.hi", ["mul24.hi.s32"] = "mul24.hi",
  ["mad24.hi.u32"] = "mad24.hi", ["mad24.hi.s32"] = "mad24.hi",
}

-- Forms ptxas refuses for sm_90 (as an H200's driver did), which the
-- decoder refuses as well: mad of floats without a rounding, tanh with
-- .ftz, set of halves to f32, .sat of a bf16 conversion or of an integer
-- conversion that cannot overflow, bf16 from and to 8-bit integers.
local function ptxas_refuses(name)
  local parts, has = {}, {}
  for p in name:gmatch("[^.]+") do parts[#parts + 1] = p; has[p] = true end
  local op, d, src = parts[1], parts[#parts - 1], parts[#parts]
  if op == "mad" and (src == "f32" or src == "f64") then
    return not (has.rn or has.rz or has.rm or has.rp)
  end
  if op == "tanh" then return has.ftz == true end
  if op == "set" then return d == "f32" and (src == "f16" or src == "bf16") end
  if op ~= "cvt" then return false end
  local function int(t) return t:match("^[usb]%d+$") ~= nil end
  local function bits(t) return tonumber(t:match("%d+")) end
  if (d == "bf16" and int(src) and bits(src) == 8) or (src == "bf16" and int(d) and bits(d) == 8) then
    return true
  end
  if not has.sat then return false end
  if d == "bf16" or src == "bf16" then return true end
  if not (int(d) and int(src)) then return false end
  if d:sub(1, 1) == "s" then
    return bits(src) < bits(d) or (src:sub(1, 1) == "s" and bits(src) == bits(d))
  end
  return src:sub(1, 1) ~= "s" and bits(src) <= bits(d)
end

local SIM_LIB = H.build .. "/libcuda-sim.so"
local REPORT = H.build .. "/fidelity-report.txt"

-- Runs one side in a process of its own: forms is a file of form names or
-- "-" (the simulator's decoder picks them, written to OUT.forms). Returns
-- the results and the path of OUT.
local function side(forms, env)
  local out = os.tmpname()
  local code, text = H.run(H.quote("spec/support/fidelity_run.lua") .. " " .. H.quote(forms)
                           .. " " .. H.quote(out), env)
  assert.equals(0, code, text)
  local results = dofile(out)
  os.remove(out)
  return results, out
end

-- The comparison, the same on a GPU and on the simulator: the simulator's
-- side picks and runs the forms, the other side (this suite's driver: the
-- GPU under make test-gpu) runs the same ones; the report goes to REPORT.
local function compare_sides(title)
  local sim, out = side("-", "CUGRAPH_LUA_LIBCUDA=" .. H.quote(SIM_LIB))
  local other = side(out .. ".forms")
  os.remove(out .. ".forms")
  local per_op, bad, skipped = F.compare(other, sim)
  local report = F.report(title, per_op, bad, skipped)
  local f = assert(io.open(REPORT, "w"))
  f:write(report)
  f:close()
  return per_op, bad, skipped, report, sim, other
end

describe("fidelity: every form the decoder takes, on edge values", function()
  if not H.gpu and not H.sim then
    it("needs kernels that run", function()
      pending("the test double runs no PTX: make test-sim, make test-gpu")
    end)
    return
  end

  if H.sim then
    local accepted, refused = F.probe(cuda)
    local names = {}
    for _, f in ipairs(accepted) do names[#names + 1] = f.name end
    local results = F.run(cuda, names)

    it("covers every opcode of the decoder's table", function()
      local covered, missing = F.opcodes(), {}
      for _, op in ipairs(F.decoder_opcodes()) do
        if not covered[op] and not F.EXCLUDED[op] then missing[#missing + 1] = op end
      end
      assert.same({}, missing)
    end)

    it("refuses only the forms the docs list", function()
      local got = {}
      local want = {}
      for k, v in pairs(REFUSED) do want[k] = v end
      for _, r in ipairs(refused) do
        local ptxas = ptxas_refuses(r.form.name) and "refused by ptxas" or nil
        want[r.form.name] = want[r.form.name] or ptxas
        got[r.form.name] = REFUSED[r.form.name] or ptxas or r.message
        assert.matches("unsupported instruction", r.message)
      end
      for _, f in ipairs(accepted) do
        assert.is_false(ptxas_refuses(f.name), f.name .. " is refused by ptxas")
      end
      assert.same(want, got)
      assert.is_true(#accepted > 2500, #accepted .. " forms")
    end)

    it("runs every form it takes: a case for each", function()
      local ran = {}
      for _, r in ipairs(results) do
        assert.is_nil(r.error, r.error)
        assert.is_true(r.n > 0)
        for _, name in ipairs(r.forms) do ran[name] = true end
      end
      local without = {}
      for _, f in ipairs(accepted) do
        if not ran[f.name] then without[#without + 1] = f.name end
      end
      assert.same({}, without)
    end)

    it("gives the host references' results, approximate math within the ISA's bounds", function()
      local counts, bad = F.check(results)
      assert.same({}, bad)
      assert.is_true(counts.exact > 500000 and counts.bounded > 1000)
      print(("\n%d forms in %d launches: %d results exact against a host reference, "
             .. "%d within bounds, %d recorded only, %d undefined by PTX")
            :format(#accepted, #results, counts.exact, counts.bounded, counts.recorded,
                    counts.undefined))
    end)

    it("compares two sides in processes of their own (the GPU comparison on the simulator)", function()
      local per_op, bad, skipped, _, sim, other = compare_sides("the simulator against itself")
      assert.same({}, bad)
      assert.same({}, skipped)
      local forms = 0
      for _, c in pairs(per_op) do forms = forms + c.forms end
      assert.equals(#accepted, forms)
      -- a bit changed on one side is a difference, named
      for _, r in ipairs(other) do
        if r.forms[1] == "add.u32" then
          r.out = string.char(r.out:byte(1) ~ 1) .. r.out:sub(2)
        end
      end
      local _, bad2 = F.compare(other, sim)
      assert.equals(1, #bad2)
      assert.matches("^add%.u32%(", bad2[1])
    end)
  end

  if H.gpu then
    it("gives the GPU's results: bit for bit, approximate math within the ISA's bounds", function()
      assert.is_truthy(io.open(SIM_LIB), "build the simulator: make " .. SIM_LIB)
      local _, bad, skipped, report = compare_sides("the GPU against the simulator")
      print("\n" .. report .. "(written to " .. REPORT .. ")")
      assert.same({}, bad)
      assert.same({}, skipped)
    end)
  end
end)
