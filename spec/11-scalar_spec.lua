-- DeviceScalars: one value on the device, set on the host, read by kernels.
local H = require "support.helper"
local cuda = H.cuda

describe("cugraph.Scalar", function()
  it("round-trips exactly for every type", function()
    local values = {
      f32 = { 0.1, -2 ^ 127 * 1.5, 1.5 }, f64 = { 0.1, math.pi, -2 ^ 1000 },
      i8 = { -128, 127 }, u8 = { 0, 255 }, i16 = { -32768, 32767 },
      u16 = { 0, 65535 }, i32 = { -2147483648, 2147483647 },
      u32 = { 0, 4294967295 },
      i64 = { math.mininteger, math.maxinteger, -1 },
      u64 = { -1, math.maxinteger, math.mininteger, 0x123456789abcdef0 },
      f16 = { 0.5, -65504, 2 ^ -24 }, bf16 = { 0.5, 2 ^ 127 * 1.5, -2 ^ -133 },
    }
    for _, t in ipairs(cuda.types) do
      local s = cuda.scalar(t)
      assert.equals(0, s:get(), t)
      for _, v in ipairs(values[t]) do
        s:set(v)
        local expect = t == "f32" and string.unpack("f", string.pack("f", v)) or v
        assert.equals(expect, s:get(), t)
      end
      assert.equals(t, s:type())
    end
    assert.equals(7, cuda.scalar("i16", 7):get())
  end)

  it("refuses values that are not of its type", function()
    local s = cuda.scalar("u8")
    assert.error_matches(function() s:set("1") end, "expected number, got string")
    assert.error_matches(function() s:set(true) end, "expected number, got boolean")
    assert.error_matches(function() s:set({}) end, "expected number, got table")
    assert.error_matches(function() s:set() end, "expected number, got no value")
    assert.error_matches(function() s:set(256) end, "256 is out of range for u8")
    assert.error_matches(function() s:set(1.5) end, "expected an integer, got 1.5")
    assert.error_matches(function() cuda.scalar("i32", 2 ^ 31) end, "out of range for i32")
    assert.error_matches(function() cuda.scalar("i64", 2 ^ 63) end, "expected an integer, got 9.2233720368548e%+18")
    assert.error_matches(function() cuda.scalar("f32", 1e39) end, "out of range for f32")
    assert.error_matches(function() cuda.scalar("x") end, "unknown element type 'x'")
  end)

  it("is read by a kernel through its pointer", function()
    local k = H.kernels().add_scalar_f32
    local s = cuda.stream()
    local y = cuda.buffer("f32", 64):fill(1)
    local v = cuda.scalar("f32", 2)
    k:launch(s, 1, 64, y, v, 64)
    v:set(10)
    k:launch(s, 1, 64, y, v, 64)
    s:synchronize()
    local out = y:download()
    assert.equals(13, out[1])
    assert.equals(13, out[64])
  end)

  it("sets without allocating Lua memory", function()
    local s = cuda.scalar("u32")
    assert.equals(0, H.garbage(function(i) s:set(i) end, 10000))
  end)

  it("frees three ways and refuses use after free", function()
    local s = cuda.scalar("f64", 1)
    assert.matches("^cugraph%.Scalar f64 = 1%.0 %(0x%x+%)$", tostring(s))
    s:free()
    s:close()
    assert.equals("cugraph.Scalar (freed)", tostring(s))
    assert.error_matches(function() s:set(1) end, "attempt to use a freed cugraph.Scalar")
    assert.error_matches(function() s:get() end, "attempt to use a freed cugraph.Scalar")
    do local _ <close> = cuda.scalar("u8") end
    getmetatable(cuda.scalar("u8")) -- protected: a string, not the table
    assert.equals("cugraph.Scalar", getmetatable(cuda.scalar("u8")))
  end)
end)
