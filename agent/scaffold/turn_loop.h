// TurnLoop: runs an experiment. The scaffold's planner (planners.h) says
// which attempts each problem needs; each attempt goes through its stored
// stages (attempt_stages.h: request, extract, build, judge, record), and
// its verdict feeds the attempts planned after it. One scheduler
// (scheduler.h) runs it all: model requests up to the provider's
// concurrency, compiles one per slot of the run's compile pool (one per
// core by default), evaluations one at a time on each device, so timings
// do not disturb each other. A run stopped at any point (kill -9, Ctrl-C,
// a fatal provider error) resumes from the last stage each attempt reached.
//
// A run may be split into shards by problem (the i-th selected problem in
// shard i mod N, stable across resubmission): each shard's driver runs its
// problems into the same run folder, its records in a file of its own.
#pragma once

#include <atomic>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "agent/llm/provider.h"
#include "agent/scaffold/compile_pool.h"
#include "agent/scaffold/device_queues.h"
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
  double cost_usd = 0;       // every provider call of this invocation (resends and broken streams included)
  long long tokens = 0;
  std::vector<TurnSummary> by_turn;
  std::string fatal_error;  // set when the provider refused for good (bad key, unknown model)
  std::vector<std::string> errors;
  std::vector<std::string> excluded;  // problems the protocol leaves out (not in `problems`)
  std::string shard;                  // "2/8" for a shard's driver
  std::vector<QueueFigures> queues;   // the evaluation queues, one per device
  CompilePoolFigures compiles;        // the run's compile slots (candidates and run-start references)
  double seconds = 0;                 // wall time of the run's attempts
  // A stopped run (Ctrl-C, SIGTERM): why, and what it kept.
  std::string stopped;
  int answers_kept = 0;  // answered, not yet judged: the next run evaluates them without a request
  int requests_cut = 0;  // cut in flight by a second interrupt (their partial cost recorded)
  // Streams that broke after HTTP 200 (the provider's fault, never an
  // outcome of the model): how many, and what they cost.
  int transport_faults = 0;
  double transport_fault_cost_usd = 0;
  int kloop_errors = 0;  // evaluations that failed on kloop's side; their answers kept
};

// Which shard a problem falls in: the i-th of the selection (after the
// protocol's exclusions) in shard i mod count.
struct Shard {
  int index = 0;
  int count = 1;
  bool holds(std::size_t position) const { return static_cast<int>(position % static_cast<std::size_t>(count)) == index; }
};

// What `kloop run --check` found a run would still send, for a sweep's
// totals.
struct CheckTotals {
  long long problems = 0;
  long long requests = 0;
  double input_tokens = 0;
  double output_tokens = 0;
  std::optional<double> cost_usd;  // the ceiling; none without max_tokens and prices
  bool ready = false;
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
  // What the last check() counted.
  const CheckTotals& check_totals() const { return check_totals_; }
  // Ask the provider (LlmProvider::probe) before the first request; a
  // refused key then stops the run with nothing sent. Off by default.
  void set_provider_check(bool on) { provider_check_ = on; }
  // Run (or check) only this shard's problems, its records in
  // results.shard-<index>.jsonl, under the shard's own lock.
  void set_shard(Shard shard) { shard_ = shard; }
  // A count of interrupts (SIGINT, SIGTERM) the caller's handler raises:
  // the first stops the run (nothing new starts, what is in flight is kept),
  // the second also cuts the requests in flight.
  void set_interrupts(const std::atomic<int>* count) { interrupts_ = count; }
  // The problems a run selects (after the protocol's exclusions), in shard
  // order. Throws naming the config when it selects none.
  std::vector<ProblemSpec> selected_problems() const;
  // For `--slurm`, before any task starts: checks the config, makes the
  // run folder and stores the resolved config and the run's key (refused,
  // as run() refuses, when the folder holds another experiment). Needs no
  // device and sends nothing. Returns the run folder.
  std::string prepare_run_folder();
  // For `--slurm`: the shards of `count` that still have attempts to make,
  // from the run folder's records (all of them when there is no run yet).
  std::vector<int> shards_with_work(int count) const;

 private:
  std::vector<ProblemSpec> select_problems(std::vector<std::string>* excluded) const;
  EvalOptions eval_options() const;
  bool python_candidates() const { return config_.candidate_format == "kernelbench_python"; }
  // The attempt's code file: candidate.py, .cpp (CPU) or .cu (CUDA).
  std::string candidate_extension() const { return python_candidates() ? ".py" : config_.device == "cpu" ? ".cpp" : ".cu"; }
  nlohmann::json resolved_config(const Redactor& redactor) const;
  // The evaluation queues' evaluators, checked before any request.
  struct Evaluation;
  Evaluation prepare_evaluation() const;

  RunConfig config_;
  LlmProvider& provider_;
  std::ostream& progress_;
  bool provider_check_ = false;
  std::optional<Shard> shard_;
  const std::atomic<int>* interrupts_ = nullptr;
  CheckTotals check_totals_;
};

// The summary table printed after a run.
std::string format_summary(const LoopSummary& s);

}  // namespace kloop
