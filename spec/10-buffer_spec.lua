-- Typed device buffers: creation, transfers, fills, copies, bounds, types.
local H = require "support.helper"
local cuda = H.cuda

describe("cugraph.Buffer", function()
  it("round-trips a table for every type", function()
    local values = {
      f32 = { 1.5, -2.25, 2 ^ 127 * 1.5, 0 }, f64 = { math.pi, -1e300, 2 ^ -1074, 0 },
      i8 = { -128, 127, 0, -1 }, u8 = { 0, 255, 1, 128 },
      i16 = { -32768, 32767, 0, -2 }, u16 = { 0, 65535, 7, 32768 },
      i32 = { -2147483648, 2147483647, 0, -3 }, u32 = { 0, 4294967295, 9, 1 << 31 },
      i64 = { math.mininteger, math.maxinteger, 0, -4 },
      u64 = { 0, -1, math.maxinteger, math.mininteger },
      f16 = { 1.5, -65504, 2 ^ -24, 0 }, bf16 = { 1.5, -2 ^ 127 * 1.5, 2 ^ -133, 0 },
    }
    for _, t in ipairs(cuda.types) do
      local b = cuda.buffer(t, 4)
      b:upload(values[t])
      assert.same(values[t], b:download(), t)
      assert.equals(t, b:type())
      assert.equals(4, #b)
      b:free()
    end
  end)

  it("is created from a table or a binary string", function()
    local b = cuda.buffer("i32", { 5, 6, 7 })
    assert.equals(3, #b)
    assert.same({ 5, 6, 7 }, b:download())
    local s = string.pack("<i4i4", -1, 99)
    local c = cuda.buffer("i32", s)
    assert.same({ -1, 99 }, c:download())
    assert.equals(s, c:download("string"))
  end)

  it("uploads and downloads at an offset", function()
    local b = cuda.buffer("u16", 6):fill(0)
    b:upload({ 1, 2 }, 3)
    assert.same({ 0, 0, 0, 1, 2, 0 }, b:download())
    b:upload(string.pack("<I2", 9), 5)
    assert.same({ 2, 9 }, b:download("table", 4, 2))
    assert.equals(string.pack("<I2I2", 1, 2), b:download("string", 3, 2))
    assert.same({}, b:download("table", 6))
  end)

  it("fills every element, 8-byte types too", function()
    for _, t in ipairs(cuda.types) do
      local b = cuda.buffer(t, 1000)
      local v = (t == "f32" or t == "f64") and 0.5 or (t:sub(1, 1) == "i" and -7 or 7)
      b:fill(v)
      local got = b:download()
      assert.equals(1000, #got)
      for i = 1, 1000, 111 do assert.equals(v, got[i], t) end
      assert.equals(v, got[1000])
    end
    local u = cuda.buffer("u64", 3):fill(-1)
    assert.same({ -1, -1, -1 }, u:download())
  end)

  it("copies between buffers, on a stream too", function()
    local s = cuda.stream()
    local a = cuda.buffer("f64", { 1, 2, 3 })
    local b = cuda.buffer("f64", 3):fill(0)
    b:copy(a, s)
    s:synchronize()
    assert.same({ 1, 2, 3 }, b:download())
    assert.error_matches(function() b:copy(cuda.buffer("f32", 3)) end, "must match")
    assert.error_matches(function() b:copy(cuda.buffer("f64", 4)) end, "must match")
  end)

  it("shows its type, size and address", function()
    local b = cuda.buffer("f32", 8)
    assert.matches("^cugraph%.Buffer f32%[8%] %(0x%x+%)$", tostring(b))
    assert.equals(32, b:bytes())
    assert.is_true(b:address() ~= 0)
    b:free()
    assert.equals("cugraph.Buffer (freed)", tostring(b))
  end)

  it("refuses bad sizes before the driver is called", function()
    assert.error_matches(function() cuda.buffer("f32", 0) end, "size must be positive")
    assert.error_matches(function() cuda.buffer("f32", -1) end, "size must be positive")
    assert.error_matches(function() cuda.buffer("f32", 0 / 0) end, "number has no integer representation")
    assert.error_matches(function() cuda.buffer("f32", math.huge) end, "number has no integer representation")
    assert.error_matches(function() cuda.buffer("f32", 2.5) end, "number has no integer representation")
    assert.error_matches(function() cuda.buffer("f64", math.maxinteger) end, "overflows")
    assert.error_matches(function() cuda.buffer("f8", 4) end, "unknown element type 'f8'; expected f32 f64")
    assert.error_matches(function() cuda.buffer("f32", {}) end, "no elements")
    assert.error_matches(function() cuda.buffer("f32") end, "number expected, got no value")
  end)

  it("checks every upload", function()
    local b = cuda.buffer("u8", 4)
    assert.error_matches(function() b:upload({ 1, 2, 3, 4, 5 }) end,
                         "5 elements at offset 0 pass the end of the buffer %(4 elements%)")
    assert.error_matches(function() b:upload({ 1, 2 }, 3) end, "2 elements at offset 3 pass the end")
    assert.error_matches(function() b:upload({ 1 }, 5) end, "offset 5 out of range: element offsets are 0%-based, 0..4")
    assert.error_matches(function() b:upload({ 1 }, -1) end, "offset %-1 out of range")
    assert.error_matches(function() b:upload({ 1, nil, 3 }) end, "element 2 is nil")
    assert.error_matches(function() b:upload({ 1, "x" }) end, "element 2: expected number, got string")
    assert.error_matches(function() b:upload({ 1, 256 }) end, "element 2: 256 is out of range for u8")
    assert.error_matches(function() b:upload({ -1 }) end, "element 1: %-1 is out of range for u8")
    assert.error_matches(function() b:upload({ 1.5 }) end, "element 1: expected an integer, got 1.5")
    assert.error_matches(function() b:upload("12345") end, "pass the end")
    local f = cuda.buffer("f32", 2)
    assert.error_matches(function() f:upload({ 1e39 }) end, "out of range for f32")
    assert.error_matches(function() f:upload("abc") end, "not a whole number of f32")
    assert.error_matches(function() b:download("json") end, "invalid option 'json'")
    assert.error_matches(function() b:download("table", 0, 5) end, "pass the end")
  end)

  it("frees three ways, idempotently", function()
    local b = cuda.buffer("f32", 4)
    b:free()
    b:free()
    b:close()
    local mt = getmetatable(b)
    assert.equals("cugraph.Buffer", mt) -- protected
    do
      local c <close> = cuda.buffer("f32", 4)
      assert.equals(4, #c)
    end
    local weak = setmetatable({ cuda.buffer("f32", 4) }, { __mode = "v" })
    collectgarbage()
    assert.is_nil(weak[1])
  end)

  it("refuses every method after free, without a crash", function()
    local b = cuda.buffer("f32", 4)
    b:free()
    for _, call in ipairs {
      function() b:upload({ 1 }) end, function() b:download() end,
      function() b:fill(1) end, function() b:copy(b) end,
      function() return #b end, function() return b:address() end,
    } do
      assert.error_matches(call, "attempt to use a freed cugraph.Buffer")
    end
  end)
end)

describe("managed memory", function()
  it("is a Buffer the kernels and the host both reach, prefetched and advised", function()
    local b = cuda.managed("i32", { 1, 2, 3, 4 })
    assert.matches("^cugraph%.Buffer i32%[4%] %(0x%x+, managed%)$", tostring(b))
    assert.is_true(b:managed())
    assert.is_false(cuda.buffer("i32", 4):managed())
    local s = cuda.stream()
    assert.equals(b, b:prefetch())                    -- to its device, done on return
    b:prefetch("device", s):advise("read_mostly"):advise("unset_read_mostly")
    b:advise("preferred_location", "host"):advise("accessed_by", 0)
    H.kernels().inc_i32:launch(s, 1, 4, b, 4)
    s:synchronize()
    b:prefetch("host")
    assert.same({ 2, 3, 4, 5 }, b:download())
    local v = b:view(1, 2)
    assert.is_true(v:managed())
    v:prefetch(0)
    local z = cuda.managed("f64", 3):fill(0.5)
    assert.same({ 0.5, 0.5, 0.5 }, z:download())
    v:free()
    b:free()
    assert.error_matches(function() b:prefetch() end, "freed")
  end)

  it("refuses what it cannot do, before the driver", function()
    local plain, b, s = cuda.buffer("i32", 4), cuda.managed("u8", 8), cuda.stream()
    assert.error_matches(function() plain:prefetch() end,
      "b:prefetch: the buffer is not managed memory %(cuda%.managed%)")
    assert.error_matches(function() plain:advise("read_mostly") end, "b:advise: the buffer is not managed memory")
    assert.error_matches(function() b:prefetch("gpu") end, 'expected "device", "host" or a device ordinal')
    assert.error_matches(function() b:prefetch(99) end, 'expected "device", "host" or a device ordinal')
    assert.error_matches(function() b:advise("fast") end, "invalid option 'fast'")
    assert.error_matches(function() s:capture(function() b:prefetch(nil, s) end) end,
      "b:prefetch%(%) inside a graph capture: prefetch before the capture %(graphs record no prefetch%)")
    assert.error_matches(function() s:capture(function() cuda.managed("f32", 4) end) end,
      "cannot allocate managed memory inside a graph capture")
    assert.has_error(function() cuda.managed("f32", 0) end)
  end)
end)
