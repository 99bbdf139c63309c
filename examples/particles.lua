-- particles.lua: a game-style frame loop. A million particles move under
-- gravity, a swirl around the center and the pull of a point circling it,
-- and bounce off the walls of [0,1]^2; each frame they are splatted into a
-- density image and tone-mapped to RGBA on the GPU. The whole frame is one
-- CUDA graph captured once; dt and the frame number are DeviceScalars set
-- before each launch. The loop makes no Lua garbage (measured with the
-- collector stopped). Every EVERY frames the image is written as a PNG.
--
--   cugraph-lua examples/particles.lua [out_dir [frames [particles [trace [picture]]]]]
--
-- Defaults: frames/, 120 frames, 1048576 particles. With a trace path, the
-- frame graph is profiled afterwards (g:profile, 20 replays): a line per
-- node and the replay as a Chrome trace at that path; with a picture path
-- too, the graph shaded by its nodes' times (g:dot: .dot, or .png and .svg
-- where Graphviz is installed). Needs the png module
-- (build/examples/png.so, from `make examples`).
local cuda = require "cugraph"

local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.cpath = (os.getenv("CUGRAPH_LUA_BUILD") or here .. "/../build") .. "/examples/?.so;" .. package.cpath
local found, png = pcall(require, "png")
if not found then
  error("the png module is missing; build it with `make examples`\n" .. png, 0)
end

local function count_arg(i, default)
  local v = arg[i] and math.tointeger(tonumber(arg[i])) or default
  if not v or v < 1 then error(("argument %d: expected a positive integer, got %s")
                               :format(i, arg[i]), 0) end
  return v
end
local out_dir = arg[1] or "frames"
local FRAMES = count_arg(2, 120)
local N = count_arg(3, 1 << 20)
local W, H = 512, 512
local EVERY = 30            -- frames between PNGs: 0, 30, 60, 90
local DT = 1 / 60
local BLOCK = 256

-- Tone map: log(1 + d) / log(1 + FULL) for d particles in a pixel, where
-- FULL is 16 times the mean density.
local FULL = 16 * N / (W * H)

local source = [[
// A 32-bit integer hash (PCG output permutation), as a float in [0, 1).
__device__ float hash01(unsigned x) {
  x = x * 747796405u + 2891336453u;
  x = ((x >> ((x >> 28) + 4u)) ^ x) * 277803737u;
  x = (x >> 22) ^ x;
  return (x >> 8) * (1.0f / 16777216.0f);
}

// Particles start in a ring around the center, orbiting it.
__global__ void init(float *pos, float *vel, int n, unsigned seed) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned h = 3u * (unsigned)i + seed * 0x9e3779b9u;
  float a = 6.2831853f * hash01(h);
  float r = 0.15f + 0.2f * sqrtf(hash01(h + 1u));
  float s = 0.15f + 0.2f * hash01(h + 2u);
  float c = cosf(a), sn = sinf(a);
  reinterpret_cast<float2 *>(pos)[i] = make_float2(0.5f + r * c, 0.5f + r * sn);
  reinterpret_cast<float2 *>(vel)[i] = make_float2(-s * sn, s * c);
}

// One step of *dt: gravity, a swirl around the center and a pull toward a
// point circling it (phase from *frame), semi-implicit Euler, then the walls
// of [0,1]^2 reflect with restitution. Invariant: positions stay in [0,1]^2.
__global__ void step(float *pos, float *vel, const float *dt,
                     const unsigned *frame, int n) {
  const float GRAVITY = 0.3f, SWIRL = 0.6f, PULL = 0.01f, DAMP = 0.998f,
              RESTITUTION = 0.8f;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float h = *dt, t = (float)*frame * (1.0f / 60.0f);
  float2 p = reinterpret_cast<float2 *>(pos)[i];
  float2 v = reinterpret_cast<float2 *>(vel)[i];
  float dx = 0.5f + 0.3f * cosf(0.9f * t) - p.x;
  float dy = 0.5f + 0.3f * sinf(0.9f * t) - p.y;
  float pull = PULL / (dx * dx + dy * dy + 0.002f);
  float cx = p.x - 0.5f, cy = p.y - 0.5f;
  v.x = (v.x + (pull * dx - SWIRL * cy) * h) * DAMP;
  v.y = (v.y + (pull * dy + SWIRL * cx - GRAVITY) * h) * DAMP;
  p.x += v.x * h;
  p.y += v.y * h;
  if (p.x < 0.0f) { p.x = -p.x; v.x = -v.x * RESTITUTION; }
  if (p.x > 1.0f) { p.x = 2.0f - p.x; v.x = -v.x * RESTITUTION; }
  if (p.y < 0.0f) { p.y = -p.y; v.y = -v.y * RESTITUTION; }
  if (p.y > 1.0f) { p.y = 2.0f - p.y; v.y = -v.y * RESTITUTION; }
  p.x = fminf(fmaxf(p.x, 0.0f), 1.0f);
  p.y = fminf(fmaxf(p.y, 0.0f), 1.0f);
  reinterpret_cast<float2 *>(pos)[i] = p;
  reinterpret_cast<float2 *>(vel)[i] = v;
}

__global__ void clear(unsigned *image, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) image[i] = 0u;
}

// Counts each particle into its pixel of density [h][w]; row 0 is the top
// (y = 1). Particles outside [0,1]^2 (or NaN) are not counted.
__global__ void splat(const float *pos, unsigned *density, int n, int w,
                      int h) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float2 p = reinterpret_cast<const float2 *>(pos)[i];
  if (!(p.x >= 0.0f && p.x <= 1.0f && p.y >= 0.0f && p.y <= 1.0f)) return;
  int x = (int)(p.x * w), y = (int)((1.0f - p.y) * h);
  x = x < w ? x : w - 1;
  y = y < h ? y : h - 1;
  atomicAdd(&density[y * w + x], 1u);
}

// Density to RGBA8: v = log(1 + d) * scale, clamped to 1, through a
// black - purple - orange - white ramp.
__global__ void tonemap(const unsigned *density, unsigned char *rgba, int n,
                        float scale) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = fminf(log1pf((float)density[i]) * scale, 1.0f);
  float r = __saturatef(1.8f * v);
  float g = __saturatef(2.0f * v - 0.7f);
  float b = __saturatef(2.5f * v - 1.5f) + 0.5f * __saturatef(1.0f - fabsf(4.0f * v - 1.0f));
  reinterpret_cast<uchar4 *>(rgba)[i] =
      make_uchar4((unsigned char)(255.0f * r), (unsigned char)(255.0f * g),
                  (unsigned char)(255.0f * fminf(b, 1.0f)), 255);
}
]]

local m = cuda.compile(source, { name = "particles.cu" })
local s = cuda.stream()
local pos, vel = cuda.buffer("f32", 2 * N), cuda.buffer("f32", 2 * N)
local density = cuda.buffer("u32", W * H)
local rgba = cuda.buffer("u8", 4 * W * H)
local dt, frame = cuda.scalar("f32", DT), cuda.scalar("u32", 0)
local t0, t1 = cuda.event(), cuda.event()

local pgrid, igrid = (N + BLOCK - 1) // BLOCK, (W * H + BLOCK - 1) // BLOCK
local step, clear, splat, tonemap = m.step, m.clear, m.splat, m.tonemap
m.init:launch(s, pgrid, BLOCK, pos, vel, N, 12345)

local graph = s:capture(function(st)
  step:launch(st, pgrid, BLOCK, pos, vel, dt, frame, N)
  clear:launch(st, igrid, BLOCK, density, W * H)
  splat:launch(st, pgrid, BLOCK, pos, density, N, W, H)
  tonemap:launch(st, igrid, BLOCK, density, rgba, W * H, 1 / math.log(1 + FULL))
end)
graph:upload()

local function shell_quote(str) return "'" .. str:gsub("'", "'\\''") .. "'" end
if not os.execute("mkdir -p " .. shell_quote(out_dir)) then
  error("cannot create " .. out_dir, 0)
end

-- The loop: only the set/launch part is in the garbage count, from the
-- second frame on (a graph's first launch may do work of its own once: with
-- an NVTX tool attached, the trace names its nodes); the PNG frames are
-- left out of the timing by closing and reopening the interval.
local written, ms, garbage = {}, 0, 0
collectgarbage("collect")
collectgarbage("stop")
t0:record(s)
for f = 0, FRAMES - 1 do
  local before = collectgarbage("count")
  dt:set(DT)
  frame:set(f)
  graph:launch()
  if f > 0 then garbage = garbage + (collectgarbage("count") - before) end
  if f % EVERY == 0 then
    t1:record(s)
    ms = ms + t1:elapsed(t0)
    local path = ("%s/frame_%04d.png"):format(out_dir, f)
    png.write(path, W, H, rgba:download("string"))
    written[#written + 1] = path
    t0:record(s)
  end
end
t1:record(s)
ms = ms + t1:elapsed(t0)
collectgarbage("restart")

-- Every particle of the last frame is counted once in the density image.
local counted = 0
for _, d in ipairs(density:download()) do counted = counted + d end

local bytes = garbage * 1024 / math.max(FRAMES - 1, 1)
print(("%d particles, %d frames, %dx%d image"):format(N, FRAMES, W, H))
print(("frame rate: %.1f frames/s (%.3f ms/frame, %.2f G particle-steps/s)")
      :format(FRAMES / (ms / 1000), ms / FRAMES, N * FRAMES / ms / 1e6))
print(("Lua garbage: %g bytes/frame"):format(bytes))
print(("wrote %d PNGs: %s"):format(#written, table.concat(written, " ")))
print(("particles in the image: %d of %d"):format(counted, N))
if bytes ~= 0 or counted ~= N then os.exit(1, true) end -- true: closes the state

if arg[4] then -- where a frame's time goes, node by node
  local p = graph:profile { n = 20, trace = arg[4] }
  print(("profile: %.1f us a frame, %.1f with the event nodes (%.3fx)%s")
        :format(p.us, p.profiled_us, p.overhead, cuda.device().name:find("simulator")
                and " (the PTX simulator's clock, not a GPU's)" or ""))
  for _, nd in ipairs(p.nodes) do
    print(("  %-8s %-8s line %3d  %8.1f us  (%.1f-%.1f)"):format(nd.kind,
          nd.name or "", nd.line or 0, nd.us, nd.min_us, nd.max_us))
  end
  print("trace: " .. p.trace)
  if arg[5] then
    graph:dot(arg[5], { profile = p })
    print("picture: " .. arg[5])
  end
end
print("ok")
