// Device kernels with known physics for the profiler's GPU test: a copy that
// only moves bytes, an FMA loop that only computes, and an in-place update
// that replay would corrupt if memory were not restored. Host launchers, so
// the test itself is host C++.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace kloop::profiler::gpu_test {

struct LaunchShape {
  unsigned grid = 0;
  unsigned block = 0;
};

// dst[i] = src[i] for n floats (n a multiple of 4), as 16-byte loads and stores.
LaunchShape launch_copy(const float* src, float* dst, std::size_t n, int sm_count, cudaStream_t stream);
// Eight independent FMA chains of `iterations` steps per thread; one float
// per thread is written: 16 * iterations flops per thread, 4 bytes of traffic.
LaunchShape launch_fma(float* out, int iterations, int sm_count, cudaStream_t stream);
// x[i] += 1 for n floats.
LaunchShape launch_add_one(float* x, std::size_t n, cudaStream_t stream);
// x[i] = value for n floats.
LaunchShape launch_fill(float* x, std::size_t n, float value, cudaStream_t stream);

constexpr int kFmaChains = 8;
// Threads launch_fma starts on a GPU with sm_count SMs.
std::size_t fma_threads(int sm_count);
// Registers per thread the compiler gave each kernel (cudaFuncGetAttributes).
int copy_registers();
int fma_registers();

}  // namespace kloop::profiler::gpu_test
