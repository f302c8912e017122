// Evaluating again when the machine, not the candidate, may be the cause:
// a worker that could not start (EnvironmentError), or a verdict the
// evaluator marks with an environment fault (the reference out of memory
// beside the candidate, a process that could not fork). Such an outcome is
// never stored as the candidate's verdict after one try: the evaluation is
// made again, up to `retries` more times. A verdict whose fault shows in
// every try stands (a candidate that always leaves the device no room gets
// its verdict); a worker that never starts throws, and the attempt waits
// for the next run with its answer kept.
#pragma once

#include <functional>
#include <string>

#include "evaluator/evaluate.h"
#include "evaluator/verdict.h"

namespace kloop {

struct RetriedVerdict {
  Verdict verdict;
  int evaluations = 1;  // tries made, the last one's verdict kept
};

// `evaluate` makes one evaluation; `note` hears of each retry and why.
// Throws the last EnvironmentError when every try ended in one.
RetriedVerdict evaluate_retrying_environment(const std::function<Verdict()>& evaluate, int retries,
                                             const std::function<void(const std::string&)>& note);

}  // namespace kloop
