// The baselines a run reports speedups against (evaluation.baselines):
// eager (the reference with TF32 off), eager-tf32 (on), compile-default and
// compile-reduce-overhead (the upstream task under torch.compile,
// evaluator/compile_baseline.h). The protocol's own baseline stays each
// attempt's headline speedup; these go beside it in the attempt's record
// (AttemptRecord::speedups) and in the reports' per-baseline columns.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "evaluator/compile_baseline.h"
#include "evaluator/evaluate.h"
#include "evaluator/verdict.h"

namespace kloop {

bool is_run_baseline(const std::string& name);
std::string run_baseline_choices();  // "eager, eager-tf32, compile-default or compile-reduce-overhead"

// A correct verdict's speedup against each of `baselines` that has a time:
// the baseline's time over the candidate's, both in the protocol's statistic.
// `compiled` holds the torch.compile baselines' times by baseline name.
// eager-tf32 has none on the CPU (TF32 is a GPU mode).
std::map<std::string, double> speedups_against(const Verdict& v, const std::vector<std::string>& baselines,
                                               const std::map<std::string, TimingSummary>& compiled);

// A run's torch.compile baselines, measured once per problem and mode (the
// baseline cache keeps them across runs) and shared by its attempts.
class CompileBaselines {
 public:
  CompileBaselines(std::vector<std::string> baselines, CompileBaselineOptions options);
  // "" when torch.compile can run for these baselines (or none is asked
  // for); else why not: a run that asks for one fails closed before its
  // first request.
  std::string unavailable() const;
  // The problem's compile baselines' times (measured now with `evaluator`
  // when not yet known; a baseline that could not be measured is left out,
  // its reason in `errors`).
  std::map<std::string, TimingSummary> times(Evaluator& evaluator, const ProblemSpec& spec,
                                             std::vector<std::string>& errors);

 private:
  std::vector<std::string> modes_;
  CompileBaselineOptions options_;
  std::mutex mutex_;
  std::map<std::string, std::map<std::string, TimingSummary>> known_;  // by problem
  std::map<std::string, std::vector<std::string>> errors_;             // by problem
};

}  // namespace kloop
