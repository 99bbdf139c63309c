-- CUDA arrays (cuda.array): the memory of images. Every format and channel
-- count, 1-D to 3-D; copies between arrays, Buffers and HostBuffers with
-- b:copy2d and b:copy3d, eager and captured; the checks before the driver.
-- Their ownership (three ways to close, kept by graphs, C graphs and
-- lua_close) is spec/04's, with every other kind. Texture and surface
-- objects over arrays (a:texture, a:surface), sampled and stored through by
-- the kernels of spec/kernels/textures.cu: host twins on the test double,
-- their PTX on the simulator (tex, suld, sust through the driver's
-- texture objects) and on GPUs.
local H = require "support.helper"
local cuda = H.cuda

local FORMATS = { "u8", "i8", "u16", "i16", "u32", "i32", "f16", "f32" }

-- A buffer of n elements of type t holding 1, 2, ... (wrapped to fit t).
local function counting(t, n)
  local v = {}
  local wrap = ({ u8 = 256, i8 = 128, u16 = 65536, i16 = 32768, f16 = 2048 })[t]
  for i = 1, n do v[i] = wrap and (i % wrap) or i end
  return cuda.buffer(t, v), v
end

describe("cuda.array", function()
  it("makes arrays of every format and channel count, 1-D to 3-D", function()
    for _, t in ipairs(FORMATS) do
      for _, c in ipairs { 1, 2, 4 } do
        local f = c == 1 and t or (t .. "x" .. c)
        local a = cuda.array(f, 5)
        assert.same({ 5 }, { a:shape() })
        assert.same({ f, t, c }, { a:format() })
        local size = #string.pack(({ u8 = "B", i8 = "b", u16 = "H", i16 = "h",
                                     u32 = "I4", i32 = "i4", f16 = "H", f32 = "f" })[t], 0)
        assert.equals(5 * c * size, a:bytes())
        assert.matches("^cugraph%.Array " .. f .. "%[5%] %(", tostring(a))
        a:free()
      end
    end
    local a2, a3 = cuda.array("f32", 7, 3), cuda.array("u8x4", 4, 3, 2, { surface = true })
    assert.same({ 7, 3 }, { a2:shape() })
    assert.same({ 4, 3, 2 }, { a3:shape() })
    assert.equals(4 * 3 * 2 * 4, a3:bytes())
    assert.matches("u8x4%[4x3x2%] surface", tostring(a3))
  end)

  it("copies boxes between buffers, host buffers and arrays, counting texels", function()
    local W, R = 8, 4
    local src, v = counting("f32", W * R * 4)
    local a = cuda.array("f32x4", W, R)
    a:copy2d(src, W, R)                         -- a texel is four f32
    local back = cuda.buffer("f32", W * R * 4):fill(0)
    back:copy2d(a, W, R)
    assert.same(v, back:download())
    -- a 3 x 2 box of texels from (2, 1) into a host buffer, and back to (0, 2)
    local h = cuda.host_buffer("f32", 3 * 2 * 4)
    h:copy2d(a, 3, 2, { src_x = 2, src_y = 1 })
    cuda.synchronize()
    for y = 0, 1 do
      for x = 0, 2 do
        for k = 0, 3 do
          assert.equals(v[((1 + y) * W + 2 + x) * 4 + k + 1], h[(y * 3 + x) * 4 + k])
        end
      end
    end
    a:copy2d(h, 3, 2, { dst_y = 2 })
    back:copy2d(a, W, R)
    local got = back:download()
    assert.equals(v[(1 * W + 2) * 4 + 1], got[(2 * W) * 4 + 1])
    assert.equals(v[(2 * W + 4) * 4 + 4], got[(3 * W + 2) * 4 + 4])
    -- array to array, and a texel of bytes from u8 elements
    local b = cuda.array("f32x4", W, R)
    b:copy2d(a, W, R)
    back:fill(0):copy2d(b, W, R)
    assert.same(got, back:download())
    local bytes, bv = counting("u8", 16 * 3)
    local rgba = cuda.array("u8x4", 4, 3)
    rgba:copy2d(bytes, 4, 3)
    local out = cuda.buffer("u32", 12):fill(0)
    out:copy2d(rgba, 4, 3)
    local o = out:download()
    assert.equals(bv[1] | bv[2] << 8 | bv[3] << 16 | bv[4] << 24, o[1])
    assert.equals(bv[45] | bv[46] << 8 | bv[47] << 16 | bv[48] << 24, o[12])
  end)

  it("copies 1-D and 3-D arrays, and slices of a box", function()
    local a1 = cuda.array("i32", 100)
    local src, v = counting("i32", 100)
    a1:copy2d(src, 100, 1)
    local back = cuda.buffer("i32", 100):fill(0)
    back:copy2d(a1, 40, 1, { src_x = 60 })
    local got = back:download()
    assert.equals(v[61], got[1])
    assert.equals(v[100], got[40])
    assert.equals(0, got[41])
    local W, R, D = 4, 3, 5
    local a3 = cuda.array("f32", W, R, D)
    local s3, v3 = counting("f32", W * R * D)
    a3:copy3d(s3, W, R, D)
    local b3 = cuda.buffer("f32", W * R * 2):fill(0)
    b3:copy3d(a3, W, R, 2, { src_z = 3 })      -- slices 3 and 4
    local g3 = b3:download()
    assert.equals(v3[3 * W * R + 1], g3[1])
    assert.equals(v3[W * R * D], g3[W * R * 2])
  end)

  it("captures copies into a graph that reads each launch's data", function()
    local W, R = 16, 8
    local s = cuda.stream()
    local src, v = counting("f32", W * R)
    local a = cuda.array("f32", W, R)
    local dst = cuda.buffer("f32", W * R):fill(0)
    local g = s:capture(function()
      a:copy2d(src, W, R, { stream = s })
      dst:copy2d(a, W / 2, R, { stream = s, src_x = W / 2, dst_x = W / 2, dst_pitch = W })
    end)
    g:launch(s); s:synchronize()
    local got = dst:download()
    assert.equals(0, got[1])
    assert.equals(v[W], got[W])
    src:upload((function() local t = {} for i = 1, W * R do t[i] = -i end return t end)())
    g:launch(s); s:synchronize()
    assert.equals(-W * R, dst:download()[W * R])
    assert.error_matches(function() a:free() end, "used by live cugraph%.Graph #" .. g:id())
    local count, kinds = g:nodes()
    assert.equals(2, count)
    assert.same({ "memcpy", "memcpy" }, kinds)
    local keeps = g:memory().keeps
    assert.equals(1, keeps.arrays)
    assert.equals(3 * W * R * 4, keeps.device) -- src, the array and dst
  end)

  it("checks formats, sizes, options and boxes before the driver", function()
    local e = function(fn, pat) assert.error_matches(fn, pat) end
    e(function() cuda.array("f64", 4) end, "format 'f64': the element type must be one of")
    e(function() cuda.array("f32x3", 4) end, "a texel has 1, 2 or 4 channels")
    e(function() cuda.array("f32x", 4) end, "a texel has 1, 2 or 4 channels")
    e(function() cuda.array("f32", 0) end, "width must be 1..2^30")
    e(function() cuda.array("f32", 4, 0) end, "height must be 1..2^30")
    e(function() cuda.array("f32", 4, nil, 2) end, "a depth needs a height")
    e(function() cuda.array("f32", 4, 4, 4, 4) end, "too many dimensions")
    e(function() cuda.array("f32", 1 << 20) end, "width 1048576 is past this device's")
    e(function() cuda.array("f32", 1 << 15, 2, 2) end, "for a 3%-D texture")
    e(function() cuda.array("f32", 4, { surfce = true }) end, "unknown option 'surfce'")
    local a = cuda.array("f32x2", 8, 4)
    local b = cuda.buffer("f32", 64):fill(0)
    e(function() b:copy2d(a, 9, 4) end, "do not fit")
    e(function() b:copy2d(a, 4, 2, { src_x = 5 }) end, "8 elements wide; 4 from x = 5")
    e(function() b:copy2d(a, 4, 2, { src_pitch = 8 }) end, "opts.src_pitch: an array has its own layout")
    e(function() b:copy3d(a, 8, 4, 2) end, "has 1 slices; 2 from z = 0")
    local u16 = cuda.buffer("u16", 8)
    local a4 = cuda.array("u8x4", 2)
    e(function() cuda.buffer("f64", 8):copy2d(a4, 2, 1) end,
      "a texel must be whole elements of the other side")
    u16:copy2d(a4, 2, 1) -- two u16 a texel
    e(function() a:copy2d({}, 1, 1) end, "src must be a cugraph.Buffer, HostBuffer or Array")
    local s = cuda.stream()
    e(function() s:capture(function() cuda.array("f32", 4) end) end,
      "allocate arrays before capture")
    a:free()
    e(function() b:copy2d(a, 1, 1) end, "freed")
  end)

  describe("texture and surface objects", function()
    local m
    local function kernels()
      m = m or cuda.module(H.build .. "/textures.ptx")
      return m
    end
    -- samples t at ((x + shift) * scale, (y + shift) * scale) for x < w, y < h
    local function sample(t, w, h, scale, shift)
      local out = cuda.buffer("f32", w * h):fill(-1)
      kernels().tex_sample_f32:launch(cuda.stream(), { 1, h }, w, t, out, w, h, scale, shift)
      cuda.synchronize()
      return out:download()
    end
    local ROW = { 0, 10, 20, 30, 100, 110, 120, 130 } -- 4 x 2 texels

    it("samples texels, and filters between them linearly with the unit's weights", function()
      kernels()
      local a = cuda.array("f32", 4, 2)
      a:copy2d(cuda.buffer("f32", ROW), 4, 2)
      assert.same(ROW, sample(a:texture(), 4, 2, 1, 0.5))          -- texel centres
      assert.same(ROW, sample(a:texture { filter = "point" }, 4, 2, 1, 0.9))
      local lin = a:texture { filter = "linear" }
      -- halfway: the mean of four texels; clamped at the far edges
      assert.same({ 55, 65, 75, 80, 105, 115, 125, 130 }, sample(lin, 4, 2, 1, 1))
      -- a quarter of the way (weights 0.75 and 0.25, exact in 8 bits); one row
      local r = cuda.array("f32", 4, 1)
      r:copy2d(cuda.buffer("f32", { 0, 10, 20, 30 }), 4, 1)
      assert.same({ 2.5, 12.5, 22.5, 30 }, sample(r:texture { filter = "linear" }, 4, 1, 1, 0.75))
      -- integers read as floats in [0, 1], filtered
      local u8 = cuda.array("u8", 2, 1)
      u8:copy2d(cuda.buffer("u8", { 0, 255 }), 2, 1)
      local n = sample(u8:texture { read = "normalized", filter = "linear" }, 2, 1, 1, 1)
      -- the H200 filters normalized integers in fixed point: 0.5000076 for 0.5
      assert.near(0.5, n[1], 2 ^ -12)
      assert.equals(1, n[2])
    end)

    it("addresses past the edges by clamp, wrap, mirror and border, in normalized coordinates", function()
      kernels()
      local a = cuda.array("f32", 4, 1)
      a:copy2d(cuda.buffer("f32", { 1, 2, 3, 4 }), 4, 1)
      local function along(mode, border)
        local t = a:texture { normalized = true, address = mode, border = border }
        return sample(t, 8, 1, 1 / 4, 0.5) -- u from 1/8 to 15/8
      end
      assert.same({ 1, 2, 3, 4, 4, 4, 4, 4 }, along("clamp"))
      assert.same({ 1, 2, 3, 4, 1, 2, 3, 4 }, along("wrap"))
      assert.same({ 1, 2, 3, 4, 4, 3, 2, 1 }, along("mirror"))
      assert.same({ 1, 2, 3, 4, 9, 9, 9, 9 }, along("border", { 9 }))
      assert.same({ 1, 2, 3, 4, 1, 2, 3, 4 }, along({ "wrap", "clamp" }))
    end)

    it("stores through surfaces, eager and in a graph that keeps them and their array", function()
      local k = kernels()
      local a = cuda.array("f32", 8, 3, { surface = true })
      local sf = a:surface()
      assert.equals(a, sf:array())
      local s = cuda.stream()
      k.surf_fill_f32:launch(s, { 1, 3 }, 8, sf, 8, 3, 0.5)
      local back = cuda.buffer("f32", 24):fill(0)
      back:copy2d(a, 8, 3)
      local got = back:download()
      assert.equals(0.5, got[1])
      assert.equals(0.5 + 7 + 2000, got[24])
      local t = a:texture()
      local out = cuda.buffer("f32", 24):fill(0)
      local g = s:capture(function()
        k.surf_fill_f32:launch(s, { 1, 3 }, 8, sf, 8, 3, 1)
        k.tex_sample_f32:launch(s, { 1, 3 }, 8, t, out, 8, 3, 1, 0.5)
      end)
      assert.error_matches(function() sf:free() end, "used by live cugraph%.Graph #" .. g:id())
      assert.error_matches(function() t:free() end, "used by live cugraph%.Graph #" .. g:id())
      assert.error_matches(function() a:free() end, "2 open texture or surface objects over it")
      local weak = setmetatable({ a, t, sf }, { __mode = "v" })
      a, t, sf = nil, nil, nil -- luacheck: ignore
      collectgarbage(); collectgarbage()
      assert.is_not_nil(weak[1], "the array collected under a live graph")
      g:launch(s); s:synchronize()
      assert.equals(1 + 7 + 2000, out:download()[24])
      g:free()
      collectgarbage(); collectgarbage()
      assert.is_nil(weak[2])
      assert.is_nil(weak[1])
      assert.equals(0, cuda.status().finalizer_errors)
    end)

    it("closes three ways, and checks its options before the driver", function()
      local a = cuda.array("f32x4", 4, 4)
      local t = a:texture()
      assert.matches("^cugraph%.Texture #%d+$", tostring(t))
      assert.is_true(t:handle() ~= 0)
      t:free(); t:free()
      assert.matches("%(freed%)$", tostring(t))
      do local c <close> = a:texture() end -- luacheck: ignore
      a:free() -- no texture left open
      local e = function(fn, pat) assert.error_matches(fn, pat) end
      local f, i = cuda.array("f32", 4), cuda.array("i32", 4)
      e(function() f:texture { filtr = "linear" } end, "unknown option 'filtr'")
      e(function() f:texture { filter = "cubic" } end, 'opts.filter must be one of "point", "linear", got cubic')
      e(function() f:texture { address = "repeat" } end, 'opts.address must be one of "wrap", "clamp"')
      e(function() f:texture { address = "wrap" } end, 'address "wrap" needs normalized coordinates')
      e(function() f:texture { read = "normalized" } end, "is for 8%- and 16%-bit integer texels; these are f32")
      e(function() i:texture { filter = "linear" } end, "linear filtering needs float texels")
      e(function() f:surface() end, "was not made for surface stores")
      e(function() kernels().tex_sample_f32:launch(cuda.stream(), 1, 1, f, f, 1, 1, 1, 0) end,
        "argument 1")
      local t2 = f:texture()
      t2:free()
      f:free()
      e(function() f:texture() end, "freed")
      e(function() t2:handle() end, "freed")
    end)
  end)
end)
