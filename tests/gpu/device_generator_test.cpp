// The device generator draws generate_tensor's bits: every distribution,
// every dtype, an odd length over several host blocks (so the last pair
// is half used and the host's block boundaries fall mid-tensor).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "evaluator/runtime/generator.h"
#include "evaluator/runtime/generator_device.h"

namespace kloop {
namespace {

std::vector<uint8_t> draw_on_device(const std::string& name, DType dtype, int64_t n, const DrawSpec& d, uint64_t seed) {
  void* p = nullptr;
  const std::size_t bytes = static_cast<std::size_t>(n) * dtype_size(dtype);
  EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
  generate_on_device(p, name, dtype, n, d, seed);
  std::vector<uint8_t> out(bytes);
  EXPECT_EQ(cudaMemcpy(out.data(), p, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(p);
  return out;
}

TEST(DeviceGeneratorTest, DrawsTheHostsBits) {
  struct Case {
    const char* kind;
    std::map<std::string, double> params;
    std::vector<DType> dtypes;
    std::string structure = "";  // over matrices of 1021 x 1021 (batched, the last one partial)
  };
  const std::vector<DType> floats = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};
  const std::vector<Case> cases = {
      {"randn", {}, floats},
      {"rand", {}, floats},
      {"uniform", {{"low", -3}, {"high", 5}}, floats},
      {"normal", {{"mean", 1}, {"std", 2}}, floats},
      {"bernoulli", {{"p", 0.3}}, {DType::kFloat32, DType::kBool}},
      {"ones", {}, {DType::kFloat32, DType::kInt64}},
      {"randint", {{"low", -7}, {"high", 100}},
       {DType::kInt64, DType::kInt32, DType::kInt16, DType::kInt8, DType::kUInt8}},
      {"sign", {}, {DType::kFloat32, DType::kInt64}},
      {"sign", {{"p", 0.2}}, {DType::kFloat32}},
      {"rand", {}, floats, "symmetric"},
      {"randn", {}, {DType::kFloat32}, "upper_triangular"},
      {"uniform", {{"low", -3}, {"high", 5}}, {DType::kFloat32, DType::kFloat64}, "lower_triangular"},
  };
  const int64_t n = (int64_t{3} << 20) + 5;
  for (const auto& c : cases) {
    for (DType dtype : c.dtypes) {
      DrawSpec d;
      d.kind = c.kind;
      d.params = c.params;
      d.scale = 0.7;
      if (!c.structure.empty()) {
        d.structure = c.structure;
        d.rows = d.cols = 1021;
      }
      HostTensor host = generate_tensor("x", dtype, {n}, d, 42);
      std::vector<uint8_t> device = draw_on_device("x", dtype, n, d, 42);
      std::size_t differing = 0;
      for (std::size_t i = 0; i < device.size(); ++i) differing += device[i] != host.bytes[i];
      EXPECT_EQ(differing, 0u) << c.kind << " " << c.structure << " " << dtype_name(dtype)
                               << ": bytes that differ from the host's draw";
    }
  }
}

TEST(DeviceGeneratorTest, BadDrawsFailBeforeTheLaunch) {
  DrawSpec d;
  d.kind = "gamma";
  EXPECT_THROW(generate_on_device(nullptr, "x", DType::kFloat32, 4, d, 1), std::invalid_argument);
}

}  // namespace
}  // namespace kloop
