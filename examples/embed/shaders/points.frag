// points.frag: every particle in one opaque colour, (255, 217, 51) in the
// 8-bit image, which no background pixel has (vulkan.c counts both).
// Compiled into examples/embed/vulkan_spv.h by `make vulkan-shaders`.
#version 450

layout(location = 0) out vec4 color;

void main() {
  color = vec4(1.0, 0.85, 0.2, 1.0);
}
