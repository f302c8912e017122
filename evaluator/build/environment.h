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
// How many GPUs a CUDA program started from here sees: the entries of
// CUDA_VISIBLE_DEVICES when it is set (as Slurm sets it for a job), else
// the GPUs nvidia-smi lists (-1 when it cannot be run: unknown).
int visible_cuda_devices();
// Where that number came from, for messages ("CUDA_VISIBLE_DEVICES=2,3").
std::string visible_cuda_devices_source();
// What nvidia-smi -i takes for the device CUDA calls cuda:N: nvidia-smi
// ignores CUDA_VISIBLE_DEVICES, so cuda:0 of a job given GPU 3 is "3".
std::string nvidia_smi_device_id(const std::string& device);

// One line for `kloop --version`.
std::string version_text();

// Where kloop's data lives (problems/, prompts/, configs/, examples/ and the
// candidate API's headers under evaluator/kernel_api/): $KLOOP_DATA_DIR;
// else, for an installed kloop, <prefix>/share/kloop beside the running
// binary's bin/; else the source tree it was built from.
std::string data_dir();

}  // namespace kloop
