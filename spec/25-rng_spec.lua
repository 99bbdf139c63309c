-- cuda.rng: Philox4x32-10 against the published known answers, fills
-- against a host reference, the counter advanced on the device (eager
-- fills and graph replays draw the same stream; a re-seed reaches graphs
-- captured before it), statistics, errors, and
-- no Lua garbage per fill. Kernels run on a GPU and on the simulator; the
-- test double checks the rest.
local H = require "support.helper"
local cuda = H.cuda
local RUN = H.gpu or H.sim

-- Known answers of Philox4x32-10 from Random123's tests/kat_vectors
-- (https://github.com/DEShawResearch/random123, the three "philox4x32 10"
-- lines; Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy
-- as 1, 2, 3", SC 2011): counter (4 words), key (2 words), result.
local KAT = {
  { ctr = { 0x00000000, 0x00000000, 0x00000000, 0x00000000 }, key = { 0x00000000, 0x00000000 },
    out = { 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8 } },
  { ctr = { 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff }, key = { 0xffffffff, 0xffffffff },
    out = { 0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd } },
  { ctr = { 0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344 }, key = { 0xa4093822, 0x299f31d0 },
    out = { 0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1 } },
}

-- Philox4x32-10 on the host, from the paper's round function.
local M = 0xffffffff
local function philox(c, k)
  local c0, c1, c2, c3, k0, k1 = c[1], c[2], c[3], c[4], k[1], k[2]
  for r = 1, 10 do
    if r > 1 then k0, k1 = (k0 + 0x9E3779B9) & M, (k1 + 0xBB67AE85) & M end
    local p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2   -- 64-bit products, exact
    c0, c1, c2, c3 = ((p1 >> 32) ~ c1 ~ k0) & M, p1 & M, ((p0 >> 32) ~ c3 ~ k1) & M, p0 & M
  end
  return { c0, c1, c2, c3 }
end

local function words(x) return { x & M, (x >> 32) & M } end
local function join(lo, hi) return lo | (hi << 32) end

-- The 32-bit words a generator of (seed, subsequence) gives from offset on.
local function host_bits(seed, sub, offset, n)
  local out, k, s = {}, words(seed), words(sub)
  for j = 0, (n + 3) // 4 - 1 do
    local c = words(offset + j)
    local r = philox({ c[1], c[2], s[1], s[2] }, k)
    for q = 1, 4 do if #out < n then out[#out + 1] = r[q] end end
  end
  return out
end

local function f32(v) return (string.unpack("<f", string.pack("<f", v))) end

-- uniform and normal exactly as the kernels compute them from the words
-- (normal in double: compared within a tolerance).
local function host_uniform_f32(w, lo, hi)
  return f32((w >> 8) * 2 ^ -24 * f32(hi - lo) + lo)
end
local function host_u53(a, b) return (join(a, b) >> 11) * 2 ^ -53 end

local function ref_normal(bits, f64)
  local out = {}
  if f64 then
    for q = 1, #bits, 4 do
      local r = math.sqrt(-2 * math.log(host_u53(bits[q], bits[q + 1]) + 2 ^ -54))
      local t = 2 * math.pi * host_u53(bits[q + 2], bits[q + 3])
      out[#out + 1], out[#out + 2] = r * math.cos(t), r * math.sin(t)
    end
  else
    for q = 1, #bits, 2 do
      local u1 = f32(f32(bits[q]) * 2 ^ -32 + 2 ^ -33)
      local r = math.sqrt(-2 * math.log(u1))
      local t = 2 * math.pi * ((bits[q + 1] >> 8) * 2 ^ -24)
      out[#out + 1], out[#out + 2] = r * math.cos(t), r * math.sin(t)
    end
  end
  return out
end

describe("Philox4x32-10 on the host (the specs' reference)", function()
  it("gives Random123's known answers", function()
    for _, v in ipairs(KAT) do assert.same(v.out, philox(v.ctr, v.key)) end
  end)
end)

describe("cuda.rng", function()
  local s
  setup(function() s = cuda.stream() end)

  it("checks its arguments before any launch", function()
    assert.error_matches(function() cuda.rng(1.5) end, "cuda.rng: the seed must be an integer %(its 64 bits are used%), got 1.5")
    assert.error_matches(function() cuda.rng("1") end, "the seed must be an integer .*got string")
    assert.error_matches(function() cuda.rng(1, { sub = 1 }) end, "cuda.rng: unknown option 'sub' %(valid: subsequence%)")
    assert.error_matches(function() cuda.rng(1, 5) end, "cuda.rng: opts must be a table, got number")
    local r = cuda.rng(7)
    local f, d, u = cuda.buffer("f32", 8), cuda.buffer("f64", 8), cuda.buffer("u32", 8)
    assert.error_matches(function() r:uniform(u) end,
      "r:uniform: argument 1 must be a cugraph.Buffer of f32 or f64, got cugraph.Buffer of u32")
    assert.error_matches(function() r:normal({}) end, "r:normal: argument 1 must be a cugraph.Buffer of f32 or f64, got table")
    assert.error_matches(function() r:bits(f) end, "r:bits: argument 1 must be a cugraph.Buffer of u32, got cugraph.Buffer of f32")
    assert.error_matches(function() r:uniform(f, 1) end, "r:uniform: lo, hi: both numbers or neither, got 1 and nil")
    assert.error_matches(function() r:uniform(f, 2, 1) end, "r:uniform: lo must be below hi, got 2 and 1")
    assert.error_matches(function() r:uniform(f, 0, math.huge) end, "r:uniform: lo, hi must be finite f32 values")
    assert.error_matches(function() r:uniform(f, 0, 1e39) end, "lo, hi must be finite f32 values, got 0 and 1e%+39")
    assert.error_matches(function() r:normal(d, 0, -1) end, "r:normal: std must not be negative, got %-1")
    assert.error_matches(function() r:normal(d, 0, 1, f) end, "r:normal: the stream must be a cugraph.Stream, got cugraph.Buffer of f32")
    assert.error_matches(function() r:uniform(f, f, s) end, "r:uniform: expected %(buffer %[, lo, hi%] %[, stream%]%)")
    assert.error_matches(function() r:set_offset(0.5) end, "r:set_offset: the offset must be an integer")
    assert.error_matches(function() r:seed(nil) end, "r:seed: the seed must be an integer")
    assert.equals(0, r:offset())
    assert.error_matches(function() s:capture(function() r:uniform(f) end) end,
      "r:uniform without a stream inside a graph capture: pass the capture stream")
    assert.error_matches(function() s:capture(function() r:seed(3) end) end, "inside a graph capture")
  end)

  it("keeps seed, subsequence and offset, and closes three ways", function()
    local r = cuda.rng(-1, { subsequence = 5 })
    assert.equals("cugraph.Rng (Philox4x32-10, seed -1, subsequence 5)", tostring(r))
    assert.equals(r, r:set_offset(1 << 40))
    assert.equals(1 << 40, r:offset())
    assert.equals(r, r:seed(9))
    assert.equals(0, r:offset())
    assert.equals("cugraph.Rng (Philox4x32-10, seed 9, subsequence 6)", tostring(r:seed(9, 6)))
    assert.equals("cugraph.Rng", getmetatable(r))
    r:free()
    r:close()
    assert.equals("cugraph.Rng (freed)", tostring(r))
    assert.error_matches(function() r:offset() end, "attempt to use a freed cugraph.Rng")
    assert.error_matches(function() r:uniform(cuda.buffer("f32", 4)) end, "attempt to use a freed cugraph.Rng")
    do
      local q <close> = cuda.rng(1)
      r = q
    end
    assert.equals("cugraph.Rng (freed)", tostring(r))
  end)

  if not RUN then
    it("runs its kernels", function()
      pending("needs its kernels run: the test double runs only host twins of the spec kernels")
    end)
    return
  end

  it("is pinned by a graph that fills from it: freeing it then is refused, naming the graph", function()
    local r = cuda.rng(3)
    local b = cuda.buffer("f32", 64)
    local g = s:capture(function() r:uniform(b, s) end)
    assert.error_matches(function() r:free() end,
      ("cannot free cugraph.Rng: it is used by live cugraph.Graph #%d; free the graph first"):format(g:id()))
    g:free()
    r:free()
  end)

  it("gives the known answers on the device, key = seed, counter = (offset, subsequence)", function()
    local b = cuda.buffer("u32", 4)
    for _, v in ipairs(KAT) do
      local r = cuda.rng(join(v.key[1], v.key[2]), { subsequence = join(v.ctr[3], v.ctr[4]) })
      r:set_offset(join(v.ctr[1], v.ctr[2]))
      r:bits(b)
      assert.same(v.out, b:download())
    end
  end)

  it("fills u32, f32 and f64 as the host reference computes, and advances the offset by the blocks drawn", function()
    local seed, sub = 0x0123456789abcdef, 77
    local r = cuda.rng(seed, { subsequence = sub })
    local n = 1001
    local u = cuda.buffer("u32", n)
    r:bits(u, s)
    s:synchronize()
    assert.same(host_bits(seed, sub, 0, n), u:download())
    assert.equals(251, r:offset())
    -- f32 uniform: the top 24 bits, one fma
    local f = cuda.buffer("f32", n)
    r:uniform(f)
    local bits = host_bits(seed, sub, 251, n)
    local got = f:download()
    for i = 1, n do assert.equals(host_uniform_f32(bits[i], 0, 1), got[i]) end
    r:uniform(f, -2, 3, s)
    s:synchronize()
    bits, got = host_bits(seed, sub, 502, n), f:download()
    for i = 1, n do assert.equals(host_uniform_f32(bits[i], -2, 3), got[i]) end
    assert.equals(753, r:offset())
    -- f64 uniform: two words a value, two values a block
    local d = cuda.buffer("f64", n)
    r:uniform(d)
    bits, got = host_bits(seed, sub, 753, 2 * n), d:download()
    for i = 1, n do assert.equals(host_u53(bits[2 * i - 1], bits[2 * i]), got[i]) end
    assert.equals(753 + 501, r:offset())
    -- normal: Box-Muller of the same words
    r:set_offset(10)
    r:normal(f)
    local want = ref_normal(host_bits(seed, sub, 10, n + 1), false)
    got = f:download()
    for i = 1, n do assert.near(want[i], got[i], 2e-6 + 2e-6 * math.abs(want[i])) end
    r:set_offset(10)
    r:normal(d, 1.5, 2)
    want = ref_normal(host_bits(seed, sub, 10, 2 * n + 2), true)
    got = d:download()
    for i = 1, n do assert.near(1.5 + 2 * want[i], got[i], 1e-12) end
  end)

  it("draws the same numbers in N eager fills and N replays of a captured fill, bit for bit", function()
    local n, N = 777, 5
    local r = cuda.rng(2024)
    for _, t in ipairs { "f32", "f64" } do
      for _, fill in ipairs { "uniform", "normal" } do
        local b = cuda.buffer(t, n)
        r:seed(2024)
        local eager = {}
        for i = 1, N do
          r[fill](r, b, s)
          s:synchronize()
          eager[i] = b:download("string")
        end
        local after = r:offset()
        r:seed(2024)
        local g = s:capture(function() r[fill](r, b, s) end)
        for i = 1, N do
          g:launch()
          s:synchronize()
          assert.equals(eager[i], b:download("string"), t .. " " .. fill .. " replay " .. i)
        end
        assert.equals(after, r:offset())
        g:free()
      end
    end
  end)

  it("draws new numbers at each replay, reproducibly from the seed", function()
    local b = cuda.buffer("f32", 256)
    local r = cuda.rng(5)
    local g = s:capture(function() r:normal(b, 0, 1, s) end)
    local seen = {}
    for _ = 1, 4 do
      g:launch()
      s:synchronize()
      local v = b:download("string")
      assert.is_nil(seen[v])
      seen[v] = true
    end
    r:seed(5)
    g:launch()
    s:synchronize()
    local again = b:download("string")
    r:seed(5)
    r:normal(b)
    assert.equals(again, b:download("string"))
    assert.is_true(seen[again])
  end)

  it("re-seeded after a capture, replays the graph from the new seed as eager fills of it draw", function()
    local n = 300 -- 75 blocks a fill
    local r = cuda.rng(5)
    local b, u = cuda.buffer("f32", n), cuda.buffer("u32", n)
    local g = s:capture(function()
      r:uniform(b, -1, 1, s)
      r:bits(u, s)
    end)
    g:launch()
    s:synchronize()
    local old = b:download("string")
    assert.equals(r, r:seed(77, 3))
    assert.equals("cugraph.Rng (Philox4x32-10, seed 77, subsequence 3)", tostring(r))
    local fresh = cuda.rng(77, { subsequence = 3 })
    local fb, fu = cuda.buffer("f32", n), cuda.buffer("u32", n)
    for round = 1, 2 do
      g:launch()
      s:synchronize()
      fresh:uniform(fb, -1, 1)
      fresh:bits(fu)
      local got = b:download("string")
      assert.equals(fb:download("string"), got, "uniform, replay " .. round)
      assert.not_equals(old, got)
      assert.same(fu:download(), u:download(), "bits, replay " .. round)
      assert.same(host_bits(77, 3, 150 * round - 75, n), u:download())
    end
    assert.equals(300, r:offset())
    assert.equals(fresh:offset(), r:offset())
    g:free()
  end)

  it("keeps generators independent; graphs sharing one advance its counter in replay order", function()
    local n = 100
    local a, b = cuda.buffer("u32", n), cuda.buffer("u32", n)
    local r1, r2 = cuda.rng(1), cuda.rng(1, { subsequence = 1 })
    r1:bits(a); r2:bits(b); r1:bits(a)
    assert.same(host_bits(1, 0, 25, n), a:download())
    assert.same(host_bits(1, 1, 0, n), b:download())
    local r = cuda.rng(11)
    local g1 = s:capture(function() r:bits(a, s) end)
    local g2 = s:capture(function() r:bits(b, s) end)
    g1:launch(); g2:launch(); g1:launch()
    s:synchronize()
    assert.same(host_bits(11, 0, 50, n), a:download())
    assert.same(host_bits(11, 0, 25, n), b:download())
    -- a graph launched inside a capture (a child graph) draws in its place
    local outer = s:capture(function()
      g1:launch(s)
      r:bits(b, s)
    end)
    outer:launch()
    s:synchronize()
    assert.same(host_bits(11, 0, 75, n), a:download())
    assert.same(host_bits(11, 0, 100, n), b:download())
    assert.equals(125, r:offset())
  end)

  it("has the statistics of its distributions", function()
    local n = 1 << 16
    local r = cuda.rng(99)
    local function moments(b)
      local sum, sq, lo, hi = 0, 0, math.huge, -math.huge
      for _, v in ipairs(b:download()) do
        sum, sq = sum + v, sq + v * v
        if v < lo then lo = v end
        if v > hi then hi = v end
      end
      local mean = sum / n
      return mean, sq / n - mean * mean, lo, hi
    end
    for _, t in ipairs { "f32", "f64" } do
      local b = cuda.buffer(t, n)
      r:uniform(b)
      local mean, var, lo, hi = moments(b)
      -- 5 standard errors: sd(mean) = sqrt(1/12/n), sd(var) ~ sqrt(1/180/n)
      assert.is_true(math.abs(mean - 0.5) < 5 * math.sqrt(1 / 12 / n), t .. " uniform mean " .. mean)
      assert.is_true(math.abs(var - 1 / 12) < 5 * math.sqrt(1 / 180 / n), t .. " uniform variance " .. var)
      assert.is_true(lo >= 0 and hi < 1)
      r:uniform(b, 10, 20)
      mean, _, lo, hi = moments(b)
      assert.is_true(math.abs(mean - 15) < 5 * 10 * math.sqrt(1 / 12 / n), t .. " uniform(10, 20) mean " .. mean)
      assert.is_true(lo >= 10 and hi <= 20)
      r:normal(b, 3, 2)
      mean, var = moments(b)
      -- sd(mean) = 2/sqrt(n), sd(var) = 4 sqrt(2/n)
      assert.is_true(math.abs(mean - 3) < 5 * 2 / math.sqrt(n), t .. " normal mean " .. mean)
      assert.is_true(math.abs(var - 4) < 5 * 4 * math.sqrt(2 / n), t .. " normal variance " .. var)
    end
    local u = cuda.buffer("u32", n)
    r:bits(u)
    local ones = 0
    for _, w in ipairs(u:download()) do
      while w ~= 0 do ones, w = ones + (w & 1), w >> 1 end
    end
    -- 32 n fair bits: mean 16 n, sd sqrt(8 n)
    assert.is_true(math.abs(ones - 16 * n) < 5 * math.sqrt(8 * n), "bits set: " .. ones)
  end)

  it("allocates no Lua memory per fill or per replay", function()
    local r = cuda.rng(1)
    local f, d, u = cuda.buffer("f32", 64), cuda.buffer("f64", 64), cuda.buffer("u32", 64)
    assert.equals(0, H.garbage(function() r:uniform(f, s) end, 2000))
    assert.equals(0, H.garbage(function() r:normal(d, 1, 2, s) end, 2000))
    assert.equals(0, H.garbage(function() r:bits(u, s) end, 2000))
    assert.equals(0, H.garbage(function() r:uniform(f, -1, 1) end, 200))
    local g = s:capture(function() r:normal(f, s) end)
    assert.equals(0, H.garbage(function() g:launch() end, 2000))
    s:synchronize()
  end)
end)
