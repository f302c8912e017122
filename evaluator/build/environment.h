// What a result was produced with: kloop's version and commit, its
// compiler, LibTorch and CUDA (build_environment), and the machine
// (machine_environment: host, CPU, and for a CUDA device the GPU, its
// driver and clocks at the time). Recorded in every run's config.json and,
// the build half, in every verdict.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace kloop {

nlohmann::json build_environment();
// `device` is cpu, cuda or cuda:N; GPU fields come from nvidia-smi, and are
// replaced by a "gpu_error" when it cannot be asked.
nlohmann::json machine_environment(const std::string& device);
// One line for `kloop --version`.
std::string version_text();

}  // namespace kloop
