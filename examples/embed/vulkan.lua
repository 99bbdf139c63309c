-- vulkan.lua: the script examples/embed/vulkan.c runs. It returns one
-- function, which the engine calls with what Vulkan exported:
--
--   setup(image_fd, image_bytes, w, h, vertex_fd, vertex_bytes, n, sem_fd
--         [, vertex_dedicated])
--     image_fd, image_bytes  a w x h RGBA8 image's memory (an OPAQUE_FD of
--                            a dedicated allocation, and its size)
--     vertex_fd, vertex_bytes  the memory of the vertex buffer Vulkan draws
--                            from: n particles, two f32 each
--     sem_fd                 a timeline semaphore's OPAQUE_FD
--     vertex_dedicated       true where the driver made the vertex memory
--                            a dedicated allocation too
--
-- CUDA owns each fd once it imported it. setup() imports them, compiles the
-- two kernels, places the particles and captures one frame:
--
--   wait for the timeline to reach wait_at (Vulkan is done with the image)
--   background  every pixel of the image, through a surface: a gradient
--               that moves with the frame number
--   swirl       the particles, in the vertex buffer, one step along a swirl
--   signal signal_at (Vulkan may draw)
--
-- and returns the graph, its scalars wait_at, signal_at (u64) and frame
-- (u32), and its stream; the engine sets the scalars and launches the graph
-- from C every frame. The global DEVICE is the CUDA device the engine
-- matched Vulkan's to.
-- luacheck: globals shared
-- luacheck: read globals DEVICE
local cuda = require "cugraph"

local source = [[
// A 32-bit integer hash (PCG output permutation), as a float in [0, 1).
__device__ float hash01(unsigned x) {
  x = x * 747796405u + 2891336453u;
  x = ((x >> ((x >> 28) + 4u)) ^ x) * 277803737u;
  x = (x >> 22) ^ x;
  return (x >> 8) * (1.0f / 16777216.0f);
}

// Pixel (x, y) of frame *frame: vulkan.c's background() recomputes it, so
// the checks know every pixel the particles do not cover. Row 0 is the top.
extern "C" __global__ void background(cudaSurfaceObject_t surf,
                                      const unsigned *frame, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  unsigned f = *frame;
  uchar4 px = make_uchar4((unsigned char)(((unsigned)x + 2u * f) & 63u),
                          (unsigned char)(32 + y * 96 / h),
                          (unsigned char)(96u + (((unsigned)(x + y) + f) & 127u)),
                          255);
  surf2Dwrite(px, surf, x * 4, y);
}

// The particles start in a disc around the center of [0,1]^2 (y up).
extern "C" __global__ void init(float *pos, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = 6.2831853f * hash01(2u * (unsigned)i);
  float r = 0.05f + 0.4f * sqrtf(hash01(2u * (unsigned)i + 1u));
  reinterpret_cast<float2 *>(pos)[i] =
      make_float2(0.5f + r * cosf(a), 0.5f + r * sinf(a));
}

// One step of *dt: round the center, faster near it, the radius breathing
// in three arms that turn with the frame. Positions stay in [0.02, 0.98]^2.
extern "C" __global__ void swirl(float *pos, const float *dt,
                                 const unsigned *frame, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float h = *dt, t = (float)*frame * h;
  float2 p = reinterpret_cast<float2 *>(pos)[i];
  float dx = p.x - 0.5f, dy = p.y - 0.5f;
  float r = sqrtf(dx * dx + dy * dy), a = atan2f(dy, dx);
  a += (0.4f + 0.3f / (r + 0.1f)) * h;
  r += 0.05f * sinf(3.0f * a + 1.5f * t) * h;
  r = fminf(fmaxf(r, 0.02f), 0.48f);
  reinterpret_cast<float2 *>(pos)[i] =
      make_float2(0.5f + r * cosf(a), 0.5f + r * sinf(a));
}
]]

return function(image_fd, image_bytes, w, h, vertex_fd, vertex_bytes, n,
                sem_fd, vertex_dedicated)
  cuda.select(DEVICE or 0)
  local image_mem = cuda.external_memory(image_fd, image_bytes,
                                         {dedicated = true})
  local image = image_mem:array("u8x4", w, h,
                                {surface = true, color_attachment = true})
  local surf = image:surface()
  local vertex_mem = vertex_dedicated
    and cuda.external_memory(vertex_fd, vertex_bytes, {dedicated = true})
    or cuda.external_memory(vertex_fd, vertex_bytes)
  local pos = vertex_mem:buffer("f32", 2 * n)
  local sem = cuda.external_semaphore(sem_fd, "timeline")

  local m = cuda.compile(source, {name = "vulkan.cu"})
  local s = cuda.stream()
  local wait_at, signal_at = cuda.scalar("u64", 0), cuda.scalar("u64", 1)
  local frame, dt = cuda.scalar("u32", 0), cuda.scalar("f32", 1 / 60)
  local block = 256
  m.init:launch(s, (n + block - 1) // block, block, pos, n)
  local graph = s:capture(function(st)
    st:wait_external(sem, wait_at)
    m.background:launch(st, {(w + 15) // 16, (h + 15) // 16}, {16, 16}, surf,
                        frame, w, h)
    m.swirl:launch(st, (n + block - 1) // block, block, pos, dt, frame, n)
    st:signal_external(sem, signal_at)
  end)
  -- everything stays reachable until lua_close, which destroys the imports
  shared = {image_mem = image_mem, image = image, surf = surf,
            vertex_mem = vertex_mem, pos = pos, sem = sem, module = m,
            stream = s, graph = graph, scalars = {wait_at, signal_at, frame, dt}}
  local count, kinds = graph:nodes()
  print(("vulkan.lua: imported %s, %s and %s; the frame graph: %d nodes (%s)")
        :format(tostring(image), tostring(pos), tostring(sem), count,
                table.concat(kinds, ", ")))
  return graph, wait_at, signal_at, frame, s
end
