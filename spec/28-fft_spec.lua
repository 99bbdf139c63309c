-- cuda.fft: cuFFT (on a GPU) and its stand-in (on the test double and the
-- simulator) against a direct DFT on the host: 1-D, 2-D and 3-D c2c, r2c
-- and c2r plans in f32 and f64, batched, eager and captured (the plan's
-- work area pinned by the graph, replays checked after the plans are
-- collected), in place for c2c; the checks made before cuFFT, the count of
-- points among them; a missing library.
local H = require "support.helper"
local cuda = H.cuda

-- A deterministic signal of n values in [-1, 1).
local function signal(n, seed)
  local t, x = {}, seed
  for i = 1, n do
    x = (x * 1103515245 + 12345) % 2147483648
    t[i] = x / 1073741824 - 1
  end
  return t
end

-- The DFT of a row-major complex signal of the given lengths (re, im
-- pairs), sign -1 forward, +1 inverse, directly from the definition.
local function dft(lengths, x, sign)
  local rank, total = #lengths, 1
  for _, n in ipairs(lengths) do total = total * n end
  local function index(coords)
    local i = 0
    for d = 1, rank do i = i * lengths[d] + coords[d] end
    return i
  end
  local function coords_of(i)
    local c = {}
    for d = rank, 1, -1 do
      c[d] = i % lengths[d]
      i = i // lengths[d]
    end
    return c
  end
  local out = {}
  for k = 0, total - 1 do
    local kc, re, im = coords_of(k), 0, 0
    for j = 0, total - 1 do
      local jc, phase = coords_of(j), 0
      for d = 1, rank do phase = phase + kc[d] * jc[d] / lengths[d] end
      local a = sign * 2 * math.pi * phase
      local xr, xi = x[2 * j + 1], x[2 * j + 2]
      re = re + xr * math.cos(a) - xi * math.sin(a)
      im = im + xr * math.sin(a) + xi * math.cos(a)
    end
    out[2 * index(kc) + 1], out[2 * index(kc) + 2] = re, im
  end
  return out
end

local function close(got, want, tol, what)
  assert.equal(#want, #got, what)
  local scale = 0
  for i = 1, #want do scale = math.max(scale, math.abs(want[i])) end
  for i = 1, #want do
    if math.abs(got[i] - want[i]) > tol * (1 + scale) then
      error(("%s: element %d is %.9g, want %.9g"):format(what, i, got[i], want[i]), 2)
    end
  end
end

local function upload(t, data)
  local b = cuda.buffer(t, #data)
  b:upload(data)
  return b
end

local function prod(l)
  local p = 1
  for _, n in ipairs(l) do p = p * n end
  return p
end

-- The r2c output of a batch of real signals of the given lengths: the
-- first n // 2 + 1 points of the last dimension of each signal's DFT.
local function half_spectrum(shape, x, batch)
  local n, last = prod(shape), shape[#shape]
  local rows, h = n // last, last // 2 + 1
  local want = {}
  for k = 0, batch - 1 do
    local cx = {}
    for i = 1, n do cx[2 * i - 1], cx[2 * i] = x[n * k + i], 0 end
    local full = dft(shape, cx, -1)
    for row = 0, rows - 1 do
      for j = 0, h - 1 do
        local src, dst = row * last + j, k * rows * h + row * h + j
        want[2 * dst + 1], want[2 * dst + 2] = full[2 * src + 1], full[2 * src + 2]
      end
    end
  end
  return want
end

-- The c2c forward transform of a batch of complex signals.
local function spectrum(shape, x, batch)
  local n, want = prod(shape), {}
  for k = 0, batch - 1 do
    local one = dft(shape, { table.unpack(x, 2 * n * k + 1, 2 * n * (k + 1)) }, -1)
    table.move(one, 1, #one, 2 * n * k + 1, want)
  end
  return want
end

local SHAPES = { { 8 }, { 5 }, { 4, 6 }, { 3, 2, 5 } }
local TOL = { f32 = 2e-5, f64 = 1e-12 }

describe("cuda.fft", function()
  after_each(function() collectgarbage() end)

  it("runs c2c transforms of 1, 2 and 3 dimensions, forward and inverse, batched", function()
    for _, t in ipairs { "f32", "f64" } do
      for _, shape in ipairs(SHAPES) do
        local n, batch = prod(shape), 3
        local p = cuda.fft(#shape == 1 and shape[1] or shape, "c2c", { type = t, batch = batch })
        local x = signal(2 * n * batch, n)
        local fin, fout = p:elements()
        assert.equal(2 * n * batch, fin)
        assert.equal(2 * n * batch, fout)
        local a, b = upload(t, x), cuda.buffer(t, 2 * n * batch)
        p:forward(a, b)
        local got, want = b:download(), spectrum(shape, x, batch)
        close(got, want, TOL[t], ("%s c2c forward %s"):format(t, table.concat(shape, "x")))
        p:inverse(b, b) -- in place: back to n times the signal
        got = b:download()
        for i = 1, #x do x[i] = x[i] * n end
        close(got, x, TOL[t], ("%s c2c inverse %s"):format(t, table.concat(shape, "x")))
      end
    end
  end)

  it("runs r2c and c2r transforms, keeping n/2 + 1 points of the last dimension", function()
    for _, t in ipairs { "f32", "f64" } do
      for _, shape in ipairs(SHAPES) do
        local n, last, batch = prod(shape), shape[#shape], 2
        local half = n // last * (last // 2 + 1)
        local lens = #shape == 1 and shape[1] or shape
        local r2c = cuda.fft(lens, "r2c", { type = t, batch = batch })
        local c2r = cuda.fft(lens, "c2r", { type = t, batch = batch })
        local ri, ro = r2c:elements()
        assert.equal(n * batch, ri)
        assert.equal(2 * half * batch, ro)
        local ci, co = c2r:elements()
        assert.equal(ro, ci)
        assert.equal(ri, co)
        local x = signal(n * batch, 7 * n)
        local spec = cuda.buffer(t, ro)
        r2c:forward(upload(t, x), spec)
        close(spec:download(), half_spectrum(shape, x, batch), TOL[t], ("%s r2c %s"):format(t, table.concat(shape, "x")))
        local back = cuda.buffer(t, ri)
        c2r:inverse(spec, back)
        local b = back:download()
        for i = 1, #x do x[i] = x[i] * n end
        close(b, x, TOL[t], ("%s c2r %s"):format(t, table.concat(shape, "x")))
      end
    end
  end)

  it("captures transforms into a graph that runs them on each replay's data", function()
    local s = cuda.stream()
    local p = cuda.fft(16, "c2c", { stream = s })
    local a, b = cuda.buffer("f32", 32), cuda.buffer("f32", 32)
    local g = s:capture(function()
      p:forward(a, b)
      p:inverse(b, b, s)
    end)
    for round = 1, 3 do
      local x = signal(32, round)
      a:upload(x)
      g:launch()
      s:synchronize()
      for i = 1, 32 do x[i] = x[i] * 16 end
      close(b:download(), x, TOL.f32, "replay " .. round)
    end
    local err = H.error_of(p.free, p)
    assert.matches("cannot free cugraph.FFT: it is used by live cugraph.Graph", tostring(err))
    p = nil
    collectgarbage()
    collectgarbage()
    local x = signal(32, 9)
    a:upload(x)
    g:launch() -- the collected plan and its work area live on with the graph
    s:synchronize()
    for i = 1, 32 do x[i] = x[i] * 16 end
    close(b:download(), x, TOL.f32, "replay after the plan was collected")
    g:free()
  end)

  it("captures r2c, c2r and c2c plans of 1, 2 and 3 dimensions in f32 and f64", function()
    local s = cuda.stream()
    for _, t in ipairs { "f32", "f64" } do
      for _, shape in ipairs { { 8 }, { 4, 6 }, { 3, 2, 5 } } do
        local n, batch = prod(shape), 2
        local lens = #shape == 1 and shape[1] or shape
        local o = { type = t, batch = batch, stream = s }
        local r2c, c2r, c2c = cuda.fft(lens, "r2c", o), cuda.fft(lens, "c2r", o), cuda.fft(lens, "c2c", o)
        local _, nhalf = r2c:elements()
        local real, half = cuda.buffer(t, n * batch), cuda.buffer(t, nhalf)
        local cin, back = cuda.buffer(t, nhalf), cuda.buffer(t, n * batch)
        local z, zf = cuda.buffer(t, 2 * n * batch), cuda.buffer(t, 2 * n * batch)
        local g = s:capture(function()
          r2c:forward(real, half)
          c2r:inverse(cin, back, s)
          c2c:forward(z, zf)
        end)
        r2c, c2r, c2c = nil, nil, nil
        collectgarbage()
        for round = 1, 2 do
          local what = ("%s %s replay %d"):format(t, table.concat(shape, "x"), round)
          local x, y, w = signal(n * batch, 3 * n + round), signal(n * batch, 5 * n + round),
                          signal(2 * n * batch, 7 * n + round)
          real:upload(x)
          cin:upload(half_spectrum(shape, y, batch)) -- c2r of it: n times y
          z:upload(w)
          g:launch()
          s:synchronize()
          close(half:download(), half_spectrum(shape, x, batch), TOL[t], what .. ": r2c")
          for i = 1, #y do y[i] = y[i] * n end
          close(back:download(), y, TOL[t], what .. ": c2r")
          close(zf:download(), spectrum(shape, w, batch), TOL[t], what .. ": c2c")
        end
        g:free()
      end
    end
  end)

  it("checks lengths, kinds, types, sizes and overlap before cuFFT", function()
    local function err(fn, ...) return tostring(H.error_of(fn, ...)) end
    assert.matches("length 1 is 0; lengths are 1 .. 2%^31", err(cuda.fft, 0, "c2c"))
    assert.matches("4 lengths; a plan has 1, 2 or 3", err(cuda.fft, { 2, 2, 2, 2 }, "c2c"))
    assert.matches("length 2 is not an integer", err(cuda.fft, { 2, 1.5 }, "c2c"))
    assert.matches("invalid option 'z2z'", err(cuda.fft, 4, "z2z"))
    assert.matches("type must be f32 or f64, got f16", err(cuda.fft, 4, "c2c", { type = "f16" }))
    assert.matches("batch must be an integer in 1 .. 2%^31", err(cuda.fft, 4, "c2c", { batch = 0 }))
    assert.matches("unknown option 'batches'", err(cuda.fft, 4, "c2c", { batches = 2 }))
    -- the product of the lengths and the batch, checked without overflowing
    local m = 1 << 31
    assert.matches("cuda.fft: lengths 2147483648 x 2147483648 x 2147483648, batch 1: more than 2%^40 points in all",
                   err(cuda.fft, { m, m, m }, "c2c"))
    assert.matches("cuda.fft: lengths 2147483648 x 2147483648 x 2, batch 1: more than 2%^40 points in all",
                   err(cuda.fft, { m, m, 2 }, "r2c"))
    assert.matches("cuda.fft: lengths 1048576 x 2048, batch 1048576: more than 2%^40 points in all",
                   err(cuda.fft, { 1 << 20, 1 << 11 }, "c2c", { batch = 1 << 20 }))
    assert.matches("cuda.fft: lengths 2147483648, batch 2147483648: more than 2%^40 points in all",
                   err(cuda.fft, m, "c2r", { batch = m }))
    local ok, wide = pcall(cuda.fft, 1, "c2c", { batch = m })
    if ok then
      assert.equal("cugraph.FFT (c2c f32 1, batch 2147483648, device 0)", tostring(wide))
      assert.same({ 2 * m, 2 * m }, { wide:elements() })
      wide:free()
    else -- past the checks, cuFFT may refuse a batch this large, or the
      -- device the plan's work area
      assert.is_true(H.gpu, tostring(wide))
      assert.is_truthy(wide.api == "cufftMakePlanMany64" or wide.api == "cuMemAlloc", tostring(wide))
    end
    local p = cuda.fft(4, "c2c")
    local r = cuda.fft(4, "r2c")
    local c = cuda.fft(4, "c2r")
    assert.matches("an r2c plan goes forward only", err(r.inverse, r, cuda.buffer("f32", 4), cuda.buffer("f32", 6)))
    assert.matches("a c2r plan goes inverse only", err(c.forward, c, cuda.buffer("f32", 6), cuda.buffer("f32", 4)))
    assert.matches("input holds 4 f32; the plan's complex input needs 8 %(re, im pairs%)",
                   err(p.forward, p, cuda.buffer("f32", 4), cuda.buffer("f32", 8)))
    assert.matches("output is f64; the plan is f32", err(p.forward, p, cuda.buffer("f32", 8), cuda.buffer("f64", 8)))
    assert.matches("input must be a cugraph.Buffer, got table", err(p.forward, p, {}, cuda.buffer("f32", 8)))
    local big = cuda.buffer("f32", 16)
    assert.matches("input and output overlap; in place, give the same buffer twice",
                   err(p.forward, p, big:view(0, 8), big:view(4, 8)))
    local rb = cuda.buffer("f32", 10)
    assert.matches("input and output overlap; a real transform needs two buffers",
                   err(r.forward, r, rb:view(0, 4), rb:view(2, 6)))
    assert.matches("input is not aligned to a complex f32 %(an address of a multiple of 8 bytes%)",
                   err(p.forward, p, big:view(1, 8), big:view(8, 8)))
    assert.matches("too many arguments", err(p.forward, p, big:view(0, 8), big:view(8, 8), nil, 1))
    local s = cuda.stream()
    local e = H.error_of(function()
      s:capture(function() p:forward(big:view(0, 8), big:view(8, 8)) end)
    end)
    assert.matches("fft:forward without a stream inside a graph capture", tostring(e))
    p:free()
    assert.matches("freed", err(p.forward, p, big:view(0, 8), big:view(8, 8)))
  end)

  it("makes no Lua garbage per transform", function()
    local s = cuda.stream()
    local p = cuda.fft(8, "c2c", { stream = s })
    local a, b = cuda.buffer("f32", 16):fill(0), cuda.buffer("f32", 16)
    local function go() p:forward(a, b) end
    H.garbage(go, 10)
    assert.equal(0, H.garbage(go, 2000))
    s:synchronize()
  end)

  it("says which library is missing, and everything else still works", function()
    local code, out = H.script([[
      local cuda = require "cugraph"
      print(pcall(cuda.fft, 8, "c2c"))
      print(cuda.buffer("f32", 4):fill(3):download()[1])
    ]], "CUGRAPH_LUA_LIBCUFFT=/nonexistent/libcufft.so")
    assert.equal(0, code, out)
    assert.matches("false\t.-cuFFT.-/nonexistent/libcufft.so", out)
    assert.matches("CUGRAPH_LUA_LIBCUFFT", out)
    assert.matches("\n3.0\n", out)
  end)

  it("reports a failing cuFFT call with its result", function()
    if H.gpu then return pending("the stand-in's injected faults") end
    local code, out = H.script([[
      local cuda = require "cugraph"
      local ok, err = pcall(cuda.fft, 8, "c2c")
      print(ok, err.api, err.name)
      local p = cuda.fft(8, "c2c")
      local a = cuda.buffer("f32", 16)
      ok, err = pcall(p.forward, p, a, a)
      print(ok, err.api, err.name)
      p:forward(a, a)
      print("after")
    ]], "CUFFT_DOUBLE_FAULT=cufftMakePlanMany64:1:2,cufftExecC2C:1:6")
    assert.equal(0, code, out)
    assert.matches("false\tcufftMakePlanMany64\tCUFFT_ALLOC_FAILED", out)
    assert.matches("false\tcufftExecC2C\tCUFFT_EXEC_FAILED", out)
    assert.matches("after", out)
  end)
end)
