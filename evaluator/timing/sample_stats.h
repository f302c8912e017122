// Timing statistics and the stopping rule for repeated measurements. Pure
// logic: fed with synthetic samples in tests, with real ones by the workers.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kloop {

// When to stop sampling. A run stops once it has at least min_samples and
// min_seconds of measured time and either the relative standard deviation
// is below noise_target, or (where the headline is the median) a 95%
// interval of the median is within noise_target of it either way, or that
// noise has settled (an inherently noisy kernel never meets the target: its
// noise estimate stops moving instead), or when it hits max_samples or
// max_seconds.
struct TimingRules {
  int warmup_calls = 3;
  double warmup_seconds = 0.05;
  int min_samples = 10;
  int max_samples = 1000;
  double min_seconds = 0.1;
  // The loop's budget, in measured time and in wall time alike: the wall
  // holds what each sample costs besides itself (fresh inputs drawn before
  // it, the L2 flush), often more than the sample. The candidate's loop
  // reads its wall from the driver's batches, checks taken out.
  double max_seconds = 2.0;
  double noise_target = 0.005;  // relative stdev; <= 0 means "fixed count"
  // The noise has settled when, over the last settle_window samples, the
  // running relative stdev varied by less than 5% of its current value
  // (its own stdev about the current value; checked every 16 samples once
  // more than settle_window were taken). 0: wait for the target or a cap.
  int settle_window = 64;
  std::string statistic = "median";  // or "mean" (the kernelbench protocol)
  bool l2_flush = true;              // GPU: flush L2 before every sample
};

struct TimingSummary {
  int n = 0;
  double median = 0;
  double mean = 0;
  double stdev = 0;
  double rel_stdev = 0;
  double min = 0;
  double max = 0;
  double q1 = 0;
  double q3 = 0;
  double total = 0;
  bool converged = false;  // stopped on the noise (target met or settled), not a cap
  std::string stop_reason;
  // The figure the protocol reports (median or mean).
  double headline(const std::string& statistic) const { return statistic == "mean" ? mean : median; }
};

TimingSummary summarize(const std::vector<double>& samples);

// The one JSON form of rules and summaries: the worker protocol, verdicts
// and protocol records all use it. Missing fields keep their defaults.
nlohmann::json to_json(const TimingRules& r);
TimingRules rules_from_json(const nlohmann::json& j);
nlohmann::json to_json(const TimingSummary& s);
TimingSummary summary_from_json(const nlohmann::json& j);

// Samples taken while NVML reports the SM clock held down (power or thermal
// slowdown) are discarded, up to this many per timing loop; past it they
// count, so that a card throttling throughout still finishes.
constexpr int kMaxThrottledDiscards = 200;

class StoppingRule {
 public:
  // `elapsed`: the wall seconds since sampling began (tests pass their own
  // clock); by default a steady clock started here.
  explicit StoppingRule(TimingRules rules, std::function<double()> elapsed = {});
  void add(double seconds);
  // True when sampling should stop; reason() says why.
  bool done();
  const std::string& reason() const { return reason_; }
  bool converged() const { return converged_; }
  const std::vector<double>& samples() const { return samples_; }
  TimingSummary summary() const;

 private:
  bool noise_settled() const;
  double median_half_width() const;  // of a 95% interval of the median, relative; inf unless the headline
  double running_rel_stdev() const;  // of the samples so far (Welford), 0 below two

  TimingRules rules_;
  std::function<double()> elapsed_;
  std::vector<double> samples_;
  std::vector<double> sorted_;  // the samples in order, kept as they come (the median's interval after each)
  double total_ = 0;
  // Welford's running mean and sum of squared deviations, and the running
  // relative stdev after each sample (the last settle_window of them).
  double mean_ = 0, m2_ = 0;
  std::vector<double> noise_;
  std::string reason_;
  bool converged_ = false;
};

}  // namespace kloop
