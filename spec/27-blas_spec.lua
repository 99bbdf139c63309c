-- cuda.blas: cuBLAS (on a GPU) and its stand-in (on the test double and the
-- simulator) against host references: gemm in f32, f64, f16, bf16 and TF32
-- with transposes, leading dimensions, views and strided batches; gemv,
-- axpy, dot and nrm2; alpha and beta as DeviceScalars read per replay of a
-- captured graph; the handle and its workspace pinned by graphs; the
-- checks made before cuBLAS; a missing library.
local H = require "support.helper"
local cuda = H.cuda

-- A deterministic sequence of small integers in -3 .. 3, or of fractions.
local function ints(n, seed)
  local t, x = {}, seed
  for i = 1, n do
    x = (x * 1103515245 + 12345) % 2147483648
    t[i] = x % 7 - 3
  end
  return t
end
local function fracs(n, seed)
  local t = ints(n, seed)
  for i = 1, n do t[i] = t[i] / 4 + (i % 5) / 16 end
  return t
end

-- C = alpha op(A) op(B) + beta C, column-major, on the host.
local function ref_gemm(o, A, B, C)
  local out = {}
  for i = 1, #C do out[i] = C[i] end
  for bt = 0, (o.batch or 1) - 1 do
    for j = 0, o.n - 1 do
      for i = 0, o.m - 1 do
        local s = 0
        for l = 0, o.k - 1 do
          local ia = o.transa and (i * o.lda + l) or (l * o.lda + i)
          local ib = o.transb and (l * o.ldb + j) or (j * o.ldb + l)
          s = s + A[bt * (o.sa or 0) + ia + 1] * B[bt * (o.sb or 0) + ib + 1]
        end
        local ic = bt * (o.sc or 0) + j * o.ldc + i + 1
        out[ic] = (o.alpha or 1) * s + (o.beta or 0) * C[ic]
      end
    end
  end
  return out
end

local function close(got, want, tol, what)
  assert.equal(#want, #got, what)
  for i = 1, #want do
    local d = math.abs(got[i] - want[i])
    if d > tol * (1 + math.abs(want[i])) then
      error(("%s: element %d is %.9g, want %.9g"):format(what, i, got[i], want[i]), 2)
    end
  end
end

local function upload(t, data)
  local b = cuda.buffer(t, #data)
  b:upload(data)
  return b
end

describe("cuda.blas", function()
  local h
  before_each(function() h = cuda.blas() end)
  after_each(function()
    h = nil
    collectgarbage()
  end)

  it("multiplies f32 and f64 matrices, with transposes and leading dimensions", function()
    for _, t in ipairs { "f32", "f64" } do
      for _, tr in ipairs { { false, false }, { true, false }, { false, true }, { true, true } } do
        local m, n, k = 5, 3, 4
        local o = { m = m, n = n, k = k, transa = tr[1], transb = tr[2] }
        o.lda = (tr[1] and k or m) + 2
        o.ldb = (tr[2] and n or k) + 1
        o.ldc = m + 3
        o.alpha, o.beta = 1.5, -0.5
        local A = fracs(o.lda * (tr[1] and m or k), 1)
        local B = fracs(o.ldb * (tr[2] and k or n), 2)
        local C = fracs(o.ldc * n, 3)
        local c = upload(t, C)
        h:gemm(upload(t, A), upload(t, B), c, o)
        close(c:download(), ref_gemm(o, A, B, C), t == "f32" and 1e-5 or 1e-12,
              ("%s gemm transa=%s transb=%s"):format(t, tr[1], tr[2]))
      end
    end
  end)

  it("multiplies f16 and bf16 matrices with f32 accumulation, exactly on small integers", function()
    for _, t in ipairs { "f16", "bf16" } do
      local o = { m = 6, n = 5, k = 8, lda = 6, ldb = 8, ldc = 6, alpha = 0.5, beta = 2 }
      local A, B, C = ints(48, 4), ints(40, 5), ints(30, 6)
      local c = upload(t, C)
      h:gemm(upload(t, A), upload(t, B), c, o)
      close(c:download(), ref_gemm(o, A, B, C), 0, t .. " gemm")
    end
  end)

  it("rounds f32 inputs to TF32 on request", function()
    -- a = p + 2^-12 (p = 1, 2, 3) is exact in f32; TF32 keeps 10 bits of
    -- mantissa, and 2^-12 is below half of its last bit here, so rounding
    -- to nearest and truncating both give p. With b small positive
    -- integers every product and sum is exact in f32 either way: f32 math
    -- gives exactly sum (p + 2^-12) b, TF32 exactly sum p b, less by
    -- 2^-12 sum b (at least 2^-7 here, far above an f32 rounding).
    local m, n, k = 8, 8, 32
    local o = { m = m, n = n, k = k, lda = m, ldb = k, ldc = m, tf32 = true }
    local P, A, B = ints(m * k, 7), {}, ints(k * n, 8)
    for i = 1, m * k do
      P[i] = P[i] % 3 + 1.0
      A[i] = P[i] + 2 ^ -12
    end
    for i = 1, k * n do B[i] = B[i] % 3 + 1.0 end
    local exact = ref_gemm(o, A, B, ints(m * n, 1))
    local rounded = ref_gemm(o, P, B, ints(m * n, 1))
    local a, b, c = upload("f32", A), upload("f32", B), cuda.buffer("f32", m * n)
    h:gemm(a, b, c, o)
    local got = c:download()
    if H.gpu then
      -- CUBLAS_COMPUTE_32F_FAST_TF32 allows cuBLAS to use TF32 tensor
      -- cores but does not require it (it may pick an f32 kernel, for a
      -- small product say): one of the two results, exactly.
      local tf32 = got[1] == rounded[1]
      assert.same(tf32 and rounded or exact, got, "tf32 gemm: neither the TF32 nor the f32 product")
    else
      -- the stand-in rounds every input, to nearest (ties to even)
      assert.same(rounded, got, "tf32 gemm")
      local one = { m = 1, n = 1, k = 1, tf32 = true }
      for _, v in ipairs { { 1 + 3 * 2 ^ -12, 1 + 2 ^ -10 }, { 1 + 2 ^ -11, 1 },
                           { 1 + 3 * 2 ^ -11, 1 + 2 ^ -9 }, { -(2 + 3 * 2 ^ -11), -(2 + 2 ^ -9) } } do
        local x = cuda.buffer("f32", 1)
        h:gemm(upload("f32", { v[1] }), upload("f32", { 1 }), x, one)
        assert.equal(v[2], x:download()[1], ("tf32 of %.9g"):format(v[1]))
      end
    end
    o.tf32 = nil
    h:gemm(a, b, c, o)
    assert.same(exact, c:download(), "f32 gemm")
  end)

  it("runs strided batches, and gemm on views of one buffer", function()
    local o = { m = 3, n = 2, k = 4, lda = 3, ldb = 4, ldc = 3, batch = 5,
                sa = 12, sb = 8, sc = 6 }
    local A, B, C = fracs(60, 9), fracs(40, 10), fracs(30, 11)
    local c = upload("f32", C)
    h:gemm(upload("f32", A), upload("f32", B), c, { m = 3, n = 2, k = 4, batch = 5, beta = 1 })
    o.beta = 1
    close(c:download(), ref_gemm(o, A, B, C), 1e-5, "batched gemm")
    -- strides with gaps between the matrices (and leading dimensions above
    -- the rows); the gaps of c keep what they held
    for _, ta in ipairs { false, true } do
      local q = { m = 3, n = 2, k = 4, batch = 3, transa = ta, lda = (ta and 4 or 3) + 2, ldb = 6, ldc = 4,
                  alpha = 0.75, beta = 0.5 }
      q.sa, q.sb, q.sc = q.lda * (ta and 3 or 4) + 7, q.ldb * 2 + 5, q.ldc * 2 + 3
      local QA = fracs((q.batch - 1) * q.sa + q.lda * (ta and 3 or 4), 14)
      local QB = fracs((q.batch - 1) * q.sb + q.ldb * 2, 15)
      local QC = fracs((q.batch - 1) * q.sc + q.ldc * 2, 16)
      local qc = upload("f32", QC)
      h:gemm(upload("f32", QA), upload("f32", QB), qc, {
        m = 3, n = 2, k = 4, batch = 3, transa = ta, lda = q.lda, ldb = q.ldb, ldc = q.ldc,
        alpha = q.alpha, beta = q.beta, stride_a = q.sa, stride_b = q.sb, stride_c = q.sc })
      close(qc:download(), ref_gemm(q, QA, QB, QC), 1e-5, "batched gemm, strides with gaps, transa=" .. tostring(ta))
    end
    -- the same product of the third matrices, through views
    local all = upload("f64", (function()
      local t = {}
      for i = 1, 60 do t[#t + 1] = A[i] end
      for i = 1, 40 do t[#t + 1] = B[i] end
      for _ = 1, 30 do t[#t + 1] = 0 end
      return t
    end)())
    local va, vb, vc = all:view(24, 12), all:view(60 + 16, 8), all:view(100 + 12, 6)
    h:gemm(va, vb, vc, { m = 3, n = 2, k = 4 })
    local want = ref_gemm({ m = 3, n = 2, k = 4, lda = 3, ldb = 4, ldc = 3 },
                          { table.unpack(A, 25, 36) }, { table.unpack(B, 17, 24) }, ints(6, 1))
    close(vc:download(), want, 1e-12, "gemm on views")
    local rest = all:download()
    for i = 1, 60 do assert.equal(A[i] + 0.0, rest[i]) end -- the views wrote only c
  end)

  it("fuses a bias and relu or gelu into one cuBLASLt matmul, eager and captured", function()
    local function tanh(u) local e = math.exp(2 * u); return (e - 1) / (e + 1) end
    local function gelu(v) return 0.5 * v * (1 + tanh(0.7978845608 * (v + 0.044715 * v ^ 3))) end
    local s = cuda.stream()
    for _, t in ipairs { "f32", "f16", "bf16" } do
      local tol = t == "f32" and 1e-5 or t == "f16" and 2e-3 or 1.6e-2
      local o = { m = 6, n = 4, k = 8, transa = true, lda = 8, ldb = 8, ldc = 6 }
      local A, Bm, bias = fracs(48, 21), fracs(32, 22), fracs(6, 23)
      if t ~= "f32" then -- exact in the type
        A, Bm, bias = ints(48, 21), ints(32, 22), ints(6, 23)
      end
      local plain = ref_gemm(o, A, Bm, ints(24, 1))
      for _, epi in ipairs { "none", "relu", "gelu" } do
        local c = cuda.buffer(t, 24)
        h:matmul(upload(t, A), upload(t, Bm), c, { m = 6, n = 4, k = 8, transa = true,
                                                  bias = upload(t, bias), epilogue = epi }, s)
        s:synchronize()
        local want = {}
        for i = 1, 24 do
          local v = plain[i] + bias[(i - 1) % 6 + 1]
          want[i] = epi == "relu" and math.max(v, 0) or epi == "gelu" and gelu(v) or v
        end
        close(c:download(), want, epi == "gelu" and 10 * tol or tol, ("%s matmul, bias, %s"):format(t, epi))
      end
    end
    -- captured, alpha from a Scalar, relu without a bias
    local a, b, c = upload("f32", { 1, -2, 3, -4 }), upload("f32", { 1, 0, 0, 1 }), cuda.buffer("f32", 4)
    local alpha = cuda.scalar("f32", 1)
    h:matmul(a, b, c, { m = 2, n = 2, k = 2 }, s) -- the first matmul makes cuBLASLt's handle
    local g = s:capture(function()
      h:matmul(a, b, c, { m = 2, n = 2, k = 2, alpha = alpha, epilogue = "relu" }, s)
    end)
    alpha:set(-1)
    g:launch()
    s:synchronize()
    assert.same({ 0, 2, 0, 4 }, c:download())
    local e = H.error_of(h.matmul, h, a, b, c, { m = 2, n = 2, k = 2, epilogue = "tanh" })
    assert.matches("invalid option 'tanh'", tostring(e))
    e = H.error_of(h.matmul, h, a, b, c, { m = 2, n = 2, k = 2, bias = cuda.buffer("f32", 1) })
    assert.matches("bias is f32%[1%]; it must be f32 of at least m = 2 elements", tostring(e))
    e = H.error_of(h.matmul, h, cuda.buffer("f64", 4), cuda.buffer("f64", 4), cuda.buffer("f64", 4), { m = 2, n = 2, k = 2 })
    assert.matches("takes f32, f16 or bf16 matrices", tostring(e))
    e = H.error_of(h.matmul, h, a, b, c, { m = 2, n = 2, k = 2, batch = 2 })
    assert.matches("unknown option 'batch'", tostring(e))
    local fresh = cuda.blas(s)
    e = H.error_of(function() s:capture(function() fresh:matmul(a, b, c, { m = 2, n = 2, k = 2 }) end) end)
    assert.matches("the handle's first matmul is inside a capture", tostring(e))
    g:free()
  end)

  it("reads alpha and beta from DeviceScalars on every replay of a graph", function()
    local s = cuda.stream()
    local hs = cuda.blas(s)
    local o0 = { m = 4, n = 3, k = 2, lda = 4, ldb = 2, ldc = 4 }
    local A, B = fracs(8, 12), fracs(6, 13)
    local a, b, c = upload("f32", A), upload("f32", B), cuda.buffer("f32", 12)
    local alpha, beta = cuda.scalar("f32", 1), cuda.scalar("f32", 0)
    local g = s:capture(function()
      hs:gemm(a, b, c, { m = 4, n = 3, k = 2, alpha = alpha, beta = beta })
    end)
    local C = {}
    for i = 1, 12 do C[i] = 0 end
    for _, ab in ipairs { { 1, 0 }, { 2, 0 }, { -1, 1 }, { 0.5, 2 } } do
      alpha:set(ab[1])
      beta:set(ab[2])
      g:launch()
      o0.alpha, o0.beta = ab[1], ab[2]
      C = ref_gemm(o0, A, B, C)
      close(c:download(), C, 1e-5, ("replay alpha %g beta %g"):format(ab[1], ab[2]))
    end
    -- beta stays a number beside a Scalar alpha when it is 0 or 1
    local g1 = s:capture(function() hs:gemm(a, b, c, { m = 4, n = 3, k = 2, alpha = alpha, beta = 1 }) end)
    alpha:set(3)
    g1:launch()
    o0.alpha, o0.beta = 3, 1
    close(c:download(), ref_gemm(o0, A, B, C), 1e-5, "Scalar alpha, beta 1")
    g:free()
    g1:free()
    hs:free()
  end)

  it("computes gemv, axpy, dot and nrm2, with strides, into buffers and scalars", function()
    for _, t in ipairs { "f32", "f64" } do
      local tol = t == "f32" and 1e-5 or 1e-12
      local m, n = 5, 3
      local A, x, y = fracs(m * n, 14), fracs(n, 15), fracs(m, 16)
      local yb = upload(t, y)
      h:gemv(upload(t, A), upload(t, x), yb, { m = m, n = n, alpha = 2, beta = -1 })
      local want = {}
      for i = 0, m - 1 do
        local s = 0
        for j = 0, n - 1 do s = s + A[j * m + i + 1] * x[j + 1] end
        want[i + 1] = 2 * s - y[i + 1]
      end
      close(yb:download(), want, tol, t .. " gemv")
      local xt = upload(t, fracs(m, 17))
      local yt = cuda.buffer(t, n)
      h:gemv(upload(t, A), xt, yt, { m = m, n = n, trans = true })
      local xv = xt:download()
      for j = 0, n - 1 do
        local s = 0
        for i = 0, m - 1 do s = s + A[j * m + i + 1] * xv[i + 1] end
        want[j + 1] = s
      end
      close(yt:download(), { table.unpack(want, 1, n) }, tol, t .. " gemv trans")

      local u, v = fracs(9, 18), fracs(9, 19)
      local vb = upload(t, v)
      h:axpy(0.25, upload(t, u), vb, { n = 3, incx = 3, incy = 2 })
      local vw = {}
      for i = 1, 9 do vw[i] = v[i] end
      for i = 0, 2 do vw[2 * i + 1] = v[2 * i + 1] + 0.25 * u[3 * i + 1] end
      close(vb:download(), vw, tol, t .. " axpy")

      local d, sq = 0, 0
      for i = 1, 9 do
        d = d + u[i] * v[i]
        sq = sq + u[i] * u[i]
      end
      local ub, vb2 = upload(t, u), upload(t, v)
      close({ h:dot(ub, vb2) }, { d }, tol, t .. " dot returned")
      close({ h:nrm2(ub) }, { math.sqrt(sq) }, tol, t .. " nrm2 returned")
      local out = cuda.buffer(t, 4)
      out:fill(7)
      h:dot(ub, vb2, out:view(2, 1))
      h:nrm2(ub, out:view(3, 1))
      close(out:download(), { 7, 7, d, math.sqrt(sq) }, tol, t .. " results in views")
      local r = cuda.scalar(t)
      h:dot(ub, vb2, r, { n = 4 })
      local d4 = 0
      for i = 1, 4 do d4 = d4 + u[i] * v[i] end
      close({ r:get() }, { d4 }, tol, t .. " dot of 4 into a Scalar")
    end
  end)

  it("captures level-1 calls with device results, replayed with new inputs", function()
    local s = cuda.stream()
    local x, y = upload("f64", { 1, 2, 3 }), upload("f64", { 4, 5, 6 })
    local a = cuda.scalar("f64", 2)
    local r = cuda.buffer("f64", 2)
    local g = s:capture(function()
      h:axpy(a, x, y, s)
      h:dot(x, y, r:view(0, 1), s)
      h:nrm2(y, r:view(1, 1), s)
    end)
    g:launch()
    s:synchronize()
    -- y = 2x + y = 6, 9, 12; x.y = 6 + 18 + 36 = 60; |y| = sqrt(261)
    close(r:download(), { 60, math.sqrt(261) }, 1e-12, "first replay")
    a:set(-1)
    g:launch()
    s:synchronize()
    -- y = 5, 7, 9; x.y = 5 + 14 + 27 = 46; |y| = sqrt(155)
    close(r:download(), { 46, math.sqrt(155) }, 1e-12, "second replay")
    close(y:download(), { 5, 7, 9 }, 0, "y after two replays")
  end)

  it("keeps its handle and workspace for the graphs that captured it", function()
    local s = cuda.stream()
    local hs = cuda.blas(s)
    local a, b, c = upload("f32", { 1, 2, 3, 4 }), upload("f32", { 1, 0, 0, 1 }), cuda.buffer("f32", 4)
    local g = s:capture(function() hs:gemm(a, b, c, { m = 2, n = 2, k = 2 }) end)
    local err = H.error_of(hs.free, hs)
    assert.matches("cannot free cugraph.Blas: it is used by live cugraph.Graph", tostring(err))
    hs = nil
    collectgarbage()
    collectgarbage()
    g:launch()
    s:synchronize()
    assert.same({ 1, 2, 3, 4 }, c:download())
    g:free()
    collectgarbage()
  end)

  it("checks shapes, types, strides and options before cuBLAS", function()
    local a, b, c = cuda.buffer("f32", 12), cuda.buffer("f32", 8), cuda.buffer("f32", 6)
    local function err(fn, ...) return tostring(H.error_of(fn, ...)) end
    assert.matches("give the shape", err(h.gemm, h, a, b, c))
    assert.matches("m is required", err(h.gemm, h, a, b, c, { n = 2, k = 4 }))
    assert.matches("a holds 12 elements; op%(a%) 4 x 4 %(lda 4, batch 1%) needs 16",
                   err(h.gemm, h, a, b, c, { m = 4, n = 2, k = 4 }))
    assert.matches("lda must be in 3 .. 2147483647, got 2",
                   err(h.gemm, h, a, b, c, { m = 3, n = 2, k = 4, lda = 2 }))
    assert.matches("c holds 6 elements; c 3 x 2 %(ldc 3, batch 2%) needs 12",
                   err(h.gemm, h, a, b, c, { m = 3, n = 2, k = 4, batch = 2, stride_a = 0, stride_b = 0 }))
    assert.matches("a is f32, b f64, c f32; they must match",
                   err(h.gemm, h, a, cuda.buffer("f64", 8), c, { m = 3, n = 2, k = 4 }))
    assert.matches("cuBLAS has no i32 matrices",
                   err(h.gemm, h, cuda.buffer("i32", 4), cuda.buffer("i32", 4), cuda.buffer("i32", 4), { m = 2, n = 2, k = 2 }))
    assert.matches("tf32 is for f32 matrices",
                   err(h.gemm, h, cuda.buffer("f64", 4), cuda.buffer("f64", 4), cuda.buffer("f64", 4),
                       { m = 2, n = 2, k = 2, tf32 = true }))
    assert.matches("unknown option 'ms'", err(h.gemm, h, a, b, c, { ms = 3, n = 2, k = 4 }))
    assert.matches("m must be an integer, got string", err(h.gemm, h, a, b, c, { m = "3", n = 2, k = 4 }))
    assert.matches("b must be a cugraph.Buffer, got table", err(h.gemm, h, a, {}, c, { m = 3, n = 2, k = 4 }))
    assert.matches("alpha is a Scalar of f64; this call scales in f32",
                   err(h.gemm, h, a, b, c, { m = 3, n = 2, k = 4, alpha = cuda.scalar("f64", 1) }))
    assert.matches("beta is a number beside a Scalar",
                   err(h.gemm, h, a, b, c, { m = 3, n = 2, k = 4, alpha = cuda.scalar("f32", 1), beta = 0.5 }))
    assert.matches("takes f32 or f64 vectors, got f16", err(h.dot, h, cuda.buffer("f16", 4), cuda.buffer("f16", 4)))
    assert.matches("x is f32, y f64", err(h.axpy, h, 1, cuda.buffer("f32", 4), cuda.buffer("f64", 4)))
    assert.matches("y holds 2 elements; 4 elements %(incy 1%) needs 4",
                   err(h.axpy, h, 1, cuda.buffer("f32", 4), cuda.buffer("f32", 2)))
    assert.matches("incx must be in 1 ..", err(h.nrm2, h, cuda.buffer("f32", 4), { incx = 0 }))
    assert.matches("the result is f64; the vectors are f32",
                   err(h.dot, h, cuda.buffer("f32", 4), cuda.buffer("f32", 4), cuda.scalar("f64")))
    assert.matches("x holds 4 elements; x of 5 %(incx 1%) needs 5",
                   err(h.gemv, h, cuda.buffer("f32", 15), cuda.buffer("f32", 4), cuda.buffer("f32", 3), { m = 3, n = 5 }))
    assert.matches("too many arguments", err(h.nrm2, h, cuda.buffer("f32", 4), nil, cuda.stream(), 1))
    local freed = cuda.buffer("f32", 4)
    freed:free()
    assert.matches("freed", err(h.nrm2, h, freed))
    local s = cuda.stream()
    local x = cuda.buffer("f32", 4)
    local e = H.error_of(function() s:capture(function() h:dot(x, x) end) end)
    assert.matches("blas:dot inside a graph capture needs a result Buffer or Scalar", tostring(e))
    local one = cuda.buffer("f32", 1)
    e = H.error_of(function() s:capture(function() h:nrm2(x, one) end) end)
    assert.matches("without a stream inside a graph capture", tostring(e))
    assert.matches("workspace must be a byte count", err(cuda.blas, { workspace = -1 }))
    assert.matches("unknown option 'space'", err(cuda.blas, { space = 1 }))
    h:free()
    assert.matches("freed", err(h.nrm2, h, x))
  end)

  it("makes no Lua garbage per call", function()
    local a, b, c = cuda.buffer("f32", 4), cuda.buffer("f32", 4), cuda.buffer("f32", 4)
    local o = { m = 2, n = 2, k = 2 }
    local s = cuda.stream()
    local function gemm() h:gemm(a, b, c, o, s) end
    H.garbage(gemm, 10) -- what the collector itself keeps after its first cycle
    assert.equal(0, H.garbage(gemm, 2000))
    local r = cuda.scalar("f32")
    assert.equal(0, H.garbage(function() h:dot(a, b, r, s) end, 2000))
    s:synchronize()
  end)

  it("says which library is missing, and everything else still works", function()
    local code, out = H.script([[
      local cuda = require "cugraph"
      local ok, err = pcall(cuda.blas)
      print(ok, err)
      local b = cuda.buffer("f32", 4)
      b:fill(2)
      print(b:download()[4])
    ]], "CUGRAPH_LUA_LIBCUBLAS=/nonexistent/libcublas.so")
    assert.equal(0, code, out)
    assert.matches("false\t.-cuBLAS.-/nonexistent/libcublas.so", out)
    assert.matches("CUGRAPH_LUA_LIBCUBLAS", out)
    assert.matches("\n2.0\n", out)
  end)

  it("reports a failing cuBLAS call with its status", function()
    if H.gpu then return pending("the stand-in's injected faults") end
    local code, out = H.script([[
      local cuda = require "cugraph"
      local h = cuda.blas()
      local a = cuda.buffer("f32", 4)
      local ok, err = pcall(h.gemm, h, a, a, a, { m = 2, n = 2, k = 2 })
      print(ok, err.api, err.name, err.message)
      h:gemm(a, a, a, { m = 2, n = 2, k = 2 })
      print("after")
    ]], "CUBLAS_DOUBLE_FAULT=cublasGemmEx:1:13")
    assert.equal(0, code, out)
    assert.matches("false\tcublasGemmEx\tCUBLAS_STATUS_EXECUTION_FAILED\tthe GPU program failed to execute", out)
    assert.matches("after", out)
  end)
end)
