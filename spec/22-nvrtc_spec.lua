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
    assert.error_matches(function() cuda.ptx(src, { fastmath = true }) end,
                         "compile: unknown option 'fastmath' %(valid: arch, cache, defines, "
                         .. "fast_math, include, lineinfo, name, names, options, std%)")
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

  -- extern "C" kernels and device variables take their C types from the
  -- compile itself, their names read from the source first; a name the
  -- text hides (made by a macro) costs a front-end pass, a wrong guess
  -- (inside #if 0) a compile without the guesses
  local typed = [[
#define KERNEL(name) extern "C" __global__ void name(int *p, int v) { *p = v; }
__constant__ float coef[4];
extern "C" {
__global__ void __launch_bounds__(128) plain(float *x, unsigned n) { if (n) x[0] = coef[0]; }
}
__device__ unsigned long long counter;
namespace inner { __global__ void cxx(double *d) { d[0] = 1; } }
HIDDEN
]]
  local function variant(hidden) return (typed:gsub("HIDDEN", hidden)) end
  local variants = {
    plain = variant(""),
    macro = variant("KERNEL(made)"),
    wrong = variant('#if 0\nextern "C" __global__ void gone(int *p) {}\n#endif\nKERNEL(made)'),
  }

  it("types extern \"C\" kernels and device variables from the compile, also where the source hides them", function()
    for what, src in pairs(variants) do
      local ptx = cuda.ptx(src, { arch = "compute_90", cache = false })
      assert.not_matches("cugraph_lua_sig_", ptx, what)
      local m <close> = cuda.compile(src, { cache = false })
      assert.equals("plain(f32*, u32)", m.plain:signature(), what)
      assert.equals("cxx(f64*)", m:kernel("_ZN5inner3cxxEPd"):signature(), what)
      if what ~= "plain" then assert.equals("made(i32*, i32)", m.made:signature(), what) end
      if H.gpu or H.sim then -- the test double's modules have no globals
        local c <close> = m:global("coef")
        assert.matches("f32%[4%]", tostring(c), what)
        local n <close> = m:global("counter")
        assert.matches("u64%[1%]", tostring(n), what)
      end
    end
  end)

  it("compiles once when the source names its extern \"C\" kernels and variables plainly", function()
    local lib = H.build .. "/libnvrtc-fault.so"
    local counts = {}
    for what, src in pairs(variants) do
      local path = os.tmpname()
      local f = assert(io.open(path, "w"))
      f:write(("local cuda = require 'cugraph'\ncuda.ptx(%q, {arch = 'compute_90', cache = false})\n"):format(src))
      f:close()
      local n, code, out = H.trace(path, "NVRTC_FAULT_TRACE", "CUGRAPH_LUA_LIBNVRTC=" .. H.quote(lib))
      os.remove(path)
      assert.equals(0, code, out)
      counts[what] = { n.nvrtcCompileProgram or 0, n["nvrtcCompileProgram-syntax"] or 0 }
    end
    assert.same({ 1, 0 }, counts.plain)
    assert.same({ 1, 1 }, counts.macro) -- made's type from a front-end pass
    assert.same({ 2, 1 }, counts.wrong)
  end)

  it("gives kernels by their C++ names (opts.names): templates, overloads, namespaces", function()
    local src = [[
template <typename T, int B> __global__ void total(const T *in, T *out, int n) {
  T acc = 0;
  for (int i = threadIdx.x; i < n; i += B) acc += in[i];
  atomicAdd(out, acc);
}
template <typename T> __global__ void pair(const T *a, T *b, const T *c) { b[0] = a[0] + c[0]; }
__global__ void scale(float *x, float k) { x[threadIdx.x] *= k; }
__global__ void scale(double *x, double k) { x[threadIdx.x] *= k; }
namespace ns { __global__ void kern(unsigned *x) { x[0] = 7; } }
]]
    local names = { "total<float, 128>", "total<int, 64>", "pair<double>",
                    "(void(*)(float*, float))scale", "(void(*)(double*, double))scale", "ns::kern" }
    local m = cuda.compile(src, { names = names, arch = "sm_90", cache = false })
    local want = {
      ["total<float, 128>"] = "total<float, 128>(const f32*, f32*, i32)",
      ["total<int, 64>"] = "total<int, 64>(const i32*, i32*, i32)",
      ["pair<double>"] = "pair<double>(const f64*, f64*, const f64*)",
      ["(void(*)(float*, float))scale"] = "(void(*)(float*, float))scale(f32*, f32)",
      ["(void(*)(double*, double))scale"] = "(void(*)(double*, double))scale(f64*, f64)",
      ["ns::kern"] = "ns::kern(u32*)",
    }
    for name, sig in pairs(want) do
      assert.equals(sig, m:kernel(name):signature())
      assert.equals(m:kernel(name), m[name])
    end
    local list = m:kernels()
    table.sort(list)
    table.sort(names)
    assert.same(names, list)
    local k = m["total<float, 128>"]
    local label, entry = k:name()
    assert.same({ "total<float, 128>", "_Z5totalIfLi128EEvPKT_PS0_i" }, { label, entry })
    assert.equals(k, m:kernel(entry))
    assert.error_matches(function() m:kernel("total") end,
      "kernel 'total' is overloaded %(.*%): use the entry name, or name each in cuda.compile's opts.names")
    local s = cuda.stream()
    assert.error_matches(function()
      k:launch(s, 1, 128, cuda.buffer("i32", 4), cuda.buffer("f32", 1), 4)
    end, "total<float, 128>: argument 1 %(const f32%*%): expected cugraph.Buffer or cugraph.Scalar of f32")
    if H.gpu or H.sim then
      local x, out = cuda.buffer("f32", { 1, 2, 3, 4 }), cuda.buffer("f32", 1):fill(0)
      k:launch(s, 1, 128, x, out, 4)
      assert.same({ 10 }, out:download())
    end
    local err = H.error_of(cuda.compile, src, { names = { "nope<int>" }, arch = "sm_90", cache = false })
    assert.equals("nvrtcCompileProgram", err.api)
    assert.matches("nope", err.message)
    for _, bad in ipairs { { {}, "opts.names%[1%]: expected a string, got table" },
                           { "", "opts.names%[1%]: is empty" },
                           { "a\nb", "opts.names%[1%]: contains a newline" } } do
      assert.error_matches(function() cuda.ptx(src, { names = { bad[1] }, arch = "sm_90" }) end, bad[2])
    end
    assert.error_matches(function() cuda.ptx(src, { names = { "ns::kern", "ns::kern" }, arch = "sm_90" }) end,
      "opts.names%[2%]: 'ns::kern' is given twice")
    assert.error_matches(function() cuda.ptx(src, { names = "ns::kern", arch = "sm_90" }) end,
      "opts.names: expected an array of strings, got string")
  end)
end)

-- The toolkit's header families compile with NVRTC as found (CUDA 13 keeps
-- CCCL under include/cccl), and run where kernels run.
describe("the toolkit's headers", function()
  local families = {
    { "cooperative groups", [[
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
extern "C" __global__ void k(const int *in, int *out) {
  auto t = cg::tiled_partition<32>(cg::this_thread_block());
  int v = cg::reduce(t, in[threadIdx.x], cg::plus<int>());
  if (t.thread_rank() == 0) out[threadIdx.x / 32] = v;
}]], function(m, s)
        local out = cuda.buffer("i32", 2)
        local t = {}
        for i = 1, 64 do t[i] = i end
        m.k:launch(s, 1, 64, cuda.buffer("i32", t), out)
        assert.same({ 528, 1552 }, out:download())
      end },
    { "libcu++ (cuda/std)", [[
#include <cuda/std/limits>
#include <cuda/std/type_traits>
#include <cuda/std/utility>
extern "C" __global__ void k(const int *in, int *out) {
  static_assert(cuda::std::is_same<int, cuda::std::remove_const_t<const int>>::value, "");
  cuda::std::pair<int, int> p{in[0], cuda::std::numeric_limits<int>::max()};
  out[0] = p.first; out[1] = p.second;
}]], function(m, s)
        local out = cuda.buffer("i32", 2)
        m.k:launch(s, 1, 1, cuda.buffer("i32", { 7 }), out)
        assert.same({ 7, 2147483647 }, out:download())
      end },
    { "CUB block and warp primitives", [[
#include <cub/block/block_reduce.cuh>
#include <cub/warp/warp_reduce.cuh>
extern "C" __global__ void k(const int *in, int *out) {
  using BR = cub::BlockReduce<int, 64>;
  using WR = cub::WarpReduce<int>;
  __shared__ typename BR::TempStorage bt;
  __shared__ typename WR::TempStorage wt[2];
  int v = in[threadIdx.x];
  int b = BR(bt).Sum(v);
  int w = WR(wt[threadIdx.x / 32]).Sum(v);
  if (threadIdx.x == 0) out[0] = b;
  if (threadIdx.x % 32 == 0) out[1 + threadIdx.x / 32] = w;
}]], function(m, s)
        local out = cuda.buffer("i32", 3)
        local t = {}
        for i = 1, 64 do t[i] = i end
        m.k:launch(s, 1, 64, cuda.buffer("i32", t), out)
        assert.same({ 2080, 528, 1552 }, out:download())
      end },
    { "half and bfloat16", [[
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void k(const float *in, float *out) {
  __half h = __float2half(in[0]);
  __nv_bfloat16 b = __float2bfloat16(in[1]);
  out[0] = __half2float(__hadd(h, h));
  out[1] = __bfloat162float(__hmul(b, b));
}]], function(m, s)
        local out = cuda.buffer("f32", 2)
        m.k:launch(s, 1, 1, cuda.buffer("f32", { 1.5, 3 }), out)
        assert.same({ 3, 9 }, out:download())
      end },
    { "cuRAND's device API", [[
#include <curand_kernel.h>
extern "C" __global__ void k(unsigned *out) {
  curandStatePhilox4_32_10_t st;
  curand_init(1234, threadIdx.x, 0, &st);
  out[threadIdx.x] = curand(&st);
}]], function(m, s)
        local out = cuda.buffer("u32", 4):fill(0)
        m.k:launch(s, 1, 4, out)
        local t = out:download()
        assert.is_true(t[1] ~= t[2] and t[2] ~= t[3], "four streams of one seed differ")
      end },
  }
  for _, f in ipairs(families) do
    it("compile: " .. f[1], function()
      local ptx = cuda.ptx(f[2], { arch = "sm_90" })
      assert.matches("%.entry k", ptx)
      if H.gpu or H.sim then f[3](cuda.compile(f[2], { arch = H.gpu and nil or "sm_90" }), cuda.stream()) end
    end)
  end

  it("compile the documented conditional include without a warning", function()
    local ptx, log = cuda.ptx([[
#include <cuda_device_runtime_api.h>
extern "C" __global__ void k(unsigned *x, cudaGraphConditionalHandle h) {
  cudaGraphSetConditional(h, ++x[0] < 4);
}]], { arch = "sm_90", cache = false })
    assert.matches("%.entry k", ptx)
    assert.equals("", log)
  end)

  it("take the user's include folders (opts.include)", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. H.quote(dir)))
    local f = assert(io.open(dir .. "/mine.h", "w"))
    f:write("#define MINE 42\n")
    f:close()
    local ptx = cuda.ptx('#include "mine.h"\nextern "C" __global__ void k(int *x) { *x = MINE; }',
                         { arch = "sm_90", include = { dir }, cache = false })
    assert.matches("42", ptx)
    os.execute("rm -rf " .. H.quote(dir))
  end)
end)
