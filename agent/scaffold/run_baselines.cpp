// Speedups against the baselines a run asks for (run_baselines.h).
#include "agent/scaffold/run_baselines.h"

namespace kloop {

bool is_run_baseline(const std::string& name) {
  return name == "eager" || name == "eager-tf32" || !compile_mode_of(name).empty();
}

std::string run_baseline_choices() { return "eager, eager-tf32, compile-default or compile-reduce-overhead"; }

std::map<std::string, double> speedups_against(const Verdict& v, const std::vector<std::string>& baselines,
                                               const std::map<std::string, TimingSummary>& compiled) {
  std::map<std::string, double> out;
  if (v.verdict != VerdictClass::kCorrect || !v.candidate_time) return out;
  const std::string& st = v.timing_statistic;
  const double candidate = v.candidate_time->headline(st);
  if (!(candidate > 0)) return out;
  const bool cpu = v.device == "cpu";
  for (const auto& b : baselines) {
    std::optional<TimingSummary> base;
    if (b == "eager") {
      // On the CPU the protocol's reference time is the eager one (no TF32 there).
      base = cpu ? v.reference_time : v.reference_time_fp32;
    } else if (b == "eager-tf32") {
      if (!cpu) base = v.reference_time_tf32;
    } else if (auto it = compiled.find(b); it != compiled.end()) {
      base = it->second;
    }
    if (base && base->headline(st) > 0) out[b] = base->headline(st) / candidate;
  }
  return out;
}

CompileBaselines::CompileBaselines(std::vector<std::string> baselines, CompileBaselineOptions options)
    : options_(std::move(options)) {
  for (const auto& b : baselines) {
    if (const std::string mode = compile_mode_of(b); !mode.empty()) modes_.push_back(mode);
  }
}

std::string CompileBaselines::unavailable() const {
  if (modes_.empty()) return "";
  return compile_unavailable(options_.python);
}

std::map<std::string, TimingSummary> CompileBaselines::times(Evaluator& evaluator, const ProblemSpec& spec,
                                                             std::vector<std::string>& errors) {
  if (modes_.empty()) return {};
  // One measurement per problem at a time; the device lease the caller
  // holds keeps candidates off the device meanwhile.
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = known_.find(spec.name); it != known_.end()) {
    errors = errors_[spec.name];
    return it->second;
  }
  std::map<std::string, TimingSummary> out;
  std::vector<std::string> why;
  for (const auto& mode : modes_) {
    const CompileBaselineReport r = measure_compile_baseline(evaluator, spec, mode, options_);
    if (r.time) {
      out[kCompileBaselinePrefix + mode] = *r.time;
    } else {
      why.push_back(std::string(kCompileBaselinePrefix) + mode + ": " + r.error);
    }
  }
  known_[spec.name] = out;
  errors_[spec.name] = why;
  errors = why;
  return out;
}

}  // namespace kloop
