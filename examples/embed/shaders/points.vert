// points.vert: one particle a vertex, drawn as a square point. The
// position comes from the vertex buffer CUDA moves the particles in (two
// f32 a particle, [0,1]^2 with y up); Vulkan's clip space has y down.
// Compiled into examples/embed/vulkan_spv.h by `make vulkan-shaders`.
#version 450

layout(location = 0) in vec2 pos;

layout(push_constant) uniform Push {
  float point_size; // 1 unless the device has the largePoints feature
} push;

void main() {
  gl_Position = vec4(2.0 * pos.x - 1.0, 1.0 - 2.0 * pos.y, 0.0, 1.0);
  gl_PointSize = push.point_size;
}
