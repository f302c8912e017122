// Summary statistics (linear-interpolated quantiles) and the stopping rule.
#include "evaluator/timing/sample_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

namespace kloop {
namespace {

double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  double pos = q * static_cast<double>(sorted.size() - 1);
  auto lo = static_cast<std::size_t>(std::floor(pos));
  auto hi = static_cast<std::size_t>(std::ceil(pos));
  double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

}  // namespace

TimingSummary summarize(const std::vector<double>& samples) {
  TimingSummary s;
  s.n = static_cast<int>(samples.size());
  if (samples.empty()) return s;
  std::vector<double> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  for (double v : sorted) s.total += v;
  s.mean = s.total / s.n;
  double ss = 0;
  for (double v : sorted) ss += (v - s.mean) * (v - s.mean);
  s.stdev = s.n > 1 ? std::sqrt(ss / (s.n - 1)) : 0;
  s.rel_stdev = s.mean > 0 ? s.stdev / s.mean : 0;
  s.min = sorted.front();
  s.max = sorted.back();
  s.median = quantile(sorted, 0.5);
  s.q1 = quantile(sorted, 0.25);
  s.q3 = quantile(sorted, 0.75);
  return s;
}

StoppingRule::StoppingRule(TimingRules rules, std::function<double()> elapsed)
    : rules_(std::move(rules)), elapsed_(std::move(elapsed)) {
  if (!elapsed_) {
    const auto start = std::chrono::steady_clock::now();
    elapsed_ = [start] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  }
}

double StoppingRule::running_rel_stdev() const {
  const double n = static_cast<double>(samples_.size());
  return n > 1 && mean_ > 0 ? std::sqrt(m2_ / (n - 1)) / mean_ : 0;
}

void StoppingRule::add(double seconds) {
  samples_.push_back(seconds);
  sorted_.insert(std::upper_bound(sorted_.begin(), sorted_.end(), seconds), seconds);
  total_ += seconds;
  const double n = static_cast<double>(samples_.size());
  const double d = seconds - mean_;
  mean_ += d / n;
  m2_ += d * (seconds - mean_);
  if (samples_.size() > 1 && mean_ > 0 && rules_.settle_window > 0) {
    noise_.push_back(running_rel_stdev());
    const auto keep = static_cast<std::size_t>(rules_.settle_window);
    if (noise_.size() >= 2 * keep) noise_.erase(noise_.begin(), noise_.end() - static_cast<std::ptrdiff_t>(keep));
  }
}

bool StoppingRule::noise_settled() const {
  const auto window = static_cast<std::size_t>(rules_.settle_window);
  if (rules_.settle_window <= 0 || samples_.size() <= window || samples_.size() % 16 != 0) return false;
  if (noise_.size() < window) return false;
  const double current = noise_.back();
  if (!(current > 0) || !std::isfinite(current)) return false;
  double ss = 0;
  for (auto it = noise_.end() - static_cast<std::ptrdiff_t>(window); it != noise_.end(); ++it) {
    ss += (*it - current) * (*it - current);
  }
  return std::sqrt(ss / static_cast<double>(window)) / current < 0.05;
}

// The half-width of a distribution-free 95% confidence interval of the
// median (between the order statistics n/2 -+ 1.96 sqrt(n)/2), relative to
// the median; infinite where the headline is not the median or below 8
// samples. A kernel with a few slow outliers (a switch, a late look) never
// meets a stdev target, though its median is known to a tenth of a percent
// after a few tens of calls: the headline's own precision decides.
double StoppingRule::median_half_width() const {
  const std::size_t n = sorted_.size();
  if (rules_.statistic != "median" || n < 8) return std::numeric_limits<double>::infinity();
  const double half = static_cast<double>(n) / 2, z = 1.96 * std::sqrt(static_cast<double>(n)) / 2;
  const auto lo = static_cast<std::size_t>(std::max(1.0, std::floor(half - z)));
  const auto hi = static_cast<std::size_t>(std::min(static_cast<double>(n), std::ceil(half + z + 1)));
  const double median = quantile(sorted_, 0.5);
  if (!(median > 0)) return std::numeric_limits<double>::infinity();
  return (sorted_[hi - 1] - sorted_[lo - 1]) / 2 / median;
}

bool StoppingRule::done() {
  const int n = static_cast<int>(samples_.size());
  if (n >= rules_.max_samples) {
    reason_ = "reached max_samples (" + std::to_string(rules_.max_samples) + ")";
    return true;
  }
  // Even over budget, take a few samples: one sample has no spread, and the
  // post-timing correctness check relies on the module having been called
  // repeatedly.
  if (n >= std::min(3, std::max(rules_.min_samples, 1))) {
    if (total_ >= rules_.max_seconds) {
      reason_ = "reached max_seconds";
      return true;
    }
    if (elapsed_() >= rules_.max_seconds) {
      reason_ = "reached max_seconds (wall)";
      return true;
    }
  }
  if (n < rules_.min_samples || total_ < rules_.min_seconds) return false;
  if (rules_.noise_target <= 0) {
    reason_ = "fixed sample count";
    converged_ = true;
    return true;
  }
  const double rel_stdev = running_rel_stdev();
  if (rel_stdev < rules_.noise_target) {
    reason_ = "noise target met";
    converged_ = true;
    return true;
  }
  const double median_width = median_half_width();
  if (median_width <= rules_.noise_target) {
    reason_ = fmt::format("median known within {:.2f}% (95%, target {:.2f}%)", 100 * median_width,
                          100 * rules_.noise_target);
    converged_ = true;
    return true;
  }
  if (noise_settled()) {
    const std::string text =
        fmt::format("noise settled at {:.2f}% (target {:.2f}%)", 100 * rel_stdev, 100 * rules_.noise_target);
    reason_ = text;
    converged_ = true;
    return true;
  }
  return false;
}

TimingSummary StoppingRule::summary() const {
  TimingSummary s = summarize(samples_);
  s.converged = converged_;
  s.stop_reason = reason_;
  return s;
}

nlohmann::json to_json(const TimingRules& r) {
  return {{"warmup_calls", r.warmup_calls}, {"warmup_seconds", r.warmup_seconds},
          {"min_samples", r.min_samples},   {"max_samples", r.max_samples},
          {"min_seconds", r.min_seconds},   {"max_seconds", r.max_seconds},
          {"noise_target", r.noise_target}, {"settle_window", r.settle_window},
          {"statistic", r.statistic},       {"l2_flush", r.l2_flush}};
}

TimingRules rules_from_json(const nlohmann::json& j) {
  TimingRules r;
  r.warmup_calls = j.value("warmup_calls", r.warmup_calls);
  r.warmup_seconds = j.value("warmup_seconds", r.warmup_seconds);
  r.min_samples = j.value("min_samples", r.min_samples);
  r.max_samples = j.value("max_samples", r.max_samples);
  r.min_seconds = j.value("min_seconds", r.min_seconds);
  r.max_seconds = j.value("max_seconds", r.max_seconds);
  r.noise_target = j.value("noise_target", r.noise_target);
  r.settle_window = j.value("settle_window", r.settle_window);
  r.statistic = j.value("statistic", r.statistic);
  r.l2_flush = j.value("l2_flush", r.l2_flush);
  return r;
}

nlohmann::json to_json(const TimingSummary& s) {
  return {{"n", s.n},       {"median", s.median}, {"mean", s.mean},       {"stdev", s.stdev},
          {"rel_stdev", s.rel_stdev}, {"min", s.min}, {"max", s.max},   {"q1", s.q1},
          {"q3", s.q3},     {"iqr", s.q3 - s.q1}, {"total", s.total},   {"converged", s.converged},
          {"stop_reason", s.stop_reason}};
}

TimingSummary summary_from_json(const nlohmann::json& j) {
  TimingSummary s;
  s.n = j.value("n", 0);
  s.median = j.value("median", 0.0);
  s.mean = j.value("mean", 0.0);
  s.stdev = j.value("stdev", 0.0);
  s.rel_stdev = j.value("rel_stdev", 0.0);
  s.min = j.value("min", 0.0);
  s.max = j.value("max", 0.0);
  s.q1 = j.value("q1", 0.0);
  s.q3 = j.value("q3", 0.0);
  s.total = j.value("total", 0.0);
  s.converged = j.value("converged", false);
  s.stop_reason = j.value("stop_reason", "");
  return s;
}

}  // namespace kloop
