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

describe("pitched memory and 2-D and 3-D copies", function()
  local function seq(n) local t = {} for i = 1, n do t[i] = i end return t end

  it("allocates rows at the driver's pitch and copies rectangles in and out", function()
    local img = cuda.pitched("f32", 5, 3)
    local pitch = img:pitch()
    assert.is_true(pitch >= 20 and pitch % 4 == 0)
    assert.same({ 5, 3, 1 }, { img:shape() })
    assert.equals(pitch // 4 * 3, #img)
    assert.matches("pitched 5x3x1, rows of " .. pitch .. " bytes", tostring(img))
    assert.is_nil(cuda.buffer("f32", 4):pitch())
    assert.equals(4, cuda.buffer("f32", 4):shape())
    local src = cuda.buffer("f32", seq(15))
    img:fill(0):copy2d(src, 5, 3)
    local back = cuda.buffer("f32", 15):fill(-1):copy2d(img, 5, 3)
    assert.same(seq(15), back:download())
    local corner = cuda.buffer("f32", 4):copy2d(src, 2, 2, { src_x = 1, src_y = 1, src_pitch = 5 })
    assert.same({ 7, 8, 12, 13 }, corner:download())
    local h = cuda.host_buffer("f32", 6):copy2d(img, 2, 3, { src_x = 3 })
    assert.same({ 4, 5, 9, 10, 14, 15 }, { h[0], h[1], h[2], h[3], h[4], h[5] })
    img:copy2d(h, 2, 3)                                   -- from pinned host memory
    back:copy2d(img, 5, 3)
    assert.same({ 4, 5, 3, 4, 5, 9, 10, 8, 9, 10 }, { table.unpack(back:download(), 1, 10) })
  end)

  it("copies boxes of slices", function()
    local vol = cuda.pitched("i32", 4, 2, 3)
    assert.same({ 4, 2, 3 }, { vol:shape() })
    vol:copy3d(cuda.buffer("i32", seq(24)), 4, 2, 3)
    assert.same(seq(24), cuda.buffer("i32", 24):copy3d(vol, 4, 2, 3):download())
    local mid = cuda.buffer("i32", 2):copy3d(vol, 1, 1, 2, { src_x = 3, src_y = 1, src_z = 1 })
    assert.same({ 16, 24 }, mid:download())
  end)

  it("records copies as memcpy nodes of a graph", function()
    local s = cuda.stream()
    local img, out = cuda.pitched("f32", 5, 3), cuda.buffer("f32", 15):fill(0)
    local src = cuda.buffer("f32", seq(15))
    local g = s:capture(function()
      img:copy2d(src, 5, 3, { stream = s })
      out:copy2d(img, 5, 3, { stream = s })
    end)
    local n, kinds = g:nodes()
    assert.same({ 2, { "memcpy", "memcpy" } }, { n, kinds })
    src:upload(seq(15))
    g:launch()
    s:synchronize()
    assert.same(seq(15), out:download())
    local info = g:node(1):info()
    assert.equals("copy 3d", info.kind)
    assert.equals(img, info.dst)
    assert.equals(src, info.src)
    assert.error_matches(function() s:capture(function() img:copy2d(src, 5, 3) end) end,
      "copy2d without a stream inside a graph capture: pass the capture stream")
  end)

  it("refuses boxes that do not fit, before the driver", function()
    local img, src = cuda.pitched("f32", 5, 3), cuda.buffer("f32", 15)
    for _, c in ipairs {
      { { src, 6, 3 }, "copy2d: the dst rows are 5 elements wide; 6 from x = 0 do not fit" },
      { { src, 5, 4 }, "copy2d: the dst slices have 3 rows; 4 from y = 0 do not fit" },
      { { cuda.buffer("f64", 15), 5, 3 }, "copy2d: elements of f32 and f64 differ in size" },
      { { src, 5, 3, { src_z = 1 } }, "copy2d: a z offset needs copy3d" },
      { { src, 5, 3, { dst_pitch = 8 } }, "copy2d: opts.dst_pitch: a pitched buffer has its own pitch" },
      { { src, 5, 3, { bogus = 1 } }, "copy2d: unknown option 'bogus'" },
      { { src, 5, 3, { src_y = -1 } }, "copy2d: opts.src_y must be a non-negative integer" },
      { { 7, 5, 3 }, "copy2d: src must be a cugraph.Buffer, HostBuffer or Array, got number" },
      { { src, 0, 3 }, "width must be 1..2^30" },
    } do
      assert.error_matches(function() img:copy2d(table.unpack(c[1])) end, c[2], 1, true)
    end
    assert.error_matches(function() cuda.buffer("f32", 6):copy2d(src, 2, 3, { src_x = 4 }) end,
      "copy2d: the src rows are 2 elements wide; 2 from x = 4 do not fit", 1, true)
    assert.error_matches(function() cuda.pitched("i32", 4, 2, 3):copy3d(src, 4, 2, 4) end,
      "copy3d: the dst has 3 slices; 4 from z = 0 do not fit", 1, true)
    assert.error_matches(function()
      cuda.host_buffer("f32", 4):copy2d(cuda.host_buffer("f32", 4), 2, 2)
    end, "copy2d: host to host: one side must be a Buffer", 1, true)
    assert.error_matches(function() cuda.pitched("f32", 0, 3) end, "width must be 1..2^30")
  end)
end)
