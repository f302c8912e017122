#include "profiler_gpu_test_kernels.h"

namespace kloop::profiler::gpu_test {
namespace {

constexpr unsigned kBlock = 256;
constexpr unsigned kBlocksPerSm = 8;  // 2048 resident threads per SM at 256 per block

__global__ void copy_kernel(const float4* __restrict__ src, float4* __restrict__ dst, std::size_t n4) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += stride) {
    dst[i] = src[i];
  }
}

__global__ void fma_kernel(float* out, int iterations, float b, float c) {
  const std::size_t id = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  float a0 = threadIdx.x * 1e-3f, a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3;
  float a4 = a0 + 4, a5 = a0 + 5, a6 = a0 + 6, a7 = a0 + 7;
  for (int i = 0; i < iterations; ++i) {
    a0 = fmaf(a0, b, c);
    a1 = fmaf(a1, b, c);
    a2 = fmaf(a2, b, c);
    a3 = fmaf(a3, b, c);
    a4 = fmaf(a4, b, c);
    a5 = fmaf(a5, b, c);
    a6 = fmaf(a6, b, c);
    a7 = fmaf(a7, b, c);
  }
  out[id] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

__global__ void add_one_kernel(float* x, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

__global__ void fill_kernel(float* x, std::size_t n, float value) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = value;
}

unsigned blocks_for(std::size_t n) { return static_cast<unsigned>((n + kBlock - 1) / kBlock); }

int registers_of(const void* kernel) {
  cudaFuncAttributes attributes{};
  return cudaFuncGetAttributes(&attributes, kernel) == cudaSuccess ? attributes.numRegs : -1;
}

}  // namespace

LaunchShape launch_copy(const float* src, float* dst, std::size_t n, int sm_count, cudaStream_t stream) {
  const std::size_t n4 = n / 4;
  LaunchShape shape{static_cast<unsigned>(sm_count) * kBlocksPerSm * 4, kBlock};
  if (blocks_for(n4) < shape.grid) shape.grid = blocks_for(n4);
  copy_kernel<<<shape.grid, shape.block, 0, stream>>>(reinterpret_cast<const float4*>(src),
                                                      reinterpret_cast<float4*>(dst), n4);
  return shape;
}

std::size_t fma_threads(int sm_count) { return static_cast<std::size_t>(sm_count) * kBlocksPerSm * 4 * kBlock; }

LaunchShape launch_fma(float* out, int iterations, int sm_count, cudaStream_t stream) {
  const LaunchShape shape{static_cast<unsigned>(sm_count) * kBlocksPerSm * 4, kBlock};
  fma_kernel<<<shape.grid, shape.block, 0, stream>>>(out, iterations, 0.999999f, 1e-6f);
  return shape;
}

LaunchShape launch_add_one(float* x, std::size_t n, cudaStream_t stream) {
  const LaunchShape shape{blocks_for(n), kBlock};
  add_one_kernel<<<shape.grid, shape.block, 0, stream>>>(x, n);
  return shape;
}

LaunchShape launch_fill(float* x, std::size_t n, float value, cudaStream_t stream) {
  const LaunchShape shape{blocks_for(n), kBlock};
  fill_kernel<<<shape.grid, shape.block, 0, stream>>>(x, n, value);
  return shape;
}

int copy_registers() { return registers_of(reinterpret_cast<const void*>(copy_kernel)); }
int fma_registers() { return registers_of(reinterpret_cast<const void*>(fma_kernel)); }

}  // namespace kloop::profiler::gpu_test
