// One thread per pair of elements (philox.h's unit), grid-stride.
#include "evaluator/runtime/generator_device.h"

#include <cuda_runtime.h>

#include <stdexcept>

#include "base/cuda_check.h"
#include "evaluator/runtime/philox.h"

namespace kloop {
namespace {

// As the host stores (generator.cpp): integers through int64, narrowed
// modulo 2^bits.
template <typename T>
struct Store {
  __device__ static T as(double v) { return static_cast<T>(static_cast<int64_t>(v)); }
};
template <>
struct Store<float> {
  __device__ static float as(double v) { return static_cast<float>(v); }
};
template <>
struct Store<double> {
  __device__ static double as(double v) { return v; }
};
struct Half {};
struct BFloat16 {};
struct Bool {};
template <>
struct Store<Half> {
  __device__ static uint16_t as(double v) { return philox::half_bits(static_cast<float>(v)); }
};
template <>
struct Store<BFloat16> {
  __device__ static uint16_t as(double v) { return philox::bfloat16_bits(static_cast<float>(v)); }
};
template <>
struct Store<Bool> {
  __device__ static uint8_t as(double v) { return v != 0 ? 1 : 0; }
};

template <typename Tag, typename T>
__global__ void draw_kernel(T* out, uint64_t n, philox::Draw d) {
  const uint64_t pairs = (n + 1) / 2;
  for (uint64_t k = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; k < pairs;
       k += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    double v[2];
    philox::pair_values(d, k, v);
    out[2 * k] = Store<Tag>::as(v[0]);
    if (2 * k + 1 < n) out[2 * k + 1] = Store<Tag>::as(v[1]);
  }
}

template <typename Tag, typename T>
void launch(void* dst, uint64_t n, const philox::Draw& d, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const uint64_t pairs = (n + 1) / 2;
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const uint64_t wanted = (pairs + kThreads - 1) / kThreads;
  const auto blocks = static_cast<unsigned>(std::min<uint64_t>(wanted, static_cast<uint64_t>(std::max(sms, 1)) * 32));
  draw_kernel<Tag, T><<<blocks, kThreads, 0, stream>>>(static_cast<T*>(dst), n, d);
}

}  // namespace

void generate_on_device(void* dst, const std::string& name, DType dtype, int64_t numel, const DrawSpec& draw,
                        uint64_t seed, void* on) {
  const auto stream = static_cast<cudaStream_t>(on);
  const philox::Draw d = resolve_draw(draw, name, dtype, seed);
  if (numel <= 0) return;
  if (reinterpret_cast<uintptr_t>(dst) % dtype_size(dtype) != 0) {
    throw std::invalid_argument("generate_on_device: '" + name + "' is not aligned to its dtype");
  }
  const auto n = static_cast<uint64_t>(numel);
  switch (dtype) {
    case DType::kFloat32: launch<float, float>(dst, n, d, stream); break;
    case DType::kFloat64: launch<double, double>(dst, n, d, stream); break;
    case DType::kFloat16: launch<Half, uint16_t>(dst, n, d, stream); break;
    case DType::kBFloat16: launch<BFloat16, uint16_t>(dst, n, d, stream); break;
    case DType::kInt64: launch<int64_t, int64_t>(dst, n, d, stream); break;
    case DType::kInt32: launch<int32_t, int32_t>(dst, n, d, stream); break;
    case DType::kInt16: launch<int16_t, int16_t>(dst, n, d, stream); break;
    case DType::kInt8: launch<int8_t, int8_t>(dst, n, d, stream); break;
    case DType::kUInt8: launch<uint8_t, uint8_t>(dst, n, d, stream); break;
    case DType::kBool: launch<Bool, uint8_t>(dst, n, d, stream); break;
  }
  KLOOP_CUDA_CHECK(cudaGetLastError(), "drawing on the device: launching the kernel");
  if (!stream) KLOOP_CUDA_CHECK(cudaStreamSynchronize(nullptr), "drawing on the device: running the kernel");
}

}  // namespace kloop
