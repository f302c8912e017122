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
  StoppingRule rule(rules());
  int n = 0;
  while (!rule.done()) {
    rule.add(n % 2 ? 0.1 : 0.2);  // 33% relative stdev forever
    ++n;
  }
  EXPECT_NEAR(n, 67, 1);  // max_seconds (10 s) comes before max_samples (100)
  EXPECT_FALSE(rule.converged());
  EXPECT_EQ(rule.reason(), "reached max_seconds");
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
