-- The number and string classes of RELIABILITY.md, each walked over what
-- the runtime lists itself: sizes, pitches and offsets checked for
-- overflow; one conversion of a Lua number per element type, the same in
-- generated kernels as in k:launch; numbers written into generated CUDA C
-- read back exactly; names and paths refuse NUL bytes; a string that
-- reads as a number is never taken as raw bytes; environment variables
-- checked and named.
local H = require "support.helper"
local cuda = H.cuda
local RUN = H.gpu or H.sim

-- The valid keys an option table of fn takes, as its error for an unknown
-- key lists them (the runtime's own list).
local function option_keys(fn, ...)
  local args = table.pack(...)
  args[args.n + 1] = { ["not an option"] = true }
  local err = tostring(H.error_of(fn, table.unpack(args, 1, args.n + 1)))
  local list = assert(err:match("%(valid: ([^)]*)%)"), err)
  local keys = {}
  for k in list:gmatch("[%w_]+") do keys[#keys + 1] = k end
  return keys
end

describe("sizes, pitches and offsets", function()
  local huge = { 1 << 62, (1 << 62) + 1, (1 << 61) + 1, math.maxinteger, 1 << 32 }

  it("of every copy2d and copy3d option overflow into an error, never a wrapped copy", function()
    local b, src = cuda.buffer("f32", 64):fill(1), cuda.buffer("f32", 64):fill(2)
    local h = cuda.host_buffer("f32", 64)
    for _, three in ipairs { false, true } do
      local name = three and "copy3d" or "copy2d"
      local copy = b[name]
      local function box(dst, from, opts)
        if three then return copy(dst, from, 1, 1, 2, opts) end
        return copy(dst, from, 1, 1, opts)
      end
      local keys = three and option_keys(copy, b, src, 1, 1, 1) or option_keys(copy, b, src, 1, 1)
      assert.is_true(#keys >= 10)
      for _, key in ipairs(keys) do
        -- (a rectangle has one slice: z and the slice height are copy3d's)
        local slices = key:find("_z$") or key:find("_height$")
        if key ~= "stream" and (three or not slices) then
          for _, pair in ipairs { { b, src }, { b, h }, { h, src } } do
            for _, v in ipairs(huge) do
              local ok, err = pcall(box, pair[1], pair[2], { [key] = v })
              assert.is_false(ok, ("%s {%s = %d} ran"):format(name, key, v))
              assert.matches(name .. ": ", tostring(err))
            end
          end
        end
      end
    end
    assert.same({ 1, 1 }, b:download("table", 0, 2))
  end)

  it("of an array mapped from external memory overflow into an error before the driver", function()
    local p, why = H.peer()
    if not p then pending(why) end
    local m = p.memory(4096)
    local e = cuda.external_memory(m:fd(), m:size())
    -- 2^30 x 2^30 x 2^4 texels of 16 bytes: 2^68 bytes, 0 once wrapped
    assert.error_matches(function() e:array("f32x4", 1 << 30, 1 << 30, 1 << 4) end,
      "mem:array: 1073741824 x 1073741824 x 16 texels of 16 bytes overflow a size")
    e:free()
  end)
end)
