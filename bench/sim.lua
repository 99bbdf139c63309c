-- bench/sim.lua: the PTX simulator's speed on the MLP kernels of
-- examples/model.lua, on one host thread and on all, on a block reduction
-- and on a divergent kernel (one thread), each beside the same kernel
-- built for the host as plain C loops (bench/sim_native.c, the build's
-- compiler and CFLAGS: the distance to native code), and Numba's CUDA
-- simulator on the same dense GELU layer (bench/sim_numba.py) where
-- python3 has Numba (Debian's python3-numba; NUMBA_PYTHON names another
-- interpreter).
--
--   make bench-sim            (build/cugraph-lua bench/sim.lua [--markdown])
--
-- Each figure comes from a child process on the simulator with
-- CUDA_SIM_STATS=1, which reports the thread-instructions its kernels ran
-- and the seconds they took (launch overhead included, Lua excluded).
local here = (arg[0]:match("^(.*)/[^/]*$") or ".")
local root = here .. "/.."
local build = os.getenv("CUGRAPH_LUA_BUILD") or root .. "/build"
local sim_lib = build .. "/libcuda-sim.so"

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- The reduction and divergence rows' kernels: a block's tree reduction in
-- shared memory then shuffles, and lanes on different paths (by lane id,
-- then by a data-dependent loop count).
local WARP_SOURCE = [[
extern "C" __global__ void block_sum(const float *x, float *out, int n) {
  __shared__ float s[256];
  int tid = threadIdx.x;
  float v = 0.0f;
  for (int i = blockIdx.x * blockDim.x + tid; i < n; i += blockDim.x * gridDim.x)
    v += x[i];
  s[tid] = v;
  __syncthreads();
  for (int k = blockDim.x / 2; k >= 32; k >>= 1) {
    if (tid < k) s[tid] += s[tid + k];
    __syncthreads();
  }
  if (tid < 32) {
    v = s[tid];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (tid == 0) out[blockIdx.x] = v;
  }
}

extern "C" __global__ void diverge(const unsigned *x, unsigned *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned v = x[i], acc = 0;
  switch (threadIdx.x & 3) {
  case 0: for (unsigned k = 0; k < 8; k++) acc += v * k; break;
  case 1: acc = v ^ (v >> 3); break;
  case 2: acc = v < 0x80000000u ? v + 7 : v - 7; break;
  default: acc = __popc(v);
  }
  unsigned steps = 0;
  for (unsigned t = v % 97 + 1; t != 1 && steps < 64; steps++)
    t = (t & 1) ? 3 * t + 1 : t >> 1;
  y[i] = acc + steps;
}
]]

-- The diverge kernel's result for one value, on the host.
local function diverge_ref(v, lane)
  local acc
  if lane % 4 == 0 then acc = v * 28
  elseif lane % 4 == 1 then acc = v ~ (v >> 3)
  elseif lane % 4 == 2 then acc = v < 0x80000000 and v + 7 or v - 7
  else
    acc = 0
    for b = 0, 31 do acc = acc + (v >> b & 1) end
  end
  local t, steps = v % 97 + 1, 0
  while t ~= 1 and steps < 64 do
    t = (t & 1 == 1) and 3 * t + 1 or t >> 1
    steps = steps + 1
  end
  return (acc + steps) & 0xffffffff
end

-- Child: the forward pass of model.lua's layers, or one dense GELU layer,
-- reps times (sizes: rows k n (layer) or the model's own (model)); or the
-- reduction or divergence kernel, reps times, its result checked.
if arg[1] == "--child" and (arg[2] == "reduce" or arg[2] == "diverge") then
  local cuda = require "cugraph"
  local m = cuda.compile(WARP_SOURCE, { name = "warp.cu" })
  local reps, s = tonumber(arg[3]), cuda.stream()
  local t, seed = {}, 7
  if arg[2] == "reduce" then
    local n, blocks, sum = 1 << 20, 256, 0
    for i = 1, n do
      seed = (seed * 1103515245 + 12345) % 2147483648
      t[i] = (seed >> 8) / 8388608 - 0.5
      sum = sum + t[i]
    end
    local x, out = cuda.buffer("f32", t), cuda.buffer("f32", blocks)
    for _ = 1, reps do m.block_sum:launch(s, blocks, 256, x, out, n) end
    local got = 0
    for _, v in ipairs(out:download()) do got = got + v end
    assert(math.abs(got - sum) < 1e-2, ("block_sum: %g, expected %g"):format(got, sum))
  else
    local n = 1 << 16
    for i = 1, n do
      seed = (seed * 1103515245 + 12345) % 2147483648
      t[i] = seed * 2 + i % 2
    end
    local x, y = cuda.buffer("u32", t), cuda.buffer("u32", n)
    for _ = 1, reps do m.diverge:launch(s, n // 256, 256, x, y, n) end
    local got = y:download()
    for i = 1, n, 97 do
      assert(got[i] == diverge_ref(t[i], (i - 1) % 256), ("diverge: element %d"):format(i))
    end
  end
  s:synchronize()
  os.exit(0)
end

if arg[1] == "--child" then
  local cuda = require "cugraph"
  local STOP = {}
  local src
  package.loaded.cugraph = setmetatable({
    compile = function(s) src = s; error(STOP) end,
  }, { __index = function() error(STOP) end })
  local saved = arg
  arg = { [0] = root .. "/examples/model.lua" } -- luacheck: ignore 121
  pcall(dofile, arg[0])
  arg = saved -- luacheck: ignore 121
  package.loaded.cugraph = cuda
  local m = cuda.compile(assert(src, "model.lua's source"), { name = "model.cu" })
  local what, reps = arg[2], tonumber(arg[3])
  local rows, k, n = tonumber(arg[4]), tonumber(arg[5]), tonumber(arg[6])
  local s = cuda.stream()
  local function buf(len, scale)
    local t, seed = {}, 7
    for i = 1, len do
      seed = (seed * 1103515245 + 12345) % 2147483648
      t[i] = scale * (seed / 2147483648 - 0.5)
    end
    return cuda.buffer("f32", t)
  end
  local batch = cuda.scalar("u32", 0)
  local block = { 16, 16 }
  local function grid(cols, r) return { (cols + 15) // 16, (r + 15) // 16 } end
  if what == "layer" then
    local x, w, b, y = buf(rows * k, 2), buf(k * n, 0.2), buf(n, 0.2), cuda.buffer("f32", rows * n)
    for _ = 1, reps do m.dense_gelu_in:launch(s, grid(n, rows), block, x, batch, w, b, y, rows, k, n) end
  else -- the model: 64 x 256 -> 512 GELU -> 512 ReLU -> 10, softmax
    local B, D0, D1, D2, D3 = 64, 256, 512, 512, 10
    local x, w1, b1 = buf(B * D0, 2), buf(D0 * D1, 0.1), buf(D1, 0.1)
    local w2, b2, w3, b3 = buf(D1 * D2, 0.1), buf(D2, 0.1), buf(D2 * D3, 0.1), buf(D3, 0.1)
    local h1, h2, z = cuda.buffer("f32", B * D1), cuda.buffer("f32", B * D2), cuda.buffer("f32", B * D3)
    local out = cuda.buffer("f32", B * D3)
    for _ = 1, reps do
      m.dense_gelu_in:launch(s, grid(D1, B), block, x, batch, w1, b1, h1, B, D0, D1)
      m.dense_relu:launch(s, grid(D2, B), block, h1, w2, b2, h2, B, D1, D2)
      m.dense_linear:launch(s, grid(D3, B), block, h2, w3, b3, z, B, D2, D3)
      m.softmax_out:launch(s, 1, B, z, batch, out, B, D3)
    end
  end
  s:synchronize()
  os.exit(0)
end

local markdown = arg[1] == "--markdown"

-- Runs a child on the simulator: thread-instructions, seconds.
local function sim_run(what, reps, rows, k, n, threads)
  local cmd = ("CUDA_SIM_STATS=1 CUDA_SIM_THREADS=%d CUGRAPH_LUA_LIBCUDA=%s %s %s " ..
               "--child %s %d %d %d %d 2>&1"):format(threads, quote(sim_lib),
    quote(build .. "/cugraph-lua"), quote(arg[0]), what, reps, rows or 0, k or 0, n or 0)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  local ok = p:close()
  local count, secs = out:match("cuda sim: (%d+) thread%-instructions in ([%d.]+) s")
  assert(ok and count, "the simulator's run failed:\n" .. out)
  return tonumber(count), tonumber(secs), out:match("interpreter: (%w+)")
end

-- The native build's seconds a launch of each kernel (reps launches).
local function native_run(reps)
  local p = assert(io.popen(quote(build .. "/bench/sim_native") .. " " .. reps))
  local out = p:read("a")
  p:close()
  local t = {}
  for name, secs in out:gmatch("(%a+) ([%d.e+-]+)") do t[name] = tonumber(secs) end
  assert(t.reduce and t.diverge, "bench/sim_native failed: " .. out)
  return t
end

-- Numba's CUDA simulator on the same layer: seconds, or nil and why.
local function numba_run(rows, k, n)
  local py = os.getenv("NUMBA_PYTHON") or "python3"
  if not os.getenv("NUMBA_PYTHON") and os.execute("test -x /usr/bin/python3") then
    py = "/usr/bin/python3" -- Debian's, where python3-numba installs
  end
  local p = io.popen(("NUMBA_ENABLE_CUDASIM=1 %s %s %d %d %d 2>&1")
                     :format(py, quote(here .. "/sim_numba.py"), rows, k, n))
  local out = p:read("a")
  p:close()
  local secs = out:match("seconds ([%d.e+-]+)")
  if secs then return tonumber(secs) end
  return nil, (out:match("[^\n]*\n?$") or out):gsub("\n", "")
end

local rows = {}
local function row(name, value, note)
  rows[#rows + 1] = { name, value, note }
  if not markdown then print(("%-52s %14s  %s"):format(name, value, note or "")) end
end

local count, secs, isa = sim_run("model", 3, nil, nil, nil, 1)
local cpu = (io.open("/proc/cpuinfo") or io.open("/dev/null")):read("a"):match("model name%s*:%s*([^\n]+)")
if not markdown then
  print(("CPU: %s; the simulator's interpreter: %s"):format(cpu or "unknown", isa or "?"))
end
local rate = count / secs
row("MLP forward pass (model.lua), simulator, 1 thread",
    ("%.0f M/s"):format(rate / 1e6),
    ("%d passes: %.3g thread-instructions in %.2f s; %.0f ms a pass")
    :format(3, count, secs, secs / 3 * 1000))
local cores = tonumber(io.popen("nproc"):read("l")) or 1
if cores > 1 then
  local c2, s2 = sim_run("model", 3, nil, nil, nil, cores)
  row(("MLP forward pass, simulator, %d threads"):format(cores),
      ("%.0f M/s"):format(c2 / s2 / 1e6), ("%.0f ms a pass"):format(s2 / 3 * 1000))
end

-- The reduction and the divergent kernel, one thread, and the same as
-- host code: the simulator's time over the native one's.
local native = native_run(10)
local rc, rs = sim_run("reduce", 10, nil, nil, nil, 1)
row("block sum of 2^20 f32 (shared tree, shuffles), 1 thread", ("%.0f M/s"):format(rc / rs / 1e6),
    ("%.3g thread-instructions in %.2f s; %.1f ms a launch; %.1fx the time of the same "
     .. "kernel as host C (%.2f ms)"):format(rc, rs, rs / 10 * 1000, rs / 10 / native.reduce,
                                            native.reduce * 1000))
local dc, ds = sim_run("diverge", 10, nil, nil, nil, 1)
row("divergent paths, 2^16 threads, 1 thread", ("%.0f M/s"):format(dc / ds / 1e6),
    ("%.3g thread-instructions in %.2f s; %.1f ms a launch; %.1fx the time of the same "
     .. "kernel as host C (%.2f ms)"):format(dc, ds, ds / 10 * 1000, ds / 10 / native.diverge,
                                            native.diverge * 1000))

-- One small dense GELU layer on both simulators: Numba runs a Python
-- thread per CUDA thread.
local R, K, N, LAYERS = 16, 64, 64, 200
local lc, ls = sim_run("layer", LAYERS, R, K, N, 1)
ls = ls / LAYERS
row(("dense GELU %dx%d -> %d, simulator, 1 thread"):format(R, K, N),
    ("%.3f ms"):format(ls * 1000),
    ("%.0f M thread-instructions/s"):format(lc / LAYERS / ls / 1e6))
local nsecs, why = numba_run(R, K, N)
if nsecs then
  row(("dense GELU %dx%d -> %d, Numba CUDA simulator"):format(R, K, N),
      ("%.1f ms"):format(nsecs * 1000),
      ("%.0fx slower; %.3g PTX thread-instructions/s equivalent")
      :format(nsecs / ls, lc / LAYERS / nsecs))
else
  row("Numba CUDA simulator", "skipped", why)
end

if markdown then
  print(("CPU: %s; the simulator's interpreter: %s\n"):format(cpu or "unknown", isa or "?"))
  print("| run | figure | note |")
  print("|---|---:|---|")
  for _, r in ipairs(rows) do print(("| %s | %s | %s |"):format(r[1], r[2], r[3] or "")) end
end
