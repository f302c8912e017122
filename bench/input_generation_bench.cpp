// Input preparation at upstream size, side by side in one process: kloop's
// generator on the host plus the copy to the device (how inputs were made
// before the device generator), against the device generator alone. Prints
// a table; asserts nothing. Usage: kloop_input_generation_bench [--repeats N]
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "evaluator/runtime/generator.h"
#include "evaluator/runtime/generator_device.h"

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void must(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct Shape {
  const char* task;
  const char* kind;
  kloop::DType dtype;
  int64_t numel;
};

}  // namespace

int main(int argc, char** argv) {
  int repeats = 3;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--repeats") repeats = std::atoi(argv[i + 1]);
  }
  const std::vector<Shape> shapes = {
      {"19_ReLU x (4096 x 393216)", "randn", kloop::DType::kFloat32, int64_t{4096} * 393216},
      {"1_Square_matrix_multiplication_ A (4096 x 4096)", "randn", kloop::DType::kFloat32, int64_t{4096} * 4096},
      {"int64 targets (4096 x 4096)", "randint", kloop::DType::kInt64, int64_t{4096} * 4096},
  };
  cudaDeviceProp prop{};
  must(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("# input preparation per call, best of %d, on %s\n", repeats, prop.name);
  std::printf("| tensor | GB | host draw s | copy to device s | host total s | device draw s | ratio |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const Shape& s : shapes) {
    kloop::DrawSpec d;
    d.kind = s.kind;
    if (d.kind == "randint") d.params = {{"low", 0}, {"high", 1000}};
    const std::size_t bytes = static_cast<std::size_t>(s.numel) * kloop::dtype_size(s.dtype);
    std::vector<uint8_t> host(bytes);
    void* dev = nullptr;
    must(cudaMalloc(&dev, bytes), "cudaMalloc");
    double draw = 1e30, copy = 1e30, device = 1e30;
    for (int r = 0; r < repeats; ++r) {
      auto t0 = Clock::now();
      kloop::generate_into(host.data(), "x", s.dtype, s.numel, d, 7);
      draw = std::min(draw, since(t0));
      t0 = Clock::now();
      must(cudaMemcpy(dev, host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
      copy = std::min(copy, since(t0));
      t0 = Clock::now();
      kloop::generate_on_device(dev, "x", s.dtype, s.numel, d, 7);
      device = std::min(device, since(t0));
    }
    std::vector<uint8_t> back(bytes);
    must(cudaMemcpy(back.data(), dev, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy back");
    const bool same = std::memcmp(back.data(), host.data(), bytes) == 0;
    std::printf("| %s%s | %.2f | %.3f | %.3f | %.3f | %.4f | %.0fx |\n", s.task, same ? "" : " (VALUES DIFFER)",
                bytes / 1e9, draw, copy, draw + copy, device, (draw + copy) / device);
    cudaFree(dev);
  }
  return 0;
}
