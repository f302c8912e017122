// The profile digest: a short, ranked text that says where one forward's GPU
// time goes and what limits each hot kernel, built from an activity trace and
// the hardware counters. Plain text with units; no knowledge of who reads it.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "profiler/records.h"

namespace kloop::profiler {

// What the digest knows beyond the profiler's own records.
struct DigestInputs {
  std::string role = "candidate";       // "candidate" or "reference"
  double forward_median_us = kNoValue;  // kloop's timing of the whole forward, never the profiler's
  double problem_flops = 0;             // the spec's cost formulas; 0 = unknown
  double problem_bytes = 0;             // bytes a forward must move at least; 0 = unknown
  std::string math = "fp32";            // which peak bounds the flops: "fp32", "tf32" or "bf16"
  int forwards = 1;                     // forward calls the trace and the metrics cover
  std::optional<DeviceRates> rates;
};

// What limits a kernel.
enum class Bound {
  kUnknown,  // no counters
  kMemory,   // DRAM is the busiest unit
  kCompute,  // an SM unit is the busiest
  kLatency,  // neither is busy: latency, occupancy or launch overhead
};
const char* bound_name(Bound bound);

// Bound from the throughputs (% of peak; NaN when unknown), the mean launch
// duration and the achieved fraction of the calibrated DRAM bandwidth (NaN
// when unknown). Neither unit above 40% of peak, or a launch under 5 µs with
// neither above 60%, is latency; otherwise the busier unit names the bound.
Bound classify_bound(double dram_pct, double sm_pct, double mean_duration_us, double dram_bandwidth_fraction);

// How many blocks of a kernel fit on one SM and what stops more from fitting.
struct OccupancyLimit {
  int blocks_per_sm = 0;
  double theoretical_pct = 0;  // resident warps as % of the SM's maximum
  std::string limiter;         // "registers", "shared memory", "threads", "blocks" or "" (unknown launch shape)
};
// Hopper's limits: 65536 registers, 2048 threads, 32 blocks and 228 KiB of
// shared memory per SM; registers allocated per warp in units of 256.
OccupancyLimit occupancy_limit(const KernelRecord& launch, int max_warps_per_sm = 64);

// One kernel (all launches of one name) with its counters averaged.
struct KernelSummary {
  std::string name;
  std::string library;        // kernel_library(name)
  int launches = 0;           // in the trace
  double total_us = 0;        // summed duration in the trace
  double share = 0;           // of all kernel time in the trace, 0..1
  KernelRecord shape;         // the first launch: grid, block, registers, shared memory
  int profiled_launches = 0;  // launches with counters
  double dram_throughput_pct = kNoValue;
  double dram_bytes_per_launch = kNoValue;  // read + written
  double sm_throughput_pct = kNoValue;
  double achieved_occupancy_pct = kNoValue;
  double l1_hit_rate_pct = kNoValue;
  double l2_hit_rate_pct = kNoValue;

  double mean_us() const { return launches > 0 ? total_us / launches : 0.0; }
};

// Joins the trace's launches with the counters (by name; a nameless counter
// record takes the name of the trace's launch at the same position) and ranks
// kernels by summed time, then by name.
std::vector<KernelSummary> summarize_kernels(const ActivityTrace& trace, const MetricsReport& metrics);

// The digest, at most max_chars bytes: dropped kernels are counted in a last
// "(N more kernels ...)" line. Deterministic for the same inputs.
std::string make_digest(const ActivityTrace& trace, const MetricsReport& metrics, const DigestInputs& inputs,
                        std::size_t max_chars);

}  // namespace kloop::profiler
