-- Modules and kernels: loading PTX/cubin, signatures, bad images.
local H = require "support.helper"
local cuda = H.cuda

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

describe("cugraph.Module", function()
  it("loads PTX from a file and from a string", function()
    local m = cuda.module(H.build .. "/kernels.ptx")
    local names = m:kernels()
    assert.is_true(#names >= 10)
    local m2 = cuda.module(read(H.build .. "/kernels.ptx"))
    assert.equals(#names, #m2:kernels())
    assert.matches("^cugraph%.Module %(%d+ kernels%)$", tostring(m))
  end)

  it("reads each kernel's signature from the PTX", function()
    local m = H.kernels()
    assert.equals("saxpy(f32, u64|ptr, u64|ptr, b32)", m.saxpy:signature())
    assert.equals(4, m.saxpy:params())
    assert.equals("noop()", m.noop:signature())
    -- a C++ kernel: the mangled entry name gives the C types
    assert.equals("axpy(f32, const f32*, f32*, i32)", m.axpy:signature())
    assert.equals(m.axpy, m:kernel("_Z4axpyfPKfPfi"))
    assert.equals(m.saxpy, m.saxpy) -- one object per name
    assert.matches("^cugraph%.Kernel saxpy%(", tostring(m.saxpy))
  end)

  it("names the kernels it has when one is missing", function()
    local m = H.kernels()
    assert.is_nil(m.saxpi)
    assert.error_matches(function() m:kernel("saxpi") end, "module has no kernel 'saxpi' %(it has: .*saxpy")
    assert.error_matches(function() m:kernel("nope") end, "no kernel 'nope'")
  end)

  it("takes an explicit signature", function()
    local m = H.kernels()
    local k = m:kernel("saxpy", "float a, const float *x, float *y, int n")
    assert.equals("saxpy(f32, const f32*, f32*, i32)", k:signature())
    assert.error_matches(function() m:kernel("saxpy", "float, flaot") end, "unknown type 'flaot'")
  end)

  it("checks an explicit signature against the PTX entry before the driver", function()
    local m = H.kernels()
    assert.error_matches(function() m:kernel("saxpy", "float a") end,
                         "saxpy: the signature has 1 parameter, the PTX entry 4")
    assert.error_matches(function() m:kernel("saxpy", "double a, float *x, float *y, int n") end,
                         "saxpy: the signature gives parameter 1 8 bytes, the PTX entry 4")
    assert.error_matches(function() m:kernel("noop", "int n") end,
                         "noop: the signature has 1 parameter, the PTX entry 0")
  end)

  it("reads .ptr parameters whose qualifiers are written as one word", function()
    local ptx = ".version 8.0\n.target sm_90\n.address_size 64\n" ..
      ".visible .entry k(.param .u64 .ptr.global.align 16 p, .param .u32 n)\n{\nret;\n}\n"
    local e = cuda.entries(ptx)[1]
    assert.same({ "u64|ptr", "b32" }, e.params)
    assert.error_matches(function() cuda.entries(ptx:gsub("%.global", ".bogus")) end,
                         "malformed parameter 1 of entry 'k'")
  end)

  it("loads a cubin, whose kernels need a signature", function()
    if H.sim then -- the simulator runs PTX: a cubin is refused, and says why
      local err = H.error_of(cuda.module, H.build .. "/kernels.cubin")
      assert.equals("CUDA_ERROR_NO_BINARY_FOR_GPU", err.name)
      assert.matches("kernels.cubin: no PTX in this image; the simulator runs PTX",
                     tostring(err), 1, true)
      return
    end
    local m = cuda.module(H.build .. "/kernels.cubin")
    assert.error_matches(function() return m.saxpy end, "use m:kernel%(name, signature%)")
    assert.error_matches(function() m:kernel("saxpy", "f64, const f32*, f32*, i32") end,
                         "saxpy: the signature gives parameter 1 8 bytes, the kernel 4")
    assert.error_matches(function() m:kernel("saxpy", "f32, const f32*, f32*") end,
                         "saxpy: the signature has 3 parameters, the kernel more")
    assert.error_matches(function() m:kernel("saxpy", "f32, f32*, f32*, i32, i32") end,
                         "saxpy: the signature has 5 parameters, the kernel 4")
    local k = m:kernel("saxpy", "f32, const f32*, f32*, i32")
    local s = cuda.stream()
    local x = cuda.buffer("f32", { 1, 2, 3 })
    local y = cuda.buffer("f32", { 10, 20, 30 })
    k:launch(s, 1, 32, 2.0, x, y, 3)
    s:synchronize()
    assert.same({ 12, 24, 36 }, y:download())
  end)

  it("loads a fatbin, from a file and from a string", function()
    for _, src in ipairs { H.build .. "/kernels.fatbin", read(H.build .. "/kernels.fatbin") } do
      local m = cuda.module(src)
      local k = m:kernel("iota_u32", "unsigned *out, unsigned base, int n")
      local s = cuda.stream()
      local out = cuda.buffer("u32", 5)
      k:launch(s, 1, 32, out, 7, 5)
      s:synchronize()
      assert.same({ 7, 8, 9, 10, 11 }, out:download())
    end
  end)

  it("refuses what is not PTX, before the driver", function()
    assert.error_matches(function() cuda.module("hello\nworld") end, "not PTX")
    assert.error_matches(function() cuda.module("\0\1\2\3\n") end, "not PTX")
    local ptx = read(H.build .. "/kernels.ptx")
    local cut = ptx:sub(1, ptx:find("saxpy_param_1") + 5)
    assert.error_matches(function() cuda.module(cut) end, "truncated PTX")
    assert.error_matches(function() cuda.module("/no/such/file.ptx") end,
                         "is not PTX, cubin or fatbin, and no file has that name; load files with cuda.load_module")
    assert.error_matches(function() cuda.load_module("/no/such/file.ptx") end, "No such file")
    assert.error_matches(function() cuda.module(42) end, "string expected, got number")
  end)

  it("raises the JIT's error for PTX the driver rejects", function()
    local bad = ".version 8.0\n.target sm_75\n.address_size 64\n" ..
                ".visible .entry k(.param .u32 n)\n{\n  bogus.instruction %r1;\n}\n"
    local err = H.error_of(cuda.module, bad)
    assert.equals("cuModuleLoadDataEx", err.api)
    assert.is_string(err.name)
    assert.is_string(err.log)
  end)

  it("lists the entries of a PTX text", function()
    local es = cuda.entries(read(H.build .. "/kernels.ptx"))
    local byname = {}
    for _, e in ipairs(es) do byname[e.base] = e end
    assert.same({ "f32", "u64|ptr", "u64|ptr", "b32" }, byname.saxpy.params)
    assert.is_false(byname.saxpy.typed)
    assert.is_true(byname.axpy.typed)
    assert.equals("_Z4axpyfPKfPfi", byname.axpy.name)
  end)

  it("frees three ways; its kernels then refuse to launch", function()
    local m = cuda.module(H.build .. "/kernels.ptx")
    local k = m.noop
    m:free()
    m:close()
    assert.equals("cugraph.Module (freed)", tostring(m))
    assert.error_matches(function() k:launch(cuda.stream(), 1, 1) end, "kernel of a freed cugraph.Module")
    assert.error_matches(function() m:kernels() end, "attempt to use a freed cugraph.Module")
    do local _ <close> = cuda.module(H.build .. "/kernels.ptx") end
  end)
end)

describe("module globals", function()
  local src = [[
__constant__ float taps[5];
__device__ int counter;
__device__ unsigned table[4] = {1, 2, 3, 4};
__device__ double scale = 2.5;
extern "C" __global__ void conv(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= 2 && i < n - 2) {
    float s = 0;
    for (int k = 0; k < 5; k++) s += taps[k] * in[i + k - 2];
    out[i] = s;
  }
  if (i < n) atomicAdd(&counter, -1);
}
extern "C" __global__ void read_table(unsigned *out) { out[threadIdx.x] = table[threadIdx.x] * scale; }
]]
  if not (H.gpu or H.sim) then
    it("say the test double's modules have none", function()
      local m = cuda.load_module(H.build .. "/kernels.ptx")
      assert.error_matches(function() m:global("x") end, "this CUDA driver has no module globals")
    end)
    return
  end
  local s
  setup(function() s = cuda.stream() end)

  it("are Buffers typed from their C declarations, listed when one is missing", function()
    local m <close> = cuda.compile(src, { cache = false })
    local want = { taps = "f32%[5%]", counter = "i32%[1%]", table = "u32%[4%]", scale = "f64%[1%]" }
    for name, shape in pairs(want) do
      local g <close> = m:global(name)
      assert.matches("^cugraph%.Buffer " .. shape .. " %(0x%x+, module global%)$", tostring(g))
    end
    assert.error_matches(function() m:global("nope") end,
      "module 'kernel.cu' has no global 'nope' %(it has: taps, counter, table, scale%)")
    local t <close> = m:global("table")
    assert.same({ 1, 2, 3, 4 }, t:download()) -- the initializer
    local b <close> = m:global("table", "u8") -- another element type: 16 bytes
    assert.equals(16, #b)
    assert.error_matches(function() m:global("taps", "f64") end,
      "m:global: 'taps' is 20 bytes, not a whole number of f64")
  end)

  it("take their type from PTX where it says, and from the caller where it does not", function()
    local ptx = ".version 8.0\n.target sm_90\n.address_size 64\n" ..
                ".visible .global .align 4 .f32 xs[8];\n.visible .const .align 4 .b32 bits;\n" ..
                ".visible .entry k()\n{\n\tret;\n}\n"
    local m <close> = cuda.module(ptx, "vars.ptx")
    local xs <close> = m:global("xs")
    assert.matches("f32%[8%]", tostring(xs))
    assert.error_matches(function() m:global("bits") end,
      "m:global: the type of 'bits' is not known %(PTX declares it as bits or bytes%); give it")
    local bits <close> = m:global("bits", "u32")
    bits:fill(7)
    assert.same({ 7 }, bits:download())
  end)

  it("are written and read eagerly and by a graph's copy nodes, as the kernels see them", function()
    local m <close> = cuda.compile(src, { cache = false })
    local taps <close> = m:global("taps")
    local counter <close> = m:global("counter")
    local n = 16
    local x <close> = cuda.buffer("f32", n):fill(1)
    local y <close> = cuda.buffer("f32", n):fill(0)
    local w <close> = cuda.buffer("f32", { 1, 2, 3, 2, 1 })
    taps:upload({ 0, 0, 1, 0, 0 })
    counter:fill(0)
    m.conv:launch(s, 1, n, x, y, n)
    assert.equals(1, y:download()[3])
    local g <close> = s:capture(function()
      taps:copy(w, s)          -- a copy node into constant memory
      counter:fill(100, s)     -- a memset node
      m.conv:launch(s, 1, n, x, y, n)
    end)
    g:launch()
    assert.equals(9, y:download()[3])
    assert.same({ 100 - n }, counter:download())
    w:upload({ 1, 1, 1, 1, 1 })
    g:launch()
    assert.equals(5, y:download()[3])
    local t <close> = cuda.buffer("u32", 4)
    m.read_table:launch(s, 1, 4, t)
    assert.same({ 2, 5, 7, 10 }, t:download())
  end)

  it("keep their module: its free and reload are refused while one is open", function()
    local m = cuda.compile(src, { cache = false })
    local taps = m:global("taps")
    assert.error_matches(function() m:free() end,
      "cannot free cugraph%.Module 'kernel%.cu': 1 open buffer over its globals %(m:global%); free them first")
    assert.error_matches(function() m:reload(cuda.ptx(src, { arch = "sm_90" })) end,
      "reload: 1 open buffer over the globals of module 'kernel.cu' (m:global) would outlive its code", 1, true)
    local g = s:capture(function() taps:fill(1, s) end)
    assert.error_matches(function() taps:free() end, "used by live cugraph%.Graph #" .. g:id())
    g:free()
    taps:free()
    m:free()
    assert.error_matches(function() taps:download() end, "freed")
  end)
end)
