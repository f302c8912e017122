// Metrics on synthetic records: a worked fast_p example (10 tasks), strict
// ">", missing problems, duplicates, best so far over turns and samples,
// pass@k, levels, intervals, the failure taxonomy and cost.
#include "agent/report/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace kloop::report {
namespace {

Attempt attempt(const std::string& problem, const std::string& verdict, std::optional<double> speedup = std::nullopt,
                int turn = 1, int sample = 0, int level = 1) {
  Attempt a;
  a.record.problem = problem;
  a.record.outcome = outcome_from_name(verdict).value();
  a.record.speedup = speedup;
  a.record.turn = turn;
  a.record.sample = sample;
  a.record.level = level;
  return a;
}

std::vector<SelectedProblem> problems(int n, int level = 1, const std::string& prefix = "p") {
  std::vector<SelectedProblem> out;
  for (int i = 0; i < n; ++i) out.push_back({prefix + std::to_string(i), level});
  return out;
}

MetricOptions no_bootstrap() {
  MetricOptions o;
  o.bootstrap_resamples = 0;
  return o;
}

// fast_p of the "all" group at turn `turn` for threshold ps[index].
double fast(const RunMetrics& m, std::size_t index, int turn = 1) {
  return m.groups.back().by_turn[turn - 1].fast_p[index].value;
}

// 10 tasks, 3 incorrect, 7 correct at 0.6, 0.9, 1.0, 1.2, 1.5, 1.8, 2.5.
std::vector<Attempt> worked_example() {
  std::vector<Attempt> a;
  const double speedups[] = {0.6, 0.9, 1.0, 1.2, 1.5, 1.8, 2.5};
  for (int i = 0; i < 7; ++i) a.push_back(attempt("p" + std::to_string(i), "correct", speedups[i]));
  for (int i = 7; i < 10; ++i) a.push_back(attempt("p" + std::to_string(i), "incorrect"));
  return a;
}

TEST(MetricsTest, WorkedExampleOfTheDesign) {
  const RunMetrics m = compute_metrics(problems(10), worked_example(), 1, 1, no_bootstrap());
  ASSERT_EQ(m.ps, (std::vector<double>{0, 0.5, 0.8, 1, 1.5, 2}));
  EXPECT_DOUBLE_EQ(fast(m, 0), 0.7);  // fast_0 = correctness
  EXPECT_DOUBLE_EQ(fast(m, 1), 0.7);
  EXPECT_DOUBLE_EQ(fast(m, 2), 0.6);
  EXPECT_DOUBLE_EQ(fast(m, 3), 0.4);  // 1.0 is not > 1
  EXPECT_DOUBLE_EQ(fast(m, 4), 0.2);  // 1.5 is not > 1.5
  EXPECT_DOUBLE_EQ(fast(m, 5), 0.1);
  const TurnMetrics& t = m.groups.back().by_turn[0];
  EXPECT_DOUBLE_EQ(t.correctness.value, 0.7);
  EXPECT_EQ(t.correct, 7);
  EXPECT_EQ(t.fast_p_count[3], 4);
  EXPECT_DOUBLE_EQ(t.compile_rate.value, 1.0);
  const double expected_geomean = std::exp(
      (std::log(0.6) + std::log(0.9) + std::log(1.0) + std::log(1.2) + std::log(1.5) + std::log(1.8) + std::log(2.5)) /
      7);
  EXPECT_NEAR(t.geomean_speedup.value, expected_geomean, 1e-12);
}

TEST(MetricsTest, SpeedupExactlyEqualToPFails) {
  const std::vector<Attempt> a = {attempt("p0", "correct", 1.0), attempt("p1", "correct", 2.0),
                                  attempt("p2", "correct", 1.0000001)};
  MetricOptions o = no_bootstrap();
  o.ps = {1, 2};
  const RunMetrics m = compute_metrics(problems(3), a, 1, 1, o);
  EXPECT_DOUBLE_EQ(fast(m, 0), 2.0 / 3);  // 2.0 and 1.0000001 are > 1, 1.0 is not
  EXPECT_DOUBLE_EQ(fast(m, 1), 0.0);      // 2.0 is not > 2
}

TEST(MetricsTest, NoCorrectResultGivesZerosAndNoGeomean) {
  const std::vector<Attempt> a = {attempt("p0", "incorrect"), attempt("p1", "compile_error"), attempt("p2", "timeout")};
  const RunMetrics m = compute_metrics(problems(3), a, 1, 1, MetricOptions{});
  const TurnMetrics& t = m.groups.back().by_turn[0];
  EXPECT_EQ(t.correctness.value, 0);
  EXPECT_EQ(t.correctness.lo, 0);
  EXPECT_EQ(t.correctness.hi, 0);
  for (const auto& e : t.fast_p) EXPECT_EQ(e.value, 0);
  EXPECT_FALSE(t.geomean_speedup.defined);
  EXPECT_DOUBLE_EQ(t.compile_rate.value, 2.0 / 3);
}

TEST(MetricsTest, MissingProblemsCountAsFailures) {
  // 4 selected, results for 2: the denominator stays 4.
  const std::vector<Attempt> a = {attempt("p0", "correct", 1.5), attempt("p1", "correct", 0.5)};
  const RunMetrics m = compute_metrics(problems(4), a, 1, 1, no_bootstrap());
  const GroupMetrics& g = m.groups.back();
  EXPECT_EQ(g.problems, 4);
  EXPECT_EQ(g.problems_with_results, 2);
  EXPECT_DOUBLE_EQ(g.by_turn[0].correctness.value, 0.5);
  EXPECT_DOUBLE_EQ(fast(m, 3), 0.25);
  EXPECT_DOUBLE_EQ(g.by_turn[0].compile_rate.value, 0.5);
}

TEST(MetricsTest, DuplicateRecordsKeepTheFirstAndOutsideRecordsAreIgnored) {
  const std::vector<Attempt> a = {attempt("p0", "incorrect"), attempt("p0", "correct", 3.0),
                                  attempt("elsewhere", "correct", 2.0)};
  const RunMetrics m = compute_metrics(problems(1), a, 1, 1, no_bootstrap());
  EXPECT_EQ(m.duplicate_records, 1);
  EXPECT_EQ(m.records_outside_selection, 1);
  EXPECT_EQ(m.failures.attempts, 1);
  EXPECT_DOUBLE_EQ(fast(m, 0), 0.0);
}

TEST(MetricsTest, CorrectWithoutTimingPassesOnlyFastZero) {
  const RunMetrics m = compute_metrics(problems(1), {attempt("p0", "correct")}, 1, 1, no_bootstrap());
  EXPECT_DOUBLE_EQ(fast(m, 0), 1.0);
  EXPECT_DOUBLE_EQ(fast(m, 1), 0.0);
  EXPECT_FALSE(m.groups.back().by_turn[0].geomean_speedup.defined);
}

TEST(MetricsTest, FastPAtTurnIsBestSoFarOverTurns) {
  // p0: wrong, then 1.2x, then a slower 0.9x; p1 stopped early after a 2.5x at turn 1.
  const std::vector<Attempt> a = {attempt("p0", "incorrect", std::nullopt, 1), attempt("p0", "correct", 1.2, 2),
                                  attempt("p0", "correct", 0.9, 3), attempt("p1", "correct", 2.5, 1)};
  const RunMetrics m = compute_metrics(problems(2), a, 3, 1, no_bootstrap());
  ASSERT_EQ(m.groups.back().by_turn.size(), 3u);
  EXPECT_DOUBLE_EQ(fast(m, 0, 1), 0.5);
  EXPECT_DOUBLE_EQ(fast(m, 3, 1), 0.5);
  EXPECT_DOUBLE_EQ(fast(m, 3, 2), 1.0);
  EXPECT_DOUBLE_EQ(fast(m, 3, 3), 1.0);  // turn 3's 0.9x does not undo turn 2's 1.2x
  EXPECT_DOUBLE_EQ(fast(m, 5, 3), 0.5);  // the early-stopped chain still counts at later turns
}

TEST(MetricsTest, SamplesGiveBestOfKOneSampleAndPassAtK) {
  // 4 samples; p0 correct in sample 2 only (1.5x), p1 in every sample (0.5x).
  std::vector<Attempt> a;
  for (int s = 0; s < 4; ++s) {
    a.push_back(s == 2 ? attempt("p0", "correct", 1.5, 1, s) : attempt("p0", "incorrect", std::nullopt, 1, s));
    a.push_back(attempt("p1", "correct", 0.5, 1, s));
  }
  const RunMetrics m = compute_metrics(problems(2), a, 1, 4, no_bootstrap());
  const GroupMetrics& g = m.groups.back();
  EXPECT_DOUBLE_EQ(g.by_turn[0].correctness.value, 1.0);  // best of 4
  EXPECT_DOUBLE_EQ(fast(m, 3), 0.5);
  EXPECT_DOUBLE_EQ(g.fast_p_one_sample[0].value, (0.25 + 1.0) / 2);
  EXPECT_DOUBLE_EQ(g.fast_p_one_sample[3].value, 0.25 / 2);
  ASSERT_EQ(g.pass_at_k.size(), 3u);  // k = 1, 2, 4
  EXPECT_EQ(g.pass_at_k[1].k, 2);
  EXPECT_DOUBLE_EQ(g.pass_at_k[0].value.value, (0.25 + 1.0) / 2);
  EXPECT_DOUBLE_EQ(g.pass_at_k[1].value.value, (0.5 + 1.0) / 2);  // 1 - C(3,2)/C(4,2) = 0.5
  EXPECT_DOUBLE_EQ(g.pass_at_k[2].value.value, 1.0);
}

TEST(MetricsTest, PassAtKEstimator) {
  EXPECT_DOUBLE_EQ(pass_at_k(10, 0, 1), 0.0);
  EXPECT_DOUBLE_EQ(pass_at_k(10, 10, 1), 1.0);
  EXPECT_NEAR(pass_at_k(10, 3, 1), 0.3, 1e-12);
  EXPECT_NEAR(pass_at_k(10, 3, 5), 1.0 - 21.0 / 252.0, 1e-12);  // C(7,5) / C(10,5)
  EXPECT_DOUBLE_EQ(pass_at_k(5, 1, 5), 1.0);
}

TEST(MetricsTest, GroupsPerLevelThenAll) {
  std::vector<SelectedProblem> sel = problems(3, 1, "a");
  for (const auto& p : problems(2, 2, "b")) sel.push_back(p);
  const std::vector<Attempt> a = {attempt("a0", "correct", 2.0), attempt("b0", "correct", 1.1, 1, 0, 2),
                                  attempt("b1", "correct", 1.1, 1, 0, 2)};
  const RunMetrics m = compute_metrics(sel, a, 1, 1, no_bootstrap());
  ASSERT_EQ(m.groups.size(), 3u);
  EXPECT_EQ(m.groups[0].name, "level 1");
  EXPECT_EQ(m.groups[0].problems, 3);
  EXPECT_NEAR(m.groups[0].by_turn[0].correctness.value, 1.0 / 3, 1e-12);
  EXPECT_EQ(m.groups[1].name, "level 2");
  EXPECT_DOUBLE_EQ(m.groups[1].by_turn[0].fast_p[3].value, 1.0);
  EXPECT_EQ(m.groups[2].name, "all");
  EXPECT_DOUBLE_EQ(m.groups[2].by_turn[0].correctness.value, 0.6);
}

TEST(MetricsTest, BootstrapIntervalsAreReproducibleAndHoldTheValue) {
  MetricOptions o;
  o.bootstrap_resamples = 2000;
  const RunMetrics a = compute_metrics(problems(10), worked_example(), 1, 1, o);
  const RunMetrics b = compute_metrics(problems(10), worked_example(), 1, 1, o);
  const Estimate& e = a.groups.back().by_turn[0].correctness;
  EXPECT_EQ(e.lo, b.groups.back().by_turn[0].correctness.lo);
  EXPECT_EQ(e.hi, b.groups.back().by_turn[0].correctness.hi);
  // 7 of 10: the 95% interval is wide but neither degenerate nor off the value.
  EXPECT_LT(e.lo, 0.7);
  EXPECT_GT(e.hi, 0.7);
  EXPECT_GE(e.lo, 0.3);
  EXPECT_LE(e.hi, 1.0);
  const Estimate& g = a.groups.back().by_turn[0].geomean_speedup;
  EXPECT_LT(g.lo, g.value);
  EXPECT_GT(g.hi, g.value);
}

TEST(MetricsTest, RejectsNegativeThresholds) {
  MetricOptions o = no_bootstrap();
  o.ps = {-1};
  EXPECT_THROW(compute_metrics(problems(1), {}, 1, 1, o), std::invalid_argument);
}

TEST(MetricsTest, FailureTaxonomyAndCost) {
  std::vector<Attempt> a = {
      attempt("p0", "compile_error", std::nullopt, 1), attempt("p0", "incorrect", std::nullopt, 2),
      attempt("p0", "integrity_violation", std::nullopt, 3), attempt("p1", "no_code"), attempt("p2", "correct", 1.3)};
  a[1].failure_kind = "hidden_shape";
  a[2].failure_kind = "output_aliases_input";
  for (auto& x : a) {
    x.record.input_tokens = 100;
    x.record.output_tokens = 10;
    x.record.cost_usd = 0.5;
    x.record.llm_seconds = 2;
    x.record.eval_seconds = 3;
  }
  a[0].record.timestamp = "2026-01-01T00:00:10Z";  // started at 00:00:05
  a[4].record.timestamp = "2026-01-01T00:01:00Z";
  const RunMetrics m = compute_metrics(problems(3), a, 3, 1, no_bootstrap());
  EXPECT_EQ(m.failures.attempts, 5);
  EXPECT_EQ(m.failures.by_outcome.at(Outcome::kCompileError), 1);
  EXPECT_EQ(m.failures.incorrect_by_kind.at("hidden_shape"), 1);
  EXPECT_EQ(m.failures.integrity_by_check.at("output_aliases_input"), 1);
  EXPECT_EQ(m.cost.input_tokens, 500);
  EXPECT_EQ(m.cost.output_tokens, 50);
  EXPECT_DOUBLE_EQ(m.cost.cost_usd, 2.5);
  EXPECT_DOUBLE_EQ(m.cost.llm_seconds, 10);
  EXPECT_DOUBLE_EQ(m.cost.wall_seconds, 55);
  // Compiled: p0 at turn 2 (incorrect ran), p2; p1 had no code.
  EXPECT_NEAR(m.groups.back().by_turn[0].compile_rate.value, 1.0 / 3, 1e-12);
  EXPECT_NEAR(m.groups.back().by_turn[1].compile_rate.value, 2.0 / 3, 1e-12);
}

// A refusal or a context overflow has no code: a failure that did not
// compile, listed under its own name in the taxonomy.
TEST(MetricsTest, ProviderOutcomesAreFailuresByName) {
  const std::vector<Attempt> a = {attempt("p0", "refused"), attempt("p1", "context_overflow"),
                                  attempt("p2", "correct", 1.5)};
  const RunMetrics m = compute_metrics(problems(3), a, 1, 1, no_bootstrap());
  const TurnMetrics& t = m.groups.back().by_turn[0];
  EXPECT_EQ(t.compiled, 1);
  EXPECT_EQ(t.correct, 1);
  EXPECT_NEAR(t.compile_rate.value, 1.0 / 3, 1e-12);
  EXPECT_NEAR(t.correctness.value, 1.0 / 3, 1e-12);
  EXPECT_EQ(m.failures.by_outcome,
            (std::map<Outcome, int>{{Outcome::kRefused, 1}, {Outcome::kContextOverflow, 1}, {Outcome::kCorrect, 1}}));
  EXPECT_TRUE(m.failures.incorrect_by_kind.empty());
  EXPECT_TRUE(m.failures.integrity_by_check.empty());
  for (Outcome v : {Outcome::kRefused, Outcome::kContextOverflow, Outcome::kNoCode}) {
    EXPECT_TRUE(codeless(v)) << outcome_name(v);
    EXPECT_FALSE(compiled(v)) << outcome_name(v);
  }
  EXPECT_FALSE(codeless(Outcome::kCompileError));
  EXPECT_TRUE(compiled(Outcome::kIncorrect));
}

TEST(MetricsTest, ProviderSummaryCountsFinishReasonsOutcomesAndRetries) {
  std::vector<Attempt> a = {
      attempt("p0", "correct", 1.1, 1),          attempt("p0", "incorrect", std::nullopt, 2),
      attempt("p0", "refused", std::nullopt, 3), attempt("p1", "context_overflow", std::nullopt, 1),
      attempt("p1", "no_code", std::nullopt, 2), attempt("p2", "timeout", std::nullopt, 1),
      attempt("p2", "no_code", std::nullopt, 2)};
  const char* finish[] = {"stop", "stop", "content_filter", "context_overflow", "other:pause_turn", "", "interrupted"};
  const int http_attempts[] = {1, 4, 1, 1, 2, 0, 1};  // 0: a record from before provider_attempts
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i].record.finish_reason = finish[i];
    a[i].record.provider_attempts = http_attempts[i];
  }
  a.push_back(attempt("elsewhere", "refused"));  // outside the selection: not counted
  a.back().record.provider_attempts = 9;
  const RunMetrics m = compute_metrics(problems(3), a, 3, 1, no_bootstrap());
  const ProviderSummary& p = m.provider;
  // The record without a finish reason is not counted; "other:<raw>" is "other".
  EXPECT_EQ(p.finish_reasons,
            (std::map<std::string, int>{
                {"stop", 2}, {"content_filter", 1}, {"context_overflow", 1}, {"interrupted", 1}, {"other", 1}}));
  EXPECT_EQ(p.refused, 1);
  EXPECT_EQ(p.context_overflow, 1);
  EXPECT_EQ(p.retried_attempts, 2);  // 4 and 2 HTTP attempts
  EXPECT_EQ(p.retries, 4);           // 3 + 1
}

TEST(MetricsTest, CostSplitsInputTokensByCache) {
  std::vector<Attempt> a = {attempt("p0", "correct", 1.0, 1), attempt("p0", "correct", 1.2, 2)};
  a[0].record.input_tokens = 1000;
  a[0].record.cache_write_tokens = 800;
  a[1].record.input_tokens = 1500;
  a[1].record.cached_input_tokens = 800;
  const RunMetrics m = compute_metrics(problems(1), a, 2, 1, no_bootstrap());
  EXPECT_EQ(m.cost.input_tokens, 2500);
  EXPECT_EQ(m.cost.cached_input_tokens, 800);
  EXPECT_EQ(m.cost.cache_write_tokens, 800);
  EXPECT_EQ(m.cost.uncached_input_tokens, 1700);
}

// The cache's saving against paying input for every input token: reads
// at their price, writes at theirs; unknown without a cache price.
TEST(MetricsTest, CacheSavingAtTheRunsPrices) {
  CostSummary c;
  c.input_tokens = 10000;
  c.cached_input_tokens = 8000;
  c.cache_write_tokens = 1000;
  EXPECT_FALSE(cache_saving_usd(c, {2.0, std::nullopt, std::nullopt}).has_value());
  EXPECT_FALSE(cache_saving_usd(c, {0.0, 0.5, std::nullopt}).has_value());
  EXPECT_DOUBLE_EQ(*cache_saving_usd(c, {2.0, 0.5, std::nullopt}), 8000 * 1.5 / 1e6);
  EXPECT_DOUBLE_EQ(*cache_saving_usd(c, {2.0, 0.5, 2.5}), (8000 * 1.5 - 1000 * 0.5) / 1e6);
}

TEST(MetricsTest, FastPCurveStepsDownAtEachSpeedup) {
  const auto table = best_so_far(problems(10), worked_example(), 1, 1);
  const auto curve = fast_p_curve(table[0], 3.0);
  ASSERT_FALSE(curve.empty());
  EXPECT_EQ(curve.front(), (std::pair<double, double>{0.0, 0.7}));
  EXPECT_EQ(curve.back(), (std::pair<double, double>{3.0, 0.0}));
  // At p = 1.0 the curve has dropped to fast_1 (strict >).
  double at_one = -1;
  for (const auto& [p, v] : curve) {
    if (p <= 1.0) at_one = v;
  }
  EXPECT_DOUBLE_EQ(at_one, 0.4);
}


// Equal budgets, worked by hand. Two problems, two scaffolds of 4 calls each:
//   wide (4 chains x 1 turn):  p0: incorrect, correct 1.5x, correct 0.9x, incorrect
//                              p1: correct 1.2x, then three incorrect
//   deep (1 chain x 4 turns):  p0: incorrect, incorrect, incorrect, correct 2.0x
//                              p1: compile_error x3, correct 0.5x
// Calls are made turn by turn, samples within a turn in order. At a budget
// of 1 call: wide has p1 correct 1.2x (fast_1 = 1/2), deep nothing; at 2:
// wide has p0 1.5x and p1 1.2x (fast_1 = 1), deep nothing; at 4: deep has
// p0 2.0x and p1 0.5x (fast_1 = 1/2, correct 1), wide still 1.
TEST(BudgetCurveTest, EqualCallBudgetsMatchTheHandComputedValues) {
  const auto ps = problems(2);
  std::vector<Attempt> wide = {attempt("p0", "incorrect", std::nullopt, 1, 0), attempt("p0", "correct", 1.5, 1, 1),
                               attempt("p0", "correct", 0.9, 1, 2),            attempt("p0", "incorrect", std::nullopt, 1, 3),
                               attempt("p1", "correct", 1.2, 1, 0),            attempt("p1", "incorrect", std::nullopt, 1, 1),
                               attempt("p1", "incorrect", std::nullopt, 1, 2), attempt("p1", "incorrect", std::nullopt, 1, 3)};
  std::vector<Attempt> deep = {attempt("p0", "incorrect", std::nullopt, 1), attempt("p0", "incorrect", std::nullopt, 2),
                               attempt("p0", "incorrect", std::nullopt, 3), attempt("p0", "correct", 2.0, 4),
                               attempt("p1", "compile_error", std::nullopt, 1), attempt("p1", "compile_error", std::nullopt, 2),
                               attempt("p1", "compile_error", std::nullopt, 3), attempt("p1", "correct", 0.5, 4)};
  for (auto* run : {&wide, &deep}) {
    for (auto& a : *run) {
      a.record.output_tokens = a.record.turn * 100;  // deep's later turns cost more
      a.record.cost_usd = 0.01;
    }
  }
  const std::vector<double> grid = budget_grid(BudgetAxis::kCalls, {wide, deep});
  EXPECT_EQ(grid, (std::vector<double>{1, 2, 4}));
  MetricOptions o = no_bootstrap();
  o.ps = {0, 1};
  const auto w = budget_curve(ps, wide, BudgetAxis::kCalls, grid, o);
  const auto d = budget_curve(ps, deep, BudgetAxis::kCalls, grid, o);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_DOUBLE_EQ(w[0].metrics.fast_p[1].value, 0.5);
  EXPECT_DOUBLE_EQ(w[1].metrics.fast_p[1].value, 1.0);
  EXPECT_DOUBLE_EQ(w[2].metrics.fast_p[1].value, 1.0);
  EXPECT_NEAR(w[1].metrics.geomean_speedup.value, std::sqrt(1.5 * 1.2), 1e-12);
  EXPECT_NEAR(w[2].metrics.geomean_speedup.value, std::sqrt(1.5 * 1.2), 1e-12) << "the best of each problem";
  EXPECT_DOUBLE_EQ(d[0].metrics.correctness.value, 0.0);
  EXPECT_DOUBLE_EQ(d[0].metrics.compile_rate.value, 0.5);
  EXPECT_DOUBLE_EQ(d[1].metrics.fast_p[1].value, 0.0);
  EXPECT_DOUBLE_EQ(d[2].metrics.correctness.value, 1.0);
  EXPECT_DOUBLE_EQ(d[2].metrics.fast_p[1].value, 0.5);
  EXPECT_NEAR(d[2].metrics.geomean_speedup.value, 1.0, 1e-12);  // sqrt(2.0 * 0.5)

  // Output tokens: wide spends 100 per call, deep 100, 200, 300, 400.
  // Budget 1000 buys wide everything (400) and deep everything (1000);
  // budget 600 buys deep three turns, nothing correct.
  const auto tokens = budget_curve(ps, deep, BudgetAxis::kOutputTokens, {600, 1000}, o);
  EXPECT_DOUBLE_EQ(tokens[0].metrics.correctness.value, 0.0);
  EXPECT_DOUBLE_EQ(tokens[1].metrics.correctness.value, 1.0);
  EXPECT_EQ(budget_grid(BudgetAxis::kOutputTokens, {wide, deep}).back(), 1000);
  const auto dollars = budget_curve(ps, wide, BudgetAxis::kDollars, {0.01, 0.02}, o);
  EXPECT_DOUBLE_EQ(dollars[0].metrics.fast_p[1].value, 0.5);
  EXPECT_DOUBLE_EQ(dollars[1].metrics.fast_p[1].value, 1.0);
  // A problem without any attempt is a failure at every budget.
  const auto three = budget_curve(problems(3), wide, BudgetAxis::kCalls, {4}, o);
  EXPECT_NEAR(three[0].metrics.fast_p[1].value, 2.0 / 3, 1e-12);
}

}  // namespace
}  // namespace kloop::report
