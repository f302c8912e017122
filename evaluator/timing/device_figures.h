// What kloop remembers about a GPU between runs: its calibration (copy
// bandwidth and GEMM rates, measured once by `kloop calibrate`) and the
// reference baselines already measured on it. Both live in the build cache
// folder as JSON, keyed so that a changed GPU, driver, LibTorch, problem,
// size or timing rule measures again. Both are signed with the cache's
// integrity key (integrity.h): a file that fails its MAC is ignored with a
// warning and measured again, never believed. From the calibration and a
// problem's FLOP and byte counts comes the speed-of-light floor.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "evaluator/timing/sample_stats.h"

namespace kloop {

struct Calibration {
  nlohmann::json device;  // the worker's device info: name, driver, SMs, L2, ...
  double dram_bytes_per_s = 0;  // copy: bytes read plus bytes written per second
  double fp32_flops_per_s = 0;
  double tf32_flops_per_s = 0;
  double bf16_flops_per_s = 0;
  double small_kernel_seconds = 0;  // one tiny kernel, launch included (event timing)
  std::string measured_at;           // UTC

  nlohmann::json to_json() const;
  static Calibration from_json(const nlohmann::json& j);
};

// <cache_dir>/calibration/<gpu name>-driver<N>.json
std::string calibration_path(const std::string& cache_dir, const nlohmann::json& device);
std::optional<Calibration> load_calibration(const std::string& cache_dir, const nlohmann::json& device);
void store_calibration(const std::string& cache_dir, const Calibration& c);

// The least time the work can take on this GPU: moving the problem's
// unavoidable bytes at the calibrated copy bandwidth, or doing its FLOPs at
// the fastest calibrated rate (BF16 tensor cores: loose tolerances admit
// them, so anything slower would not be a floor).
struct SpeedOfLight {
  double memory_seconds = 0;
  double compute_seconds = 0;
  double floor_seconds = 0;
  std::string bound;  // "memory" or "compute"
};
SpeedOfLight speed_of_light(double flops, double bytes, const Calibration& c);

// A candidate faster than this fraction of the floor did not do the work.
constexpr double kBelowFloorFraction = 0.8;

// The reference's FP32 and TF32 baselines for one (problem, reference build,
// dims, device, LibTorch, timing rules). `key_of` hashes those fields.
struct BaselineKey {
  std::string problem;
  std::string reference_build;  // the reference's build key (covers its source)
  nlohmann::json dims;
  nlohmann::json device;  // name and driver are used
  std::string torch_version;
  nlohmann::json rules;
  std::string precision = "fp32";  // the run's precision (protocol.h)
  std::string hash() const;
};
struct Baseline {
  TimingSummary fp32;
  std::optional<TimingSummary> tf32;
  std::string measured_at;
};
std::optional<Baseline> load_baseline(const std::string& cache_dir, const BaselineKey& key);
void store_baseline(const std::string& cache_dir, const BaselineKey& key, const Baseline& b);
// Why a measured baseline is not to be cached ("" when it is): a loop that
// discarded kMaxThrottledDiscards samples kept throttled ones after that,
// and a cached baseline is what every later candidate of the problem is
// compared with; the next evaluation measures again instead.
std::string baseline_not_kept(int fp32_discarded, int tf32_discarded);

// The reference's hardware counters (the `metrics` of the worker's profile
// reply) for the same key, with `rules` naming the counter set: the
// reference and its inputs do not change between evaluations, so only the
// first evaluation of a problem pays for the replay passes, which cost
// tens of seconds at upstream sizes. Signed like the baselines.
std::optional<nlohmann::json> load_reference_metrics(const std::string& cache_dir, const BaselineKey& key);
void store_reference_metrics(const std::string& cache_dir, const BaselineKey& key, const nlohmann::json& metrics);

std::string utc_now();  // ISO 8601, for measured_at

}  // namespace kloop
