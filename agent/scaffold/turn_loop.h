// TurnLoop: runs an experiment. For every problem and sample it asks the
// model for a candidate, evaluates it, and feeds the verdict back for the
// next turn, recording every attempt in the run store. LLM requests and
// compiles run in parallel across chains; evaluations on one device run one
// at a time, so timings do not disturb each other.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "agent/llm/provider.h"
#include "agent/scaffold/run_config.h"
#include "agent/llm/redactor.h"
#include "agent/store/run_store.h"
#include "evaluator/evaluate.h"
#include "evaluator/problem/spec.h"

namespace kloop {

struct TurnSummary {
  int turn = 0;
  int correct = 0;  // problems with a correct attempt in turns <= turn (any sample)
  int fast_1 = 0;   // ... that is also faster than the reference
};

struct LoopSummary {
  std::string run_path;
  int problems = 0;
  int chains = 0;
  int attempts_run = 0;      // in this invocation
  int attempts_resumed = 0;  // found in the run store and skipped
  int chains_incomplete = 0; // stopped by a provider or kloop-side error; a rerun resumes them
  double cost_usd = 0;
  long long tokens = 0;
  std::vector<TurnSummary> by_turn;
  std::string fatal_error;  // set when the provider refused for good (bad key, unknown model)
  std::vector<std::string> errors;
  std::vector<std::string> excluded;  // problems the protocol leaves out (not in `problems`)
};

class TurnLoop {
 public:
  TurnLoop(RunConfig config, LlmProvider& provider, std::ostream& progress);
  LoopSummary run();
  // `kloop run --check`: everything run() checks before its first request
  // (problems after the protocol's exclusions, the prompts rendered for one
  // problem, the device, the provider, the run folder's settings), the
  // requests still to send and, with max_tokens and prices, the cost
  // ceiling. Sends no request and makes no folder. 0 when ready, 2 if not.
  int check(std::ostream& out);
  // Ask the provider (LlmProvider::probe) before the first request; a
  // refused key then stops the run with nothing sent. Off by default.
  void set_provider_check(bool on) { provider_check_ = on; }

 private:
  std::vector<ProblemSpec> select_problems(std::vector<std::string>* excluded) const;
  EvalOptions eval_options() const;
  nlohmann::json resolved_config(const Redactor& redactor) const;

  RunConfig config_;
  LlmProvider& provider_;
  std::ostream& progress_;
  bool provider_check_ = false;
};

// The summary table printed after a run.
std::string format_summary(const LoopSummary& s);

}  // namespace kloop
