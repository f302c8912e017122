#include "evaluator/timing/sample_stats.h"

#include <gtest/gtest.h>

namespace kloop {
namespace {

TEST(SampleStatsTest, SummaryStatistics) {
  TimingSummary s = summarize({4, 1, 3, 2, 5});
  EXPECT_EQ(s.n, 5);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.q1, 2);
  EXPECT_DOUBLE_EQ(s.q3, 4);
  EXPECT_NEAR(s.stdev, 1.5811388, 1e-6);
  EXPECT_DOUBLE_EQ(summarize({1, 2, 3, 4}).median, 2.5);
  EXPECT_EQ(summarize({}).n, 0);
}

TimingRules rules() {
  TimingRules r;
  r.min_samples = 10;
  r.max_samples = 100;
  r.min_seconds = 0.5;
  r.max_seconds = 10;
  r.noise_target = 0.005;
  return r;
}

TEST(StoppingRuleTest, StopsOnNoiseTargetOnlyAfterMinimums) {
  StoppingRule rule(rules());
  int n = 0;
  while (!rule.done()) {
    rule.add(0.1);  // perfectly quiet
    ++n;
  }
  // 10 samples would do for noise, but 0.5 s of measured time needs 5: min_samples wins.
  EXPECT_EQ(n, 10);
  EXPECT_TRUE(rule.converged());
  EXPECT_EQ(rule.reason(), "noise target met");
}

TEST(StoppingRuleTest, MinimumTimeKeepsSampling) {
  StoppingRule rule(rules());
  int n = 0;
  while (!rule.done()) {
    rule.add(0.01);
    ++n;
  }
  EXPECT_NEAR(n, 50, 1);  // 50 x 10 ms = 0.5 s (give or take rounding)
}

TEST(StoppingRuleTest, NoisySamplesHitTheCap) {
  TimingRules r = rules();
  r.settle_window = 0;  // only the target or a cap
  StoppingRule rule(r);
  int n = 0;
  while (!rule.done()) {
    rule.add(n % 2 ? 0.1 : 0.2);  // 33% relative stdev forever
    ++n;
  }
  EXPECT_NEAR(n, 67, 1);  // max_seconds (10 s) comes before max_samples (100)
  EXPECT_FALSE(rule.converged());
  EXPECT_EQ(rule.reason(), "reached max_seconds");
}

// A kernel whose calls vary by 33% never meets a 0.5% target; once its
// noise estimate stops moving, more samples only cost time.
TEST(StoppingRuleTest, NoiseThatHasSettledStopsTheLoop) {
  TimingRules r = rules();
  r.max_samples = 10000;
  r.max_seconds = 1e9;
  StoppingRule rule(r, [] { return 0.0; });
  int n = 0;
  while (!rule.done()) {
    rule.add(n % 2 ? 0.1 : 0.2);
    ++n;
  }
  EXPECT_GT(n, r.settle_window);
  EXPECT_LT(n, 200);
  EXPECT_EQ(n % 16, 0);
  EXPECT_TRUE(rule.converged());
  EXPECT_EQ(rule.reason().rfind("noise settled at 33.", 0), 0u) << rule.reason();
}

// Noise still falling (a noisy start, then quiet calls) has not settled:
// sampling goes on while the estimate moves, well past the window (here
// until its fall over one window is a few percent: about 400 samples). The
// headline is the mean here: a median would be known long before.
TEST(StoppingRuleTest, NoiseStillFallingHasNotSettled) {
  TimingRules r = rules();
  r.statistic = "mean";
  r.max_samples = 100000;
  r.max_seconds = 1e9;
  StoppingRule rule(r, [] { return 0.0; });
  int n = 0;
  while (!rule.done()) {
    rule.add(n < 64 ? (n % 2 ? 0.1 : 0.2) : 0.15);
    ++n;
  }
  EXPECT_GT(n, 4 * r.settle_window) << rule.reason();
  EXPECT_LT(n, r.max_samples) << rule.reason();
}

// A steady kernel with a slow call in ten (a context switch, a late look):
// its stdev stays near 60% and would not settle before 64 calls, but the
// median it reports is known within 0.5% after the minimum. A mean, which
// the outliers move, gets no such stop.
TEST(StoppingRuleTest, AMedianKnownWithinTheTargetStopsTheLoop) {
  TimingRules r = rules();
  r.min_seconds = 0;
  r.max_samples = 10000;
  r.max_seconds = 1e9;
  auto sample = [](int i) { return i % 10 == 3 ? 0.0159 : 0.0053 * (1 + 0.001 * (i % 7)); };
  StoppingRule median(r, [] { return 0.0; });
  int n = 0;
  while (!median.done()) median.add(sample(n++));
  EXPECT_LE(n, 16) << median.reason();
  EXPECT_TRUE(median.converged());
  EXPECT_EQ(median.reason().rfind("median known within 0.", 0), 0u) << median.reason();
  EXPECT_NEAR(median.summary().median, 0.0053, 0.0053 * 0.005);

  r.statistic = "mean";
  StoppingRule mean(r, [] { return 0.0; });
  n = 0;
  while (!mean.done()) mean.add(sample(n++));
  EXPECT_GT(n, r.settle_window) << mean.reason();
  EXPECT_EQ(mean.reason().rfind("noise settled", 0), 0u) << mean.reason();
}

// Two modes half and half: the median's interval spans both, so the rule
// does not stop on it (the settled noise or a cap ends the loop).
TEST(StoppingRuleTest, ABimodalKernelsMedianIsNotKnown) {
  TimingRules r = rules();
  r.settle_window = 0;
  r.max_seconds = 1e9;
  r.max_samples = 400;
  StoppingRule rule(r, [] { return 0.0; });
  int n = 0;
  while (!rule.done()) rule.add(n++ % 2 ? 0.010 : 0.011);
  EXPECT_EQ(n, 400);
  EXPECT_EQ(rule.reason(), "reached max_samples (400)");
}

// max_seconds is wall time too: on the GPU a sample is often the smaller
// part of what it costs (fresh inputs drawn before it, the L2 flush, checks).
TEST(StoppingRuleTest, WallTimeCapsTheLoop) {
  TimingRules r = rules();
  r.settle_window = 0;
  double wall = 0;
  StoppingRule rule(r, [&] { return wall; });
  int n = 0;
  while (!rule.done()) {
    rule.add(n % 2 ? 0.001 : 0.002);  // 3 ms of samples per 2 s of wall
    wall += 1.0;
    ++n;
  }
  EXPECT_EQ(n, 10);
  EXPECT_FALSE(rule.converged());
  EXPECT_EQ(rule.reason(), "reached max_seconds (wall)");
  EXPECT_NEAR(rule.summary().total, 0.015, 1e-12);
}

TEST(StoppingRuleTest, TakesThreeSamplesEvenWhenOneExceedsTheBudget) {
  StoppingRule rule(rules());
  int n = 0;
  while (!rule.done()) {
    rule.add(20.0);  // one call is over max_seconds by itself
    ++n;
  }
  EXPECT_EQ(n, 3);
  EXPECT_FALSE(rule.converged());
}

TEST(StoppingRuleTest, FixedCountForKernelbench) {
  TimingRules r;
  r.min_samples = r.max_samples = 100;
  r.min_seconds = 0;
  r.max_seconds = 1e9;
  r.noise_target = 0;
  StoppingRule rule(r);
  int n = 0;
  while (!rule.done()) {
    rule.add(n % 2 ? 1.0 : 3.0);
    ++n;
  }
  EXPECT_EQ(n, 100);
  EXPECT_DOUBLE_EQ(rule.summary().headline("mean"), 2.0);
}

}  // namespace
}  // namespace kloop
