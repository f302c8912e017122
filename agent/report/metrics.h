// Metrics of one run (docs/reports.md): compile rate, correctness,
// fast_p, geometric-mean speedup, pass@k, each at every turn (best so far)
// and per level, with bootstrap confidence intervals; the failures, the cost
// and what the provider did over the attempts. Pure functions of the
// selected problems and the attempt records: nothing here reads files.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/store/run_store.h"

namespace kloop::report {

// A problem of the run's selection. Every selected problem is in the
// denominator, whether or not the run has a result for it.
struct SelectedProblem {
  std::string name;
  int level = 0;  // 0: unknown
};

// One attempt as the report sees it: its record and where its files are.
struct Attempt {
  AttemptRecord record;
  std::string failure_kind;  // incorrect: what kind; integrity_violation: the check; else ""
  std::string code_file;     // relative to the run folder; "" when there is none
  std::string feedback_file;
  std::string profile_digest;  // the candidate's profile digest from verdict.json (GPU runs with profiling)
  std::string verdict_file;
};

struct MetricOptions {
  std::vector<double> ps = {0, 0.5, 0.8, 1, 1.5, 2};
  int bootstrap_resamples = 1000;  // 0: no intervals (lo = hi = value)
  uint64_t bootstrap_seed = 1;     // fixed, so a report is reproducible
  double confidence = 0.95;
};

// A statistic with its bootstrap percentile interval. `defined` is false
// when there is nothing to compute it over (a geomean with no correct result).
struct Estimate {
  double value = 0;
  double lo = 0;
  double hi = 0;
  bool defined = true;
};

// The best attempt of one chain (problem, sample) over turns <= t.
struct ChainBest {
  bool compiled = false;
  bool correct = false;
  std::optional<double> speedup;  // best speedup among its correct attempts
};

// One problem over turns <= t: its chains, one per sample.
struct ProblemBest {
  std::vector<ChainBest> chains;

  bool compiled() const;
  bool correct() const;
  std::optional<double> speedup() const;  // best over the correct chains
  int correct_chains() const;
};

// fast_p's test (strict ">"): correct and faster than p. A correct result
// without a timing passes p = 0 only, since any measured speedup is > 0.
bool passes(const ChainBest& best, double p);
bool passes(const ProblemBest& best, double p);

// The options these metrics were computed with (for more of the same kind).
struct RunMetrics;
MetricOptions options_of(const RunMetrics& m);

// Metrics of one group of problems over turns <= turn, taking for each
// problem the best attempt over those turns and over all samples.
struct TurnMetrics {
  int turn = 0;
  Estimate compile_rate;
  Estimate correctness;          // = fast_0
  std::vector<Estimate> fast_p;  // one per MetricOptions::ps
  Estimate geomean_speedup;      // over problems with a correct, timed result
  int compiled = 0;              // numerators, in problems
  int correct = 0;
  std::vector<int> fast_p_count;
};

struct PassAtK {
  int k = 1;
  Estimate value;
};

// A level (or every level) of one run.
struct GroupMetrics {
  std::string name;  // "level 1", ..., "all"
  int level = 0;     // 0 for "all"
  int problems = 0;  // selected: the denominator
  int problems_with_results = 0;
  int samples = 1;                   // k chains per problem
  std::vector<TurnMetrics> by_turn;  // turn 1 (one-shot) .. final
  // At the final turn: fast_p of one chain (mean over the k samples), next to
  // by_turn.back().fast_p which is best-of-k; they are equal when k = 1.
  std::vector<Estimate> fast_p_one_sample;
  std::vector<PassAtK> pass_at_k;  // correctness, unbiased estimator, k = 1, 2, 4, ..., samples
};

// Attempts by outcome, incorrect ones by kind, integrity violations by check.
struct FailureTaxonomy {
  int attempts = 0;
  std::map<Outcome, int> by_outcome;
  std::map<std::string, int> incorrect_by_kind;
  std::map<std::string, int> integrity_by_check;
};

// The run's prices (its config's provider.prices), US dollars per million
// tokens; cache reads and writes cost `input` unless priced on their own.
struct TokenPriceTable {
  double input = 0;
  std::optional<double> cached_input;
  std::optional<double> cache_write;
};

// Tokens by kind, and what the provider's prompt cache saved at the run's
// prices (cache_saving_usd).
struct CostSummary {
  int attempts = 0;
  long long input_tokens = 0;           // every prompt token, cached ones included
  long long cached_input_tokens = 0;    // of input_tokens, read from the provider's prompt cache
  long long cache_write_tokens = 0;     // of input_tokens, written to it
  long long uncached_input_tokens = 0;  // input_tokens - cached_input_tokens (cache writes among them)
  long long output_tokens = 0;
  long long reasoning_tokens = 0;
  double cost_usd = 0;
  double llm_seconds = 0;   // summed over attempts
  double eval_seconds = 0;  // summed over attempts
  double wall_seconds = 0;  // first attempt's start to last attempt's end
};

// What the provider did over the attempts, from their records: how each
// answer ended, the outcomes without one, and the HTTP retries. The calls
// themselves (errors by class) are in RunView::provider_calls.
struct ProviderSummary {
  // stop, length, content_filter, context_overflow, interrupted (a stream cut
  // part way), other (every "other:<raw>"); a record without a finish reason
  // (an older kloop's) is not counted.
  std::map<std::string, int> finish_reasons;
  int refused = 0;           // verdict refused: the provider would not answer
  int context_overflow = 0;  // verdict context_overflow: the conversation outgrew the window
  int retried_attempts = 0;  // attempts whose call took more than one HTTP attempt
  int retries = 0;           // summed provider_attempts - 1
};

struct RunMetrics {
  std::vector<double> ps;
  int bootstrap_resamples = 0;  // how the intervals were drawn
  uint64_t bootstrap_seed = 1;
  double confidence = 0.95;
  int turns = 1;
  int samples = 1;
  std::vector<GroupMetrics> groups;  // one per level, ascending, then "all"
  FailureTaxonomy failures;
  CostSummary cost;
  ProviderSummary provider;
  int duplicate_records = 0;          // dropped: a (problem, sample, turn) seen before
  int records_outside_selection = 0;  // ignored: a problem the selection does not hold
};

// Drops records outside the selection and later duplicates of a (problem,
// sample, turn), counting both in `stats` when given.
std::vector<Attempt> selected_attempts(const std::vector<SelectedProblem>& problems,
                                       const std::vector<Attempt>& attempts, RunMetrics* stats = nullptr);

// table[t - 1][i]: problem i's best over turns <= t, for t = 1..turns.
std::vector<std::vector<ProblemBest>> best_so_far(const std::vector<SelectedProblem>& problems,
                                                  const std::vector<Attempt>& attempts, int turns, int samples);

// `turns` and `samples` come from the run's config; records beyond them widen them.
RunMetrics compute_metrics(const std::vector<SelectedProblem>& problems, const std::vector<Attempt>& attempts,
                           int turns, int samples, const MetricOptions& options);

// The final turn's metrics against each baseline the run asked for besides
// its protocol's (evaluation.baselines: AttemptRecord::speedups): every
// correct attempt's speedup taken against that baseline, everything else as
// compute_metrics has it. A correct attempt without that figure passes
// fast_0 only. In the order of the names, over every problem selected.
// The baselines a run asked for: those its config names (`configured`,
// evaluation.baselines) and those its attempts carry speedups against
// (AttemptRecord::speedups), in order of their names.
std::vector<std::string> asked_baselines(const std::vector<Attempt>& attempts,
                                         const std::vector<std::string>& configured = {});
// The attempts with each speedup taken against `baseline` instead of the
// protocol's: an attempt without a figure for it has no speedup.
std::vector<Attempt> attempts_against(const std::vector<Attempt>& attempts, const std::string& baseline);
struct BaselineMetrics {
  std::string baseline;  // eager, eager-tf32, compile-default, compile-reduce-overhead
  TurnMetrics final_turn;
  int timed = 0;  // correct attempts with a speedup against it
};
std::vector<BaselineMetrics> baseline_metrics(const std::vector<SelectedProblem>& problems,
                                              const std::vector<Attempt>& attempts, int turns, int samples,
                                              const MetricOptions& options,
                                              const std::vector<std::string>& configured = {});

// Unbiased pass@k of one problem with n samples of which c are correct
// (Chen et al. 2021): 1 - C(n - c, k) / C(n, k).
double pass_at_k(int n, int c, int k);

// fast_p as a function of p over [0, p_max] for one turn's bests: a step
// function given as (p, value) points, each value holding from its p until
// the next point's (fast_p drops at p = a speedup, since ">" is strict).
std::vector<std::pair<double, double>> fast_p_curve(const std::vector<ProblemBest>& bests, double p_max);

// Equal-budget comparisons: a scaffold's results against what it spent per
// problem, so that ten chains of three turns and one chain of thirty
// compare at the same number of calls (or tokens, or dollars).
enum class BudgetAxis { kCalls, kOutputTokens, kDollars };
const char* budget_axis_name(BudgetAxis axis);  // "calls", "output_tokens", "dollars"

struct BudgetPoint {
  double budget = 0;    // per problem
  TurnMetrics metrics;  // correctness, fast_p, geomean over the problems at this budget
};

// At each budget, every problem's best over the attempts it made within
// it: its attempts in the order they were made (turn, then sample), the
// first ones whose summed spend (a call each; their output tokens; their
// cost) is at most the budget. The problems are the denominator, with
// bootstrap intervals over them as in compute_metrics.
std::vector<BudgetPoint> budget_curve(const std::vector<SelectedProblem>& problems,
                                      const std::vector<Attempt>& attempts, BudgetAxis axis,
                                      const std::vector<double>& budgets, const MetricOptions& options);

// Budgets to compare runs at: calls 1, 2, 4, ... and the largest number any
// run made for a problem; tokens and dollars in five even steps up to the
// largest per-problem spend of any run (none when nothing was spent).
std::vector<double> budget_grid(BudgetAxis axis, const std::vector<std::vector<Attempt>>& runs);

// What the provider's prompt cache saved against paying `input` for every
// input token (cache writes cost more, reads less); nullopt without a
// price for either.
std::optional<double> cache_saving_usd(const CostSummary& c, const TokenPriceTable& prices);


}  // namespace kloop::report
