// Kernels that sample textures and store through surfaces, for the specs
// of cuda.array's texture and surface objects (spec/15); host twins in
// spec/support/twins.c. Apart from kernels.cu, which the simulator's
// fidelity specs run against every kernel: these need the objects made
// first.

extern "C" {

// out[y * w + x] = the texture sampled at ((x + shift) * scale, (y + shift)
// * scale): texel centres are at half-integers, so shift 0.5 and scale 1
// read each texel, other values filter between them
__global__ void tex_sample_f32(cudaTextureObject_t t, float *out, int w, int h,
                               float scale, float shift) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < w && y < h)
    out[y * w + x] = tex2D<float>(t, (x + shift) * scale, (y + shift) * scale);
}

// texel (x, y) of the surface = base + x + 1000 * y, for x < w, y < h
__global__ void surf_fill_f32(cudaSurfaceObject_t s, int w, int h, float base) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < w && y < h) surf2Dwrite(base + x + 1000.0f * y, s, x * 4, y);
}

} // extern "C"
