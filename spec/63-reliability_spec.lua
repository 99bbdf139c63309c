-- The failure classes of the features added last (RELIABILITY.md): every
-- way to free a buffer sees its views; graph memory outside its graph's
-- time is refused before the driver; condition setters compare numbers;
-- option tables name an unknown key; argument errors number as written.
local H = require "support.helper"
local cuda = H.cuda

local N = 64

describe("every way to free a buffer", function()
  local k = H.kernels()

  it("sees its views: b:free(), b:close(), __close, b:free(stream)", function()
    local s = cuda.stream()
    local plain = cuda.buffer("i32", N):fill(0)
    local v = plain:view(8, 8)
    for _, free in ipairs {
      function() plain:free() end, function() plain:close() end,
      function() debug.getmetatable(plain).__close(plain) end,
      function() plain:free(s) end,
    } do
      assert.error_matches(free, "cannot free cugraph%.Buffer i32%[64%]: 1 open view over it")
    end
    local async = cuda.buffer("i32", N, { stream = s })
    local av = async:view(0, 4)
    assert.error_matches(function() async:free(s) end, "1 open view over it")
    av:free(); v:free()
    async:free(s); plain:free()
  end)

  it("sees its views in a free node of a capture", function()
    local s = cuda.stream()
    local err = H.error_of(s.capture, s, function()
      local b = cuda.buffer("i32", N, { stream = s })
      local v = b:view(0, 8)
      k.inc_i32:launch(s, 1, 8, v, 8)
      b:free(s) -- the view would read freed memory in the next nodes
    end)
    assert.matches("cannot free cugraph%.Buffer i32%[64%]: 1 open view over it", tostring(err))
    assert.is_false(cuda.status().capturing)
  end)
end)

describe("memory a graph allocates", function()
  local k = H.kernels()

  it("is refused outside the graph until a launch allocates it, and after its free", function()
    local s = cuda.stream()
    local b
    local g = s:capture(function()
      b = cuda.buffer("i32", N, { stream = s })
      k.inc_i32:launch(s, 1, N, b, N)
    end)
    local v = b:view(0, 8)
    local why = "the cugraph%.Buffer is memory that cugraph%.Graph #" .. g:id()
                .. " allocates, and is not allocated now"
    assert.error_matches(function() k.inc_i32:launch(s, 1, N, b, N) end, why)
    assert.error_matches(function() k.inc_i32:launch(s, 1, 8, v, 8) end, why)
    assert.error_matches(function() b:download() end, why)
    assert.error_matches(function() b:fill(0) end, why)
    assert.error_matches(function() v:upload({ 1 }) end, why)
    assert.error_matches(function() cuda.buffer("i32", N):copy(b) end, why)
    g:launch() -- from here it is allocated
    k.inc_i32:launch(s, 1, N, b, N)
    s:synchronize()
    assert.is_number(b:download()[1])
    v:free()
    b:free(s)
    s:synchronize()
    assert.error_matches(function() k.inc_i32:launch(s, 1, N, b, N) end, why)
    g:launch(); s:synchronize() -- allocated again by the next launch
    v = nil -- luacheck: ignore
    collectgarbage()
    b:free()
    g:free()
  end)

  it("is kept by its graph when the buffer is collected", function()
    local s = cuda.stream()
    local g
    do
      local b
      g = s:capture(function()
        b = cuda.buffer("i32", N, { stream = s })
        k.inc_i32:launch(s, 1, N, b, N)
        b:free(s)
      end)
    end
    collectgarbage(); collectgarbage()
    for _ = 1, 3 do g:launch() end
    s:synchronize()
    g:free()
  end)
end)

describe("condition setters", function()
  it("compare as numbers, or refuse, a value outside the element type", function()
    if not cuda.available() or H.gpu and cuda.device().major < 9 then return end
    local s = cuda.stream()
    local results = cuda.buffer("u32", 8):fill(0)
    local m = H.kernels()
    local function when(buf, op, value)
      local c = cuda.condition(0)
      results:fill(0)
      local g = s:capture(function()
        c:set_when(s, buf, op, value)
        s:branch(c, function() m.inc_i32:launch(s, 1, 1, results:view(0, 1, "i32"), 1) end)
      end)
      g:launch(); s:synchronize()
      g:free(); c:free()
      return results:download()[1] == 1
    end
    local u = cuda.buffer("u32", { 5 })
    assert.is_true(when(u, ">", -1))    -- every u32 is above -1
    assert.is_false(when(u, "<", -1))
    assert.is_false(when(u, "==", -1))
    assert.is_true(when(u, "~=", -1))
    assert.is_false(when(u, ">", 1 << 40)) -- and below 2^40
    local b8 = cuda.buffer("i8", { -3 })
    assert.is_true(when(b8, ">", -200))
    assert.is_true(when(b8, "<", 200))
    assert.is_true(when(b8, "==", -3))
    local c, u64 = cuda.condition(0), cuda.buffer("u64", 1)
    assert.error_matches(function()
      s:capture(function() c:set_when(s, u64, ">", -1) end)
    end, "a negative value for a buffer of u64")
  end)
end)

describe("option tables", function()
  it("refuse an unknown key, naming it and the valid ones", function()
    local s = cuda.stream()
    local b = cuda.buffer("f32", 4)
    local function refused(fn, what, key, valid)
      assert.error_matches(fn, what .. ": unknown option '" .. key .. "' %(valid: " .. valid .. "%)")
    end
    refused(function() cuda.event { timimg = false } end, "cuda.event", "timimg", "timing")
    refused(function() cuda.buffer("f32", 4, { strem = s }) end, "cuda.buffer", "strem", "stream")
    refused(function() s:capture(function() b:fill(0, s) end, { autofree = true }) end,
            "s:capture", "autofree", "mode, auto_free, upload")
    refused(function() b:copy(b, { cont = 1 }) end, "copy", "cont", "dst_offset, src_offset, count")
  end)

  it("refuse an unknown key in every function that takes options", function()
    -- every caller of the runtime's option check (cg_check_options), and
    -- the Lua front end's own tables; each call is valid but for the key
    local k = H.kernels()
    local s = cuda.stream()
    local f = cuda.buffer("f32", 16):fill(1)
    local g = s:capture(function() f:fill(2, s) end)
    local a = cuda.array("f32", 4, 4)
    local blas = cuda.blas(s)
    local m2 = cuda.buffer("f32", 4):fill(1)
    local calls = {
      { "cuda.stream", function() return cuda.stream { prioirty = 0 } end },
      { "k:config", function() return k.inc_i32:config { cooperatve = true } end },
      { "cuda.array", function() return cuda.array("f32", 4, { surfce = true }) end },
      { "a:texture", function() return a:texture { filtr = "point" } end },
      { "copy2d", function() return f:copy2d(f, 4, 4, { srcx = 0 }) end },
      { "copy3d", function() return f:copy3d(f, 4, 2, 2, { srcx = 0 }) end },
      { "cuda.blas", function() return cuda.blas(s, { workspce = 0 }) end },
      { "blas:axpy", function() return blas:axpy(1, m2, m2, { inx = 1 }) end },
      { "blas:gemv", function() return blas:gemv(m2, f, f, { m = 2, n = 2, tran = true }) end },
      { "blas:dot", function() return blas:dot(m2, m2, { inx = 1 }) end },
      { "blas:nrm2", function() return blas:nrm2(m2, { inx = 1 }) end },
      { "blas:gemm", function() return blas:gemm(m2, m2, m2, { m = 2, n = 2, k = 2, btch = 1 }) end },
      { "blas:matmul", function() return blas:matmul(m2, m2, m2, { m = 2, n = 2, k = 2, bais = f }) end },
      { "cuda.fft", function() return cuda.fft(8, "c2c", { bach = 1 }) end },
      { "g:dot", function() return g:dot("/nonexistent/g.dot", { verbos = true }) end },
      { "g:profile", function() return g:profile { reps = 1 } end },
      { "cuda.rng", function() return cuda.rng(1, { subseq = 1 }) end },
      { "cuda.elementwise", function() return cuda.elementwise("f32 x -> f32 y", "y = x", { nme = "e" }) end },
      { "compile", function() return cuda.compile("__global__ void z() {}", { fastmath = true }) end },
      { "compile", function() return cuda.ptx("__global__ void z() {}", { [1] = true }) end },
    }
    for _, c in ipairs(calls) do
      local ok, err = pcall(c[2])
      assert(not ok, c[1] .. " took an unknown option")
      assert.matches(c[1]:gsub("%p", "%%%0") .. ": unknown option '[%w_]+' %(valid: [%w_, ]+%)",
                     tostring(err))
    end
    blas:free(); a:free(); g:free()
  end)

  it("number arguments as written and name what was given", function()
    local s = cuda.stream()
    assert.error_matches(function() s:synchronize("soon") end,
                         "bad argument #1 to 'synchronize' %(number expected, got string%)")
    assert.error_matches(function() cuda.buffer("f32") end,
                         "bad argument #2 to 'buffer' %(number expected, got no value%)")
  end)
end)
