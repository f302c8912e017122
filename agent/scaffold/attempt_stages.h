// The stages of one attempt (stage_journal.h lists them), each a step with
// its inputs and outputs, each transition stored before the next begins:
//
//   plan      the planned attempt -> prompt.json, "planned"
//   request   the prompt -> the model's answer in the attempt folder, every
//             call in the ledger as it is made, "answered"; or "unanswered"
//             when the provider failed (the chain waits for a rerun)
//   extract   the answer -> the candidate file, "extracted"
//   build     the candidate file -> its builds (compile lane), "built"
//   judge     the builds -> the verdict (device lane), retried while the
//             machine rather than the candidate may be at fault, verdict.json
//             and feedback.txt, "judged"; an error of kloop's leaves
//             "kloop_error" (the attempt folder and kloop_error.log named) and
//             the next run judges again without a request
//   record    the record -> results.jsonl
//
// carry() starts after the last stage the run folder holds, so a resumed
// attempt never repeats a stage that cost money. Every scaffold's attempts
// go through these same stages; planners.h says which attempts to make.
#pragma once

#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "agent/extract/code_extract.h"
#include "agent/llm/provider.h"
#include "agent/llm/redactor.h"
#include "agent/prompt/prompt_builder.h"
#include "agent/scaffold/run_baselines.h"
#include "agent/scaffold/run_config.h"
#include "agent/scaffold/scheduler.h"
#include "agent/scaffold/search.h"
#include "agent/scaffold/stage_journal.h"
#include "agent/scaffold/status_line.h"
#include "agent/store/run_store.h"
#include "evaluator/evaluate.h"

namespace kloop {

// What a run's attempts add up to, from every thread.
struct RunTally {
  std::mutex mutex;
  int attempts_run = 0;
  int attempts_failed = 0;  // ended without a verdict: the chain or round waits for a rerun
  int answers_kept = 0;     // stopped after their answer: the next run evaluates them
  int requests_cut = 0;     // cancelled in flight (a second interrupt)
  int transport_faults = 0;
  int kloop_errors = 0;
  double cost_usd = 0;      // every call of this invocation
  double transport_fault_cost_usd = 0;
  long long tokens = 0;
  std::string fatal_error;
  std::vector<std::string> errors;
};

// What the stages of a run's attempts share.
struct StageContext {
  const RunConfig& config;
  LlmProvider& provider;
  const PromptBuilder& prompts;
  const Redactor& redactor;
  std::string system;  // the rendered system prompt, redacted
  RunStore& store;
  StageJournal& journal;
  Scheduler& scheduler;
  const std::vector<std::string>& devices;
  std::vector<std::unique_ptr<Evaluator>>& evaluators;  // one per device queue
  const std::vector<BuilderConfig>& build_configs;      // one per GPU architecture
  StatusLine& status;
  std::ostream& progress;
  RunTally& tally;
  int total_attempts = 0;
  CompileBaselines* compile_baselines = nullptr;  // the torch.compile baselines the run asks for
};

// One attempt on its way through the stages.
struct Attempt {
  const ProblemSpec* spec = nullptr;
  PlannedAttempt plan;
  bool last_turn = false;
  StoredAttempt stored;  // what the run folder held when it was taken up
  // Made as it goes.
  Stage reached = Stage::kNone;  // the last stage stored
  std::string dir;
  nlohmann::json calls = nlohmann::json::array();  // every provider call of the attempt, earlier runs' too
  GenerationResult answer;
  std::optional<Outcome> codeless;  // refused, context_overflow: an outcome without an answer to evaluate
  std::string codeless_message;
  ExtractedCode code;
  AttemptRecord record;
  std::string feedback;
  double reference_wait = 0;  // for the reference's build (inside eval_seconds)
  PhaseTimes phases;
  std::string timing_cap;
};

enum class AttemptEnd {
  kRecorded,  // its record is in results.jsonl
  kFailed,    // no verdict this run (the provider failed, or kloop did); stored as far as it got
  kStopped,   // the run was stopped (or the provider refused for good); stored as far as it got
};

class AttemptStages {
 public:
  explicit AttemptStages(StageContext& context) : c_(context) {}
  AttemptEnd carry(Attempt& a);

 private:
  bool plan(Attempt& a);
  std::optional<AttemptEnd> request(Attempt& a);
  std::optional<AttemptEnd> unanswered(Attempt& a, const std::string& request_id, const std::exception& e);
  void store_answer(Attempt& a, const std::string& request_id);
  void restore_answer(Attempt& a);
  void extract(Attempt& a);
  void restore_extracted(Attempt& a);
  std::optional<AttemptEnd> judge(Attempt& a);
  void build(Attempt& a, const std::string& source);
  void evaluate(Attempt& a, const std::string& source);
  AttemptEnd kloop_error(Attempt& a, const std::exception& e);
  void restore_judged(Attempt& a);
  AttemptEnd record(Attempt& a);
  void heard_call(Attempt& a, const std::string& request_id, const nlohmann::json& call);
  std::string progress_line(const Attempt& a, int index) const;

  StageContext& c_;
};

}  // namespace kloop
