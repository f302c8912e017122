// torch.compile baselines: the upstream task's PyTorch Model (a KernelBench
// checkout's file, as port parity finds it) on kloop's weights and inputs,
// compiled in a mode (default, reduce-overhead), its compilation left out
// of the time, then timed as KernelBench's current eval times a program
// (evaluator/problem/upstream_parity.py). Papers report speedups against
// these beside eager FP32 and TF32; kloop measures them once per task,
// device, torch and precision and caches them like the eager baselines
// (BaselineKey). torch.compile needs torch >= 2.0: with an older torch
// every request fails closed, saying so.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "evaluator/evaluate.h"
#include "evaluator/timing/sample_stats.h"

namespace kloop {

class UpstreamHost;

// The torch.compile modes kloop measures, as the baselines' names spell
// them: compile-default, compile-reduce-overhead.
constexpr const char* kCompileBaselinePrefix = "compile-";
std::vector<std::string> compile_modes();  // default, reduce-overhead
// The mode a baseline's name stands for ("" when it is not a compile baseline).
std::string compile_mode_of(const std::string& baseline);

struct CompileBaselineOptions {
  std::string upstream_root;  // a KernelBench checkout (the folder holding KernelBench/level1/...)
  std::string python;         // with torch >= 2.0; "" = find_python_with_torch("")
  int trials = 100;           // timed calls after the warm-ups that compile
  std::chrono::seconds timeout{1800};
  bool use_cache = true;
  UpstreamHost* host = nullptr;  // borrowed, for many tasks; none: one of the call's own
};

struct CompileBaselineReport {
  std::string problem;
  std::string mode;
  std::string error;  // why there is no figure ("" when there is one)
  bool cached = false;
  std::optional<TimingSummary> time;  // seconds per call
  double compile_seconds = 0;         // the warm-ups that compiled (excluded from time)
  std::string torch_version;
  std::string measured_at;
};

// Why `python` cannot run torch.compile ("" when it can): "torch.compile
// needs torch >= 2.0; this torch is 1.13", or why python or torch is missing.
std::string compile_unavailable(const std::string& python);

// One task's baseline in `mode` at the evaluator's device, dims, seed and
// precision: from the cache, or measured now (the compiled model's outputs
// judged against kloop's reference under the evaluator's protocol first; a
// compiled model that computes something else gives no baseline).
CompileBaselineReport measure_compile_baseline(Evaluator& evaluator, const ProblemSpec& spec, const std::string& mode,
                                               const CompileBaselineOptions& options);

}  // namespace kloop
