// Rescoring: the stored candidates of a run evaluated again under another
// protocol, without any LLM call (docs/protocols.md); where the two
// protocols measure the same and differ only in judging rules (strict and
// strict-libraries), each stored verdict is judged again from the
// observations it keeps, with no build and no device. Records go to
// runs/NAME/rescore-<protocol>.jsonl in the format of results.jsonl, and
// verdicts to runs/NAME/rescore-<protocol>/attempts/...; results.jsonl and
// the attempt folders stay as they are. A killed rescore resumes.
#pragma once

#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "agent/store/outcome.h"

namespace kloop::report {

struct RescoreOptions {
  std::string protocol;                      // protocol_choices(); not the run's own
  std::string problems_dir;                  // where the run's problems are
  std::optional<double> max_timing_seconds;  // default: the run's evaluation settings
  std::optional<double> timeout_s;
  std::optional<int> threads;
  std::string worker_path;  // "" = kloop-worker beside this executable
};

struct RescoreSummary {
  std::string results_file;         // the rescore file written
  int attempts = 0;                 // records of the run
  int rescored = 0;                 // evaluated by this invocation
  int rejudged = 0;                 // judged again from their stored observations by this invocation
  bool judging_only = false;        // the protocols differ only in judging rules
  int resumed = 0;                  // found in the rescore file and skipped
  int copied = 0;                   // no code to evaluate: recorded with their verdict
  int excluded = 0;                 // degenerate tasks the protocol leaves out: not rescored
  std::vector<std::string> errors;  // kloop-side failures; a rerun retries those attempts
  // (the run's verdict, the rescored verdict) -> attempts, over the whole rescore file.
  std::map<std::pair<Outcome, Outcome>, int> transitions;
};

// Throws std::invalid_argument for an unknown protocol or the run's own
// (its results are results.jsonl), std::runtime_error for a folder that is
// not a run. Progress goes to `progress`, one line per attempt.
RescoreSummary rescore_run(const std::string& run_dir, const RescoreOptions& options, std::ostream& progress);

// The summary printed after a rescore: counts and how verdicts moved.
std::string format_rescore_summary(const RescoreSummary& s, const std::string& run_dir, const std::string& protocol);

}  // namespace kloop::report
