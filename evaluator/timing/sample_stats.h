// Timing statistics and the stopping rule for repeated measurements. Pure
// logic: fed with synthetic samples in tests, with real ones by the workers.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace kloop {

// When to stop sampling. A run stops once it has at least min_samples and
// min_seconds of measured time and the relative standard deviation is below
// noise_target, or when it hits max_samples or max_seconds.
struct TimingRules {
  int warmup_calls = 3;
  double warmup_seconds = 0.05;
  int min_samples = 10;
  int max_samples = 1000;
  double min_seconds = 0.1;
  double max_seconds = 2.0;
  double noise_target = 0.005;  // relative stdev; <= 0 means "fixed count"
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
  bool converged = false;  // stopped on the noise target, not a cap
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

class StoppingRule {
 public:
  explicit StoppingRule(TimingRules rules) : rules_(rules) {}
  void add(double seconds) {
    samples_.push_back(seconds);
    total_ += seconds;
  }
  // True when sampling should stop; reason() says why.
  bool done();
  const std::string& reason() const { return reason_; }
  bool converged() const { return converged_; }
  const std::vector<double>& samples() const { return samples_; }
  TimingSummary summary() const;

 private:
  TimingRules rules_;
  std::vector<double> samples_;
  double total_ = 0;
  std::string reason_;
  bool converged_ = false;
};

}  // namespace kloop
