// An attempt's life as stored stages, and the run's ledger of provider calls.
//
//   planned    the scaffold decided it: its parents, its step; prompt.json
//   requested  a request is about to go out (its id)
//   answered   the model's answer is in the attempt folder (response.txt,
//              reasoning.txt, raw_response.json), or an outcome without one
//              (refused, context_overflow); its cost is in the call lines
//   extracted  the candidate file is written, or the answer held no code
//   built      the candidate compiled (or did not) for every device kind
//   judged     verdict.json and feedback.txt are written; the line holds
//              the attempt's record
//   recorded   the record is in results.jsonl (no line here)
//
// Each transition is one signed line of stages.jsonl (a shard's driver:
// stages.shard-K.jsonl), appended durably before the next stage begins.
// Beside them the journal holds the provider's calls, one line each as the
// provider made it (calls.jsonl's record), billed or not: the ledger the
// report's cost is the sum of. "unanswered" ends a request that got no
// answer (the provider failed, or the run was stopped) and "kloop_error"
// an evaluation that failed on kloop's side; the next run goes on from the
// stage before either.
//
// A resume takes each attempt up at the stage after the last one it
// reached: an answered attempt is evaluated from what is stored and never
// requested again; a request that no answer or failure followed was in
// flight when its driver died (it may have been billed: counted, its id
// kept); a judged one is recorded without a new evaluation.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "agent/store/run_store.h"

namespace kloop {

enum class Stage { kNone, kPlanned, kRequested, kAnswered, kExtracted, kBuilt, kJudged, kRecorded };
const char* stage_name(Stage s);

using AttemptId = std::tuple<std::string, int, int>;  // problem, sample, turn

// What the run folder holds of one attempt.
struct StoredAttempt {
  Stage reached = Stage::kNone;
  nlohmann::json planned;    // {"parents": [[s, t], ...], "step": ...}
  nlohmann::json answered;   // the answered line
  nlohmann::json extracted;  // {"found": bool}
  std::optional<AttemptRecord> judged;
  std::string feedback_file;  // where the judged attempt's feedback is
  nlohmann::json calls = nlohmann::json::array();  // every call line's record, in order
  int requests = 0;           // requested lines
  std::vector<std::string> in_flight_at_stop;  // ids of requests no answer or failure followed
  int kloop_errors = 0;
};

// The ledger over a whole run (report): every call the provider made.
struct CallLedger {
  int calls = 0;             // call lines
  int billed_calls = 0;      // of which the provider billed (an answer, a stream that broke after HTTP 200)
  double cost_usd = 0;       // summed over every call line
  int transport_faults = 0;  // billed calls whose stream broke (never an answer)
  double transport_fault_cost_usd = 0;
  int estimated_calls = 0;   // calls costed from their length: the provider sent no usage
  int requests = 0;          // requested lines
  int in_flight_at_stop = 0; // requests a driver died during: maybe billed, cost unknown
  int answered_not_recorded = 0;  // answers kept for the next run to evaluate
  int kloop_errors_pending = 0;   // attempts whose evaluation failed on kloop's side, not yet judged
};

class StageJournal {
 public:
  // Reads the run's stage lines and records (every shard's).
  explicit StageJournal(RunStore& store);
  StageJournal(const StageJournal&) = delete;
  StageJournal& operator=(const StageJournal&) = delete;

  // What the folder held of the attempt when the journal was read.
  StoredAttempt stored(const AttemptId& id) const;
  // Appends one line for the attempt: an event of the header's list with
  // its fields. Thread-safe; durable when it returns.
  void write(const AttemptId& id, const std::string& event, nlohmann::json fields);

  // The ledger of the lines read at construction.
  CallLedger ledger() const;

 private:
  RunStore& store_;
  std::map<AttemptId, StoredAttempt> attempts_;
};

// The run's ledger from its folder (for reports; never throws: an
// unreadable journal gives an empty ledger with `read` false).
struct RunLedger {
  bool read = false;  // the run has stage lines (runs before stages have none)
  CallLedger ledger;
};
RunLedger read_run_ledger(const std::string& run_dir);

// Test hook: KLOOP_TEST_STOP_AT="EVENT:N:SIGNAL" (SIGNAL KILL or INT) makes
// this process raise SIGNAL right after its N-th `event` (a stage line, a
// call line, or "recorded") is durable, so a test stops a run at an exact
// stage instead of at a moment of the wall clock.
void stop_point_for_tests(const std::string& event);

}  // namespace kloop
