// RunDriver: the loop that carries a run's attempts, the same for every
// scaffold. For each problem it asks the planner which attempts come next,
// hands each to the scheduler (which carries it through its stages on a
// worker) and, as each one ends, asks again, until no problem has an
// attempt left to make or the run is stopped.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

#include "agent/scaffold/attempt_stages.h"
#include "agent/scaffold/planners.h"

namespace kloop {

// A problem's place in the run.
struct ProblemState {
  const ProblemSpec* spec = nullptr;
  int index = 0;  // in the run's selection: the scheduler's priority
  ProblemProgress progress;
};

class RunDriver {
 public:
  RunDriver(StageContext& context, AttemptStages& stages, const Planner& planner, std::vector<ProblemState>& problems,
            bool search);
  // Plans every problem's first attempts; the scheduler then runs them (and
  // those they lead to) until it has nothing left: Scheduler::wait().
  void start();

 private:
  void plan_next(ProblemState& p);  // with mutex_ held
  void carry(ProblemState& p, Attempt a);
  void ended(ProblemState& p, const Attempt& a, AttemptEnd end);

  StageContext& c_;
  AttemptStages& stages_;
  const Planner& planner_;
  std::vector<ProblemState>& problems_;
  bool search_;
  std::mutex mutex_;
};

// The attempts of `spec` the run folder holds with a verdict (records),
// as the planners see them; `code` read too (a search shows it).
void add_recorded_attempts(ProblemProgress& progress, const std::vector<AttemptRecord>& records,
                           const std::string& run_path, const std::string& extension, const ScaffoldConfig& scaffold);

}  // namespace kloop
