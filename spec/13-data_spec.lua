-- Views, pinned host buffers and the 16-bit float types.
local H = require "support.helper"
local cuda = H.cuda

local function seq(n, f)
  local t = {}
  for i = 1, n do t[i] = f and f(i) or i end
  return t
end

describe("b:view", function()
  it("is a buffer over part of another, 0-based", function()
    local b = cuda.buffer("f32", seq(8))
    local v = b:view(2, 3)
    assert.equals(3, #v)
    assert.equals("f32", v:type())
    assert.same({ 3, 4, 5 }, v:download())
    assert.equals(b:address() + 8, v:address())
    assert.equals(b, v:parent())
    assert.is_nil(b:parent())
    assert.matches("^cugraph%.Buffer f32%[3%] %(.*, view%)$", tostring(v))
    v:fill(0)
    assert.same({ 1, 2, 0, 0, 0, 6, 7, 8 }, b:download())
    v:upload({ 9 }, 1)
    assert.same({ 0, 9, 0 }, v:download())
    assert.same({ 6, 7, 8 }, b:view(5):download()) -- to the end
    assert.same({ 9 }, v:view(1, 1):download())    -- a view of a view
  end)

  it("reinterprets the element type when size and alignment allow", function()
    local b = cuda.buffer("u32", { 0x3f800000, 0x40000000, 0, 0 })
    assert.same({ 1, 2 }, b:view(0, 2, "f32"):download())
    assert.equals(16, #b:view(0, nil, "u8"))
    assert.same({ 0, 0, 0x80, 0x3f }, b:view(0, 4, "u8"):download())
    assert.equals(1, #b:view(2, 1, "f64"))
    assert.equals(3, #b:view(1, nil, "float"))
    assert.error_matches(function() b:view(1, 1, "f64") end,
                         "view: element 1 of u32 is at byte 4, not aligned for f64 %(8 bytes%)")
    assert.error_matches(function() b:view(3, nil, "f64") end,
                         "the 4 bytes from element 3 are not a whole number of f64; give a count")
    assert.error_matches(function() b:view(2, 2, "f64") end,
                         "view: 2 f64 from element 2 pass the end of the buffer %(u32%[4%]%)")
    assert.error_matches(function() b:view(4, 1) end, "first 4 out of range: element offsets are 0%-based, 0..3")
    assert.error_matches(function() b:view(-1, 1) end, "first %-1 out of range")
    assert.error_matches(function() b:view(0, 0) end, "size must be positive")
    assert.error_matches(function() b:view(0, 1, "f128") end, "unknown element type 'f128'")
  end)

  it("keeps its parent alive; the parent is freed after its views", function()
    local v = cuda.buffer("i32", seq(4)):view(1, 2)
    collectgarbage()
    collectgarbage()
    assert.same({ 2, 3 }, v:download())
    local b = v:parent()
    local w = b:view(0, 1)
    assert.error_matches(function() b:free() end,
                         "cannot free cugraph.Buffer i32%[4%]: 2 open views over it %(b:view%); free the views first")
    v:free()
    assert.error_matches(function() b:free() end, "1 open view over it")
    w:free()
    w:free() -- idempotent
    b:free()
    assert.error_matches(function() v:download() end, "attempt to use a freed cugraph.Buffer")
    assert.matches("%(freed%)", tostring(w))
  end)

  it("goes to kernels, checked by its element type", function()
    local k, s = H.kernels().axpy, cuda.stream()
    local x = cuda.buffer("f32", seq(8))
    local y = cuda.buffer("f32", 8):fill(1)
    k:launch(s, 1, 4, 2, x:view(4, 4), y:view(0, 4), 4)
    s:synchronize()
    assert.same({ 11, 13, 15, 17, 1, 1, 1, 1 }, y:download())
    local u = cuda.buffer("u32", 4)
    assert.error_matches(function() k:launch(s, 1, 4, 2, x, u:view(0, 4), 4) end,
                         "axpy: argument 3 %(f32%*%): expected cugraph.Buffer or cugraph.Scalar of f32, got cugraph.Buffer of u32")
    k:launch(s, 1, 4, 2, x, u:view(0, 4, "f32"), 4) -- reinterpreted
  end)

  it("is captured like a buffer: the graph pins the view and its parent", function()
    local s = cuda.stream()
    local b = cuda.buffer("f32", 8):fill(0)
    local v = b:view(4, 4)
    local g = s:capture(function() v:fill(5, s) end)
    assert.error_matches(function() v:free() end, "used by live cugraph.Graph")
    assert.error_matches(function() b:free() end, "open view")
    g:launch(s)
    s:synchronize()
    assert.same({ 0, 0, 0, 0, 5, 5, 5, 5 }, b:download())
    g:free()
    v:free()
    b:free()
  end)
end)

describe("dst:copy", function()
  it("copies between buffers of equal byte size, views included", function()
    local b = cuda.buffer("f32", seq(8))
    local d = cuda.buffer("f64", 4)
    d:copy(b)
    assert.same(b:download("string"), d:download("string"))
    local c = cuda.buffer("f32", 8):fill(0)
    c:view(0, 4):copy(b:view(4, 4))
    assert.same({ 5, 6, 7, 8, 0, 0, 0, 0 }, c:download())
    assert.error_matches(function() c:copy(cuda.buffer("f32", 4)) end,
                         "copy: source is f32%[4%], destination f32%[8%]; their byte sizes must match")
  end)

  it("copies part of a buffer with offsets and a count", function()
    local s = cuda.stream()
    local src = cuda.buffer("i32", seq(8))
    local dst = cuda.buffer("i32", 6):fill(0)
    assert.equals(dst, dst:copy(src, { src_offset = 5, dst_offset = 1, count = 3 }))
    assert.same({ 0, 6, 7, 8, 0, 0 }, dst:download())
    dst:copy(src, { src_offset = 6 }, s) -- the rest of the source, on a stream
    s:synchronize()
    assert.same({ 7, 8, 7, 8, 0, 0 }, dst:download())
    dst:copy(src, { count = 0 })
    local g = s:capture(function() dst:copy(src, { dst_offset = 4, count = 2 }, s) end)
    g:launch(s)
    s:synchronize()
    assert.same({ 7, 8, 7, 8, 1, 2 }, dst:download())
    assert.error_matches(function() dst:copy(src) end, "byte sizes must match")
    assert.error_matches(function() dst:copy(src, { src_offset = 9 }) end,
                         "copy: src_offset 9 passes the end of the source %(i32%[8%]%)")
    assert.error_matches(function() dst:copy(src, { src_offset = 2, count = 7 }) end,
                         "copy: 7 elements from src_offset 2 pass the end of the source")
    assert.error_matches(function() dst:copy(src, { dst_offset = 4, count = 3 }) end,
                         "copy: 12 bytes at dst_offset 4 pass the end of the destination %(i32%[6%]%)")
    assert.error_matches(function() dst:copy(src, { dst_offset = -1 }) end, "copy: dst_offset %-1 is negative")
  end)
end)

describe("cuda.host_buffer", function()
  it("is indexed from 0 with type and bounds checks", function()
    local h = cuda.host_buffer("i16", 4)
    assert.equals(4, #h)
    assert.equals(8, h:bytes())
    assert.equals("i16", h:type())
    assert.same({ 0, 0, 0, 0 }, h:totable())
    h[0], h[3] = -32768, 7
    assert.equals(-32768, h[0])
    assert.equals(7, h[3])
    assert.same({ -32768, 0, 0, 7 }, h:totable())
    assert.error_matches(function() return h[4] end, "index 4 out of range: host buffer elements are 0%-based, 0..3")
    assert.error_matches(function() h[-1] = 0 end, "index %-1 out of range")
    assert.error_matches(function() h[0] = 40000 end, "40000 is out of range for i16")
    assert.error_matches(function() h[0] = 1.5 end, "expected an integer")
    assert.error_matches(function() h[0] = "x" end, "expected number, got string")
    assert.error_matches(function() return h[0.5] end, "index must be an integer")
    assert.error_matches(function() h.x = 1 end, "cugraph.HostBuffer has no field 'x' to set")
    assert.matches("^cugraph%.HostBuffer i16%[4%] %(.*, pinned%)$", tostring(h))
    h:free()
    h:free()
    assert.error_matches(function() return h[0] end, "attempt to use a freed cugraph.HostBuffer")
    assert.matches("%(freed%)", tostring(h))
  end)

  it("converts to and from tables and strings", function()
    local h = cuda.host_buffer("f32", { 1.5, 2, 3 })
    assert.same({ 1.5, 2, 3 }, h:totable())
    assert.equals(string.pack("<fff", 1.5, 2, 3), h:tostring())
    assert.equals(h, h:set({ 4, 5 }, 1))
    assert.same({ 1.5, 4, 5 }, h:totable())
    h:set(string.pack("<f", -1))
    assert.equals(-1, h[0])
    assert.same({ 7, 8 }, cuda.host_buffer("u8", "\7\8"):totable())
    assert.error_matches(function() h:set({ 1, 2, 3, 4 }) end, "set: 4 elements at offset 0 do not fit in f32%[3%]")
    assert.error_matches(function() h:set({ 1 }, 3) end, "set: 1 elements at offset 3 do not fit")
    assert.error_matches(function() h:set("abc") end, "set: string of 3 bytes is not a whole number of f32")
    assert.error_matches(function() h:set({ 1, "x" }) end, "set: element 2: expected number, got string")
    assert.error_matches(function() cuda.host_buffer("f32", 0) end, "size must be positive")
    assert.error_matches(function() cuda.host_buffer("f32", {}) end, "no elements")
  end)

  it("uploads and downloads, synchronously or on a stream", function()
    local s = cuda.stream()
    local h = cuda.host_buffer("f64", seq(4, function(i) return i / 4 end))
    local b = cuda.buffer("f64", 6):fill(0)
    assert.equals(b, b:upload(h, 2))
    assert.same({ 0, 0, 0.25, 0.5, 0.75, 1 }, b:download())
    b:fill(3, s)
    b:upload(h, s) -- the offset left out before a stream
    local out = cuda.host_buffer("f64", 2)
    assert.equals(b, b:download_into(out, 3, s))
    s:synchronize()
    assert.same({ 1, 3 }, out:totable())
    b:download_into(out)
    assert.same({ 0.25, 0.5 }, out:totable())
    assert.error_matches(function() b:upload(cuda.host_buffer("f32", 2)) end,
                         "upload: host buffer of f32, device buffer of f64; they must match")
    assert.error_matches(function() b:upload(h, 3) end, "upload: 4 elements at offset 3 pass the end of the buffer")
    assert.error_matches(function() b:download_into(out, 7) end, "offset 7 out of range")
  end)

  it("is captured as copy nodes that read it at each launch, and pinned", function()
    local s = cuda.stream()
    local h = cuda.host_buffer("f32", { 1, 2 })
    local out = cuda.host_buffer("f32", 2)
    local b = cuda.buffer("f32", 2)
    assert.error_matches(function() s:capture(function() cuda.host_buffer("f32", 1) end) end,
                         "cannot allocate a host buffer inside a graph capture")
    assert.error_matches(function() s:capture(function() b:upload(h) end) end,
                         "upload without a stream inside a graph capture: pass the capture stream")
    local g = s:capture(function()
      b:upload(h, s)
      b:download_into(out, s)
    end)
    h[0], h[1] = 5, 6
    g:launch(s)
    s:synchronize()
    assert.same({ 5, 6 }, out:totable())
    assert.error_matches(function() h:free() end,
                         "cannot free cugraph.HostBuffer: it is used by live cugraph.Graph")
    assert.error_matches(function() out:free() end, "used by live cugraph.Graph")
    g:free()
    h:free()
    out:free()
  end)
end)

describe("f16 and bf16", function()
  -- f16: 1 sign, 5 exponent, 10 fraction bits; bf16: 1, 8, 7.
  local function bits(t, v)
    local h = cuda.host_buffer(t, 1)
    h[0] = v
    return string.unpack("<I2", h:tostring()), h[0]
  end

  it("convert from Lua numbers exactly, rounding to nearest even", function()
    local cases = {
      { "f16", 1, 0x3c00, 1 }, { "f16", -2, 0xc000, -2 },
      { "f16", 1 / 3, 0x3555, 0.333251953125 },
      { "f16", 2049, 0x6800, 2048 }, { "f16", 2051, 0x6802, 2052 }, -- ties to even
      { "f16", 2049.0001, 0x6801, 2050 },
      { "f16", 65504, 0x7bff, 65504 }, { "f16", 65519.99, 0x7bff, 65504 },
      { "f16", 2 ^ -14, 0x0400, 2 ^ -14 },                 -- smallest normal
      { "f16", 2 ^ -24, 0x0001, 2 ^ -24 },                 -- smallest subnormal
      { "f16", 2 ^ -25, 0x0000, 0 },                       -- a tie: to even (zero)
      { "f16", 1.5 * 2 ^ -25, 0x0001, 2 ^ -24 },
      { "f16", 1023 * 2 ^ -24 + 2 ^ -25, 0x0400, 2 ^ -14 }, -- up into the normals
      { "f16", math.huge, 0x7c00, math.huge }, { "f16", -math.huge, 0xfc00, -math.huge },
      { "f16", -0.0, 0x8000, 0 },
      { "bf16", 1, 0x3f80, 1 }, { "bf16", 1 + 2 ^ -8, 0x3f80, 1 },
      { "bf16", 1 + 3 * 2 ^ -8, 0x3f82, 1 + 2 ^ -6 },
      { "bf16", 1 + 2 ^ -8 + 2 ^ -30, 0x3f81, 1 + 2 ^ -7 }, -- no double rounding
      { "bf16", 2 ^ -133, 0x0001, 2 ^ -133 }, { "bf16", -2 ^ 127 * 1.5, 0xff40, -2 ^ 127 * 1.5 },
      { "bf16", math.huge, 0x7f80, math.huge },
    }
    for _, c in ipairs(cases) do
      local b, v = bits(c[1], c[2])
      assert.equals(c[3], b, ("%s %.17g"):format(c[1], c[2]))
      assert.equals(c[4], v, ("%s %.17g"):format(c[1], c[2]))
    end
    local b, v = bits("f16", 0 / 0)
    assert.equals(0x7e00, b & 0x7fff)
    assert.is_true(v ~= v)
    b, v = bits("bf16", 0 / 0)
    assert.equals(0x7fc0, b & 0x7fff)
    assert.is_true(v ~= v)
    assert.error_matches(function() bits("f16", 65520) end, "65520%.0 is out of range for f16")
    assert.error_matches(function() bits("bf16", 2 ^ 128) end, "out of range for bf16")
    assert.error_matches(function() bits("f16", "1") end, "expected number, got string")
  end)

  it("are element types of buffers, views, scalars and fills", function()
    local b = cuda.buffer("f16", { 0.1, 1e-7, -3 })
    assert.same({ 0.0999755859375, 1.1920928955078125e-07, -3 }, b:download())
    assert.equals(6, b:bytes())
    b:fill(1.5)
    assert.same({ 1.5, 1.5, 1.5 }, b:download())
    assert.same({ 0x3e00, 0x3e00 }, b:view(1, 2, "u16"):download())
    local r = cuda.buffer("u16", { 0x3f80, 0xc000 }):view(0, 2, "bf16")
    assert.same({ 1, -2 }, r:download())
    local sc = cuda.scalar("bf16", 3.14159)
    assert.equals(3.140625, sc:get())
    sc:set(-0.5)
    assert.equals(-0.5, sc:get())
    assert.error_matches(function() sc:set(1e39) end, "out of range for bf16")
    assert.equals("f16", cuda.buffer("__half", 1):type())
    assert.equals("bf16", cuda.scalar("__nv_bfloat16"):type())
    local s = cuda.stream()
    local g = s:capture(function() b:fill(-1, s) end)
    g:launch(s)
    s:synchronize()
    assert.same({ -1, -1, -1 }, b:download())
  end)

  it("are kernel parameter types: __half and __nv_bfloat16", function()
    -- scale(__half*, const __nv_bfloat16*, __half), as NVRTC mangles it
    local ptx = [[
.version 7.0
.target sm_50
.address_size 64
.visible .entry _Z5scaleP6__halfPK13__nv_bfloat16S_(
  .param .u64 p0,
  .param .u64 p1,
  .param .align 2 .b8 p2[2]
)
{
  ret;
}
]]
    local k, s = cuda.module(ptx).scale, cuda.stream()
    assert.equals("scale(f16*, const bf16*, f16)", k:signature())
    local h, bf = cuda.buffer("f16", 2), cuda.buffer("bf16", 2)
    assert.error_matches(function() k:launch(s, 1, 1, bf, bf, 1) end,
                         "scale: argument 1 %(f16%*%): expected cugraph.Buffer or cugraph.Scalar of f16, got cugraph.Buffer of bf16")
    assert.error_matches(function() k:launch(s, 1, 1, h, h, 1) end, "argument 2 %(const bf16%*%)")
    assert.error_matches(function() k:launch(s, 1, 1, h, bf, 1e6) end,
                         "scale: argument 3 %(f16%): 1000000%.0 is out of range for f16")
    assert.error_matches(function() k:launch(s, 1, 1, h, bf, "x") end, "argument 3 %(f16%): expected number")
    -- signature strings take the C names
    local k2 = cuda.module(ptx):kernel("_Z5scaleP6__halfPK13__nv_bfloat16S_", "__half*, const __nv_bfloat16*, __half")
    assert.matches("%(f16%*, const bf16%*, f16%)$", k2:signature())
  end)
end)
