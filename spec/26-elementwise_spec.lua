-- cuda.elementwise and cuda.reduction: construction and call errors
-- before any driver call, one module per source, results against the host
-- for every type and many lengths, Scalars read at each replay, the
-- documented reduction order bit for bit, and no Lua garbage per call.
local H = require "support.helper"
local cuda = H.cuda
local RUN = H.gpu or H.sim

local function f32(v) return (string.unpack("<f", string.pack("<f", v))) end

describe("cuda.elementwise", function()
  local s
  setup(function() s = cuda.stream() end)

  it("checks the signature, body and options", function()
    local E = cuda.elementwise
    assert.error_matches(function() E("f32 x, f32 y", "y = x") end,
      "cuda.elementwise: the signature must read 'inputs %-> outputs'")
    assert.error_matches(function() E("f33 x -> f32 y", "y = x") end,
      "unknown type 'f33' of 'x' %(valid: f32 f64 i8 u8 i16 u16 i32 u32 i64 u64 f16 bf16%)")
    assert.error_matches(function() E("f32 -> f32 y", "y = 1") end, "malformed parameter 'f32'")
    assert.error_matches(function() E("f32 x, f32 x -> f32 y", "y = x") end, "parameter 'x' is named twice")
    assert.error_matches(function() E("f32 x -> f32 x", "x = x") end, "parameter 'x' is named twice")
    assert.error_matches(function() E("f32 i -> f32 y", "y = i") end, "'i' cannot name a parameter")
    assert.error_matches(function() E("f32 cg_a -> f32 y", "y = 1") end, "'cg_a' cannot name a parameter")
    assert.error_matches(function() E("f32 x ->", "y = x") end, "the signature names no output")
    assert.error_matches(function() E("f32 x -> f32 y", "") end, "the body must be a non%-empty string")
    assert.error_matches(function() E("f32 x -> f32 y", "y = x", { blocks = 1 }) end,
      "unknown option 'blocks' %(valid: block, name, preamble%)")
    assert.error_matches(function() E("f32 x -> f32 y", "y = x", { name = "a-b" }) end,
      "opts.name must be a C identifier %(it names the kernel%), got 'a%-b'")
    assert.error_matches(function() E("f32 x -> f32 y", "y = x", { block = 100 }) end,
      "opts.block must be a multiple of 32 from 32 to 1024, got 100")
    local err = H.error_of(E, "f32 x -> f32 y", "y = nope(x)", { name = "bad" })
    assert.equals("NVRTC_ERROR_COMPILATION", err.name)
    assert.matches('bad: body%(1%): error: identifier "nope" is undefined', err.message)
  end)

  it("compiles a signature and body once per state", function()
    local a = cuda.elementwise("f32 x -> f32 y", "y = 3 * x", { name = "thrice" })
    local b = cuda.elementwise("f32 x -> f32 y", "y = 3 * x", { name = "thrice" })
    assert.equals(a:kernel(), b:kernel())
    assert.are_not.equal(a:kernel(), cuda.elementwise("f32 x -> f32 y", "y = 4 * x"):kernel())
    assert.matches("y = 3 %* x", a:source())
    assert.equals("thrice(const f32*, f32, f32*, u32, u32, u64)", a:kernel():signature())
    assert.equals("cugraph.Elementwise thrice (f32 x -> f32 y)", tostring(a))
  end)

  it("checks every argument before any driver call, naming it", function()
    local saxpy = cuda.elementwise("f32 x, f32 y, f32 a -> f32 z", "z = a * x + y", { name = "saxpy_ew" })
    local x, y, z = cuda.buffer("f32", 8), cuda.buffer("f32", 8), cuda.buffer("f32", 8)
    assert.error_matches(function() saxpy(x, y, 2) end,
      "saxpy_ew: expected 4 arguments %(x, y, a, z%) and an optional stream, got 3")
    assert.error_matches(function() saxpy(x, y, 2, z, s, 1) end, "expected 4 arguments .* got 6")
    assert.error_matches(function() saxpy(x, cuda.buffer("i32", 8), 2, z) end,
      "saxpy_ew: argument 2 'y' %(f32%): expected a cugraph.Buffer of f32, got cugraph.Buffer of i32")
    assert.error_matches(function() saxpy(x, cuda.buffer("f32", 9), 2, z) end,
      "saxpy_ew: argument 2 'y' %(f32%): 9 elements, but argument 1 'x' has 8: buffers must have equal lengths")
    assert.error_matches(function() saxpy(x, y, 2, x:view(1)) end,
      "argument 4 'z' %(f32 output%): 7 elements, but argument 1 'x' has 8")
    assert.error_matches(function() saxpy(x, y, "2", z) end,
      "argument 3 'a' %(f32%): expected a cugraph.Buffer, cugraph.Scalar or number, got string")
    assert.error_matches(function() saxpy(x, y, 1e39, z) end, "argument 3 'a' %(f32%): 1e%+39 is out of range for f32")
    assert.error_matches(function() saxpy(x, y, cuda.scalar("f64"), z) end,
      "argument 3 'a' %(f32%): expected a cugraph.Scalar of f32, got cugraph.Scalar of f64")
    assert.error_matches(function() saxpy(x, y, 2, 5) end,
      "argument 4 'z' %(f32 output%): expected a cugraph.Buffer of f32, got number")
    assert.error_matches(function() saxpy(x, y, 2, cuda.scalar("f32")) end,
      "argument 4 'z' %(f32 output%): expected a cugraph.Buffer of f32, got cugraph.Scalar of f32")
    assert.error_matches(function() saxpy(x, y, 2, z, x) end,
      "saxpy_ew: argument 5 %(the stream%): expected cugraph.Stream, got cugraph.Buffer of f32")
    local bytes = cuda.elementwise("u8 v -> u8 w", "w = v")
    local u = cuda.buffer("u8", 4)
    assert.error_matches(function() bytes(300, u) end, "argument 1 'v' %(u8%): 300 is out of range for u8")
    assert.error_matches(function() bytes(2.5, u) end, "argument 1 'v' %(u8%): expected an integer, got 2.5")
    local freed = cuda.buffer("f32", 8)
    freed:free()
    assert.error_matches(function() saxpy(x, y, 2, freed) end, "attempt to use a freed cugraph.Buffer")
    assert.error_matches(function() s:capture(function() saxpy(x, y, 2, z) end) end,
      "saxpy_ew without a stream inside a graph capture: pass the capture stream")
  end)

  if not RUN then
    it("runs its kernels", function()
      pending("needs its kernels run: the test double runs only host twins of the spec kernels")
    end)
    return
  end

  it("computes saxpy as the host does, from buffers, views, numbers and Scalars", function()
    local saxpy = cuda.elementwise("f32 x, f32 y, f32 a -> f32 z", "z = a * x + y")
    local n = 1000
    local xs, ys = {}, {}
    for i = 1, n do xs[i], ys[i] = i * 0.25, 1000 - i end
    local x, y, z = cuda.buffer("f32", xs), cuda.buffer("f32", ys), cuda.buffer("f32", n)
    saxpy(x, y, 3.0, z)
    local got = z:download()
    for i = 1, n do assert.equals(f32(3 * xs[i] + ys[i]), got[i]) end
    local a = cuda.scalar("f32", -2)
    saxpy(x:view(10, 20), y:view(500, 20), a, z:view(0, 20), s)
    s:synchronize()
    got = z:download()
    for i = 1, 20 do assert.equals(f32(-2 * xs[10 + i] + ys[500 + i]), got[i]) end
    assert.equals(f32(3 * xs[21] + ys[21]), got[21])
  end)

  it("runs every element type, several outputs, the index, in place", function()
    for _, t in ipairs { "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f32", "f64" } do
      local k = cuda.elementwise(t .. " x, " .. t .. " c -> " .. t .. " y, u64 j", "y = x + c; j = i")
      local x, y, j = cuda.buffer(t, { 1, 2, 3, 4, 5 }), cuda.buffer(t, 5), cuda.buffer("u64", 5)
      k(x, 7, y, j)
      assert.same({ 8, 9, 10, 11, 12 }, y:download(), t)
      assert.same({ 0, 1, 2, 3, 4 }, j:download(), t)
    end
    local acc = cuda.elementwise("f64 x -> f64 y", "y += x")
    local x, y = cuda.buffer("f64", { 1, 2 }), cuda.buffer("f64", { 10, 20 })
    acc(x, y); acc(x, y)
    assert.same({ 12, 24 }, y:download())
    local half = cuda.elementwise("f16 x -> f32 y", "y = __half2float(x) * 2")
    local h, out = cuda.buffer("f16", { 1.5, -2 }), cuda.buffer("f32", 2)
    half(h, out)
    assert.same({ 3, -4 }, out:download())
  end)

  it("covers long buffers by striding, with any block size", function()
    local iota = cuda.elementwise("-> u32 k", "k = (unsigned)(i * 3 + n)", { block = 32 })
    local n = 32 * 32 * cuda.device().multiprocessors * 2 + 77
    local k = cuda.buffer("u32", n)
    iota(k, s)
    s:synchronize()
    local got = k:download("table")
    for _, i in ipairs { 1, 2, 1000, n // 2, n - 1, n } do assert.equals((i - 1) * 3 + n, got[i]) end
  end)

  it("reads a Scalar at each replay of a captured call, and makes no garbage", function()
    local axpy = cuda.elementwise("f32 a, f32 x -> f32 y", "y += a * x", { name = "axpy_ew" })
    local x, y, a = cuda.buffer("f32", 64):fill(1), cuda.buffer("f32", 64):fill(0), cuda.scalar("f32", 0)
    local g = s:capture(function() axpy(a, x, y, s) end)
    assert.equals(1, g:nodes())
    for i = 1, 4 do a:set(i); g:launch() end
    s:synchronize()
    assert.equals(10, y:download()[64])
    assert.equals(0, H.garbage(function(i) a:set(i); g:launch() end, 2000))
    assert.equals(0, H.garbage(function() axpy(a, x, y, s) end, 2000))
    assert.equals(0, H.garbage(function() axpy(2.0, x, y, s) end, 2000))
    assert.equals(0, H.garbage(function() axpy(a, x, y) end, 200))
    s:synchronize()
  end)
end)

describe("cuda.reduction", function()
  local s
  setup(function() s = cuda.stream() end)

  local sum = { input = "i32 x", reduce = "a + b", identity = 0 }

  it("checks its fields and its call's arguments", function()
    local R = cuda.reduction
    assert.error_matches(function() R("f32 x") end, "cuda.reduction: expected a table of fields, got string")
    assert.error_matches(function() R { input = "f32 x", reduce = "a + b", identity = 0, ident = 1 } end,
      "unknown option 'ident' %(valid: accumulate, identity, input, map, name, output, post, preamble, reduce%)")
    assert.error_matches(function() R { input = "f32 x, f32 y", reduce = "a + b", identity = 0 } end,
      "map is needed with more than one input")
    assert.error_matches(function() R { input = "f32 x", identity = 0 } end, "reduce must be a non%-empty string")
    assert.error_matches(function() R { input = "f32 x", reduce = "a + b" } end, "identity %(a number or a C expression%)")
    assert.error_matches(function() R { input = "f32 x", reduce = "a + b", identity = 0, output = "float4" } end,
      "output must be an element type")
    local r = R(sum)
    local x, out = cuda.buffer("i32", 10), cuda.buffer("i32", 1)
    assert.error_matches(function() r(x) end, "reduction: expected 2 arguments %(x, result%) and an optional stream, got 1")
    assert.error_matches(function() r(x, cuda.buffer("f32", 1)) end,
      "argument 2 'result' %(i32 output%): expected a cugraph.Buffer or cugraph.Scalar of i32, got cugraph.Buffer of f32")
    assert.error_matches(function() r(5, out) end, "reduction: no input is a buffer")
    assert.error_matches(function() r(cuda.buffer("u32", 3), out) end, "argument 1 'x' %(i32%)")
    local err = H.error_of(R, { input = "f32 x", reduce = "a +* b", identity = 0, name = "oops" })
    assert.matches("oops: reduce%(1%): error", err.message)
    assert.matches("reduce", tostring(r:source()))
    local part, final = r:kernels()
    assert.equals("reduction_part(const i32*, i32, i32*, i32*, u32, u32, u64)", part:signature())
    assert.equals("reduction_final(const i32*, i32*, u32, u64)", final:signature())
  end)

  if not RUN then
    it("runs its kernels", function()
      pending("needs its kernels run: the test double runs only host twins of the spec kernels")
    end)
    return
  end

  -- xorshift32 integers in [lo, hi]
  local function ints(n, seed, lo, hi)
    local x, t = seed, {}
    for i = 1, n do
      x = (x ~ (x << 13)) & 0xffffffff
      x = x ~ (x >> 17)
      x = (x ~ (x << 5)) & 0xffffffff
      t[i] = lo + x % (hi - lo + 1)
    end
    return t
  end

  local LENGTHS = { 1, 2, 3, 7, 31, 255, 256, 257, 1000, 2047, 2048, 2049, 4097, 65537, 300001 }

  it("sums, maxes and mins many lengths and types as the host does", function()
    local r = cuda.reduction(sum)
    local r64 = cuda.reduction { input = "i32 x", reduce = "a + b", identity = 0, accumulate = "i64" }
    local mx = cuda.reduction { input = "f64 x", reduce = "fmax(a, b)", identity = -math.huge }
    local mn = cuda.reduction { input = "u8 x", reduce = "min(a, b)", identity = 255, accumulate = "u32" }
    local out, out64, outd, outu = cuda.buffer("i32", 1), cuda.scalar("i64"), cuda.scalar("f64"), cuda.scalar("u32")
    for _, n in ipairs(LENGTHS) do
      local v = ints(n, n, -1000, 1000)
      local total, top = 0, -math.huge
      for i = 1, n do total, top = total + v[i], math.max(top, v[i]) end
      local x = cuda.buffer("i32", v)
      r(x, out, s); r64(x, out64, s); mx(cuda.buffer("f64", v), outd, s)
      local bytes = ints(n, n + 1, 3, 250)
      local low = math.huge
      for i = 1, n do low = math.min(low, bytes[i]) end
      mn(cuda.buffer("u8", bytes), outu, s)
      s:synchronize()
      assert.equals(total, out:download()[1], "sum of " .. n)
      assert.equals(total, out64:get(), "i64 sum of " .. n)
      assert.equals(top, outd:get(), "max of " .. n)
      assert.equals(low, outu:get(), "min of " .. n)
    end
  end)

  it("maps several inputs and scalars, applies post with n, and writes into a view", function()
    local dot = cuda.reduction { input = "f32 x, f32 y, f32 w", map = "w * x * y", reduce = "a + b",
                                 identity = 0, accumulate = "f64", output = "f64", name = "dot" }
    local mean = cuda.reduction { input = "f64 x", reduce = "a + b", identity = 0, post = "r / n" }
    local n = 5000
    local xs, ys = ints(n, 1, -8, 8), ints(n, 2, -8, 8)
    local want = 0
    for i = 1, n do want = want + 0.5 * xs[i] * ys[i] end
    local res = cuda.buffer("f64", 3):fill(-1)
    local w = cuda.scalar("f32", 0.5)
    dot(cuda.buffer("f32", xs), cuda.buffer("f32", ys), w, res:view(1, 1), s)
    mean(cuda.buffer("f64", xs), res:view(2, 1), s)
    s:synchronize()
    local sx = 0
    for i = 1, n do sx = sx + xs[i] end
    assert.same({ -1, want, sx / n }, res:download())
  end)

  -- The documented order, on the host, in f32.
  local function host_order(v)
    local n = #v
    local G = math.min((n + 2047) // 2048, 1024)
    local T = 256 * G
    local function tree(vals)
      local h = 128
      while h >= 1 do
        for k = 1, h do vals[k] = f32(vals[k] + vals[k + h]) end
        h = h // 2
      end
      return vals[1]
    end
    local parts = {}
    for b = 0, G - 1 do
      local vals = {}
      for t = 0, 255 do
        local acc, j = 0, b * 256 + t
        while j < n do acc, j = f32(acc + v[j + 1]), j + T end
        vals[t + 1] = acc
      end
      parts[b + 1] = tree(vals)
    end
    if G == 1 then return parts[1] end
    local vals = {}
    for t = 0, 255 do
      local acc, j = 0, t
      while j < G do acc, j = f32(acc + parts[j + 1]), j + 256 end
      vals[t + 1] = acc
    end
    return tree(vals)
  end

  it("adds floats in the documented order, bit for bit, every time", function()
    local r = cuda.reduction { input = "f32 x", reduce = "a + b", identity = 0 }
    local out = cuda.scalar("f32")
    local rng = cuda.rng(3)
    for _, n in ipairs { 1, 5, 300, 2049, 10000, 70001 } do
      local x = cuda.buffer("f32", n)
      rng:normal(x)
      r(x, out)
      local first = out:get()
      assert.equals(host_order(x:download()), first, "n = " .. n)
      r(x, out)
      assert.equals(first, out:get())
    end
  end)

  it("reduces new numbers at each replay of a graph that fills them, and makes no garbage", function()
    local n = 4096
    local mean = cuda.reduction { input = "f32 x", reduce = "a + b", identity = 0, accumulate = "f64",
                                  output = "f64", post = "r / n" }
    local rng = cuda.rng(8)
    local x, m = cuda.buffer("f32", n), cuda.scalar("f64")
    local g = s:capture(function() rng:uniform(x, s); mean(x, m, s) end)
    local seen = {}
    rng:seed(8)
    for _ = 1, 3 do
      g:launch()
      local v = m:get()
      assert.is_nil(seen[v])
      seen[v] = true
      local t = 0
      for _, e in ipairs(x:download()) do t = t + e end
      assert.near(t / n, v, 1e-12)
      assert.is_true(math.abs(v - 0.5) < 0.03)
    end
    assert.equals(0, H.garbage(function() g:launch() end, 2000))
    assert.equals(0, H.garbage(function() mean(x, m, s) end, 2000))
    s:synchronize()
  end)
end)
