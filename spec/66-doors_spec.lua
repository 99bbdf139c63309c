-- One door for device addresses: every call of the module that uses a
-- buffer as device memory (the list taken from the runtime, as spec/65
-- takes it; spec/support/calls.lua marks those buffers), given in each such
-- place every kind of buffer that device work may not use now
-- (spec/support/doors.lua). Each is refused with a Lua error before the
-- driver is called: no driver error, no lost context. Buffers of the wrong
-- size or element type are refused or used within their bounds (ASan and
-- valgrind check the bounds on the test double, whose device memory is
-- host memory).
local H = require "support.helper"
local cuda = H.cuda
local D = require("support.doors")(cuda, H)

describe("every door for device memory", function()
  local doors = D.doors()
  for _, d in ipairs(doors) do
    for slot = 1, d.nmem do
      for _, kind in ipairs(D.kinds) do
        local title = ("%s, buffer %d: %s"):format(d.title, slot, kind.name)
        it(title, function()
          local what, err = D.try(d, slot, kind)
          if what == "pending" then return pending(err) end
          assert.are_not.equal("driver", what, title .. ": " .. tostring(err))
          if kind.refused then assert.equals("refused", what, title) end
          assert.is_nil(cuda.status().poisoned, title)
          cuda.synchronize()
        end)
      end
    end
  end

  -- in a process of two devices, where the first cannot reach the second
  it("refuses a buffer of a device without peer access at every door", function()
    if not H.double then
      return pending("the test double denies peer access (CUDA_DOUBLE_NO_PEER)")
    end
    local code, out = H.script([[
      package.path = "spec/?.lua;" .. package.path
      local H = require "support.helper"
      local D = require("support.doors")(H.cuda, H)
      local n = 0
      for _, d in ipairs(D.doors()) do
        for slot = 1, d.nmem do
          local what, err = D.try(d, slot, D.other_device)
          if what ~= "refused" and what ~= "pending" then
            print(("%s, buffer %d: %s %s"):format(d.title, slot, what, tostring(err)))
          end
          n = n + 1
        end
      end
      print("tried " .. n)
    ]], "CUDA_DOUBLE_DEVICES=2 CUDA_DOUBLE_NO_PEER=1")
    assert.equals(0, code, out)
    assert.matches("^tried %d+\n$", out)
  end)
end)
