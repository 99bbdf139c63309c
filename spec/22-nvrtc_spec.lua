-- Runtime compilation: CUDA C to PTX through NVRTC, the disk cache, and the
-- C types that mangled names give to launches.
local H = require "support.helper"
local cuda = H.cuda

local axpy = [[
__global__ void axpy(float a, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void fill_u64(unsigned long long *out, unsigned long long v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = v + i;
}
]]

describe("cuda.ptx and cuda.compile", function()
  it("compiles CUDA C for a named architecture without a GPU", function()
    local ptx, log = cuda.ptx(axpy, { arch = "sm_90", cache = false })
    assert.matches("%.target sm_90", ptx)
    assert.matches("%.entry _Z4axpyfPKfPfi", ptx)
    assert.is_string(log)
    local byname = {}
    for _, e in ipairs(cuda.entries(ptx)) do byname[e.base] = e end
    assert.same({ "f32", "const f32*", "f32*", "i32" }, byname.axpy.params)
    assert.is_true(byname.axpy.typed)
    assert.same({ "u64|ptr", "u64|ptr", "b32" }, byname.fill_u64.params)
  end)

  it("raises the compiler's log on a compile error", function()
    local err = H.error_of(cuda.ptx, "__global__ void k() { undefined_thing = 1; }",
                           { arch = "sm_90", name = "broken.cu", cache = false })
    assert.equals("nvrtcCompileProgram", err.api)
    assert.equals("NVRTC_ERROR_COMPILATION", err.name)
    assert.matches("broken%.cu%(1%): error: identifier \"undefined_thing\" is undefined", err.message)
    assert.matches("undefined_thing", err.log)
    assert.matches("^nvrtcCompileProgram: NVRTC_ERROR_COMPILATION: broken%.cu", tostring(err))
  end)

  it("says clearly when NVRTC is missing", function()
    local code, out = H.run("-e " .. H.quote('require("cugraph").ptx("__global__ void k() {}", {arch = "sm_90"})'),
                            "CUGRAPH_LUA_LIBNVRTC=/nonexistent/libnvrtc.so")
    assert.equals(1, code)
    assert.matches("no NVRTC found %(/nonexistent/libnvrtc.so%)", out)
  end)

  it("passes options, defines and include paths through", function()
    local src = "extern \"C\" __global__ void k(int *o) { *o = N + M; }"
    local ptx = cuda.ptx(src, { arch = 90, defines = { N = 40, M = 2 }, std = "c++17",
                                lineinfo = true, fast_math = true, options = { "-DUNUSED" },
                                cache = false })
    assert.matches("42", ptx)
    assert.matches("%.loc", ptx)
    assert.error_matches(function() cuda.ptx(src, { arch = true }) end, "opts%.arch")
    assert.error_matches(function() cuda.ptx(src, { fastmath = true }) end, "unknown field 'fastmath'")
    assert.error_matches(function() cuda.ptx(42) end, "source: expected a string, got number")
    assert.error_matches(function() cuda.ptx(src, { arch = "sm_1" }) end, "NVRTC_ERROR_INVALID_OPTION")
  end)

  it("serves the second compile from the disk cache, and never trusts a corrupt entry", function()
    local dir = assert(cuda.compile_cache_dir())
    local src = axpy .. "\n// cache test " .. os.time() .. math.random(1e9) .. "\n"
    local before = {}
    for f in io.popen("ls " .. H.quote(dir)):lines() do before[f] = true end
    local p1 = cuda.ptx(src, { arch = "sm_90" })
    local entry
    for f in io.popen("ls " .. H.quote(dir)):lines() do
      if not before[f] then entry = dir .. "/" .. f end
    end
    assert.is_string(entry)
    local p2, log = cuda.ptx(src, { arch = "sm_90" })
    assert.equals(p1, p2)
    assert.equals("", log)
    local f = assert(io.open(entry, "r+b"))
    f:seek("set", 200)
    f:write("CORRUPT")
    f:close()
    assert.equals(p1, cuda.ptx(src, { arch = "sm_90" }))
  end)

  it("compiles, loads and launches with typed checks", function()
    local m = cuda.compile(axpy)
    local s = cuda.stream()
    local x = cuda.buffer("f32", { 1, 2, 3, 4 })
    local y = cuda.buffer("f32", { 10, 20, 30, 40 })
    assert.equals("axpy(f32, const f32*, f32*, i32)", m.axpy:signature())
    assert.error_matches(function() m.axpy:launch(s, 1, 32, 2, cuda.buffer("i32", 4), y, 4) end,
                         "argument 2 %(const f32%*%): expected cugraph.Buffer or cugraph.Scalar of f32, got cugraph.Buffer of i32")
    assert.error_matches(function() m.axpy:launch(s, 1, 32, 2, x, y, x) end,
                         "argument 4 %(i32%): expected number, got cugraph.Buffer")
    m.axpy:launch(s, 1, 32, 2, x, y, 4)
    s:synchronize()
    assert.same({ 12, 24, 36, 48 }, y:download())
  end)
end)
