// The planner -> scheduler -> stages loop (run_driver.h).
#include "agent/scaffold/run_driver.h"

#include <filesystem>

#include "evaluator/build/content_hash.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;

std::string read_or_empty(const fs::path& p) {
  try {
    return read_file(p.string());
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace

RunDriver::RunDriver(StageContext& context, AttemptStages& stages, const Planner& planner,
                     std::vector<ProblemState>& problems, bool search)
    : c_(context), stages_(stages), planner_(planner), problems_(problems), search_(search) {}

void RunDriver::start() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (ProblemState& p : problems_) plan_next(p);
}

void RunDriver::plan_next(ProblemState& p) {
  for (PlannedAttempt& planned : planner_.next(p.progress)) {
    Attempt a;
    a.spec = p.spec;
    a.last_turn = planned.at.turn == c_.config.scaffold.turns;
    a.stored = c_.journal.stored({p.spec->name, planned.at.sample, planned.at.turn});
    a.plan = std::move(planned);
    p.progress.in_flight.insert(a.plan.at);
    // Earlier problems first; a chain's next turn before a later chain's
    // first, a round's slots in order.
    const AttemptRef at = a.plan.at;
    const Scheduler::Priority priority =
        search_ ? Scheduler::Priority{p.index, at.turn, at.sample} : Scheduler::Priority{p.index, at.sample, at.turn};
    c_.scheduler.submit(priority, [this, &p, a = std::move(a)]() mutable { carry(p, std::move(a)); });
  }
}

void RunDriver::carry(ProblemState& p, Attempt a) {
  AttemptEnd end = AttemptEnd::kFailed;
  try {
    end = stages_.carry(a);
  } catch (const std::exception& e) {  // the run folder itself failed (a full disk)
    std::lock_guard<std::mutex> lock(c_.tally.mutex);
    c_.tally.errors.push_back(a.spec->name + " sample " + std::to_string(a.plan.at.sample) + " turn " +
                              std::to_string(a.plan.at.turn) + ": " + e.what());
  }
  ended(p, a, end);
}

void RunDriver::ended(ProblemState& p, const Attempt& a, AttemptEnd end) {
  std::lock_guard<std::mutex> lock(mutex_);
  ProblemProgress& progress = p.progress;
  progress.in_flight.erase(a.plan.at);
  if (end == AttemptEnd::kRecorded) {
    progress.done.push_back({a.plan.at, a.record.outcome, a.record.speedup, a.answer.text, a.code.code, a.feedback,
                             a.plan.parents});
    if (a.record.ends_chain_for_good()) progress.ends_chain.insert(a.plan.at);
  } else {
    // Its chain (a search: its problem) waits for a rerun.
    progress.failed.insert(a.plan.at);
    std::lock_guard<std::mutex> tally(c_.tally.mutex);
    if (end == AttemptEnd::kFailed) ++c_.tally.attempts_failed;
    if (end == AttemptEnd::kStopped && static_cast<int>(a.reached) >= static_cast<int>(Stage::kAnswered)) {
      ++c_.tally.answers_kept;
    }
  }
  plan_next(p);
}

void add_recorded_attempts(ProblemProgress& progress, const std::vector<AttemptRecord>& records,
                           const std::string& run_path, const std::string& extension, const ScaffoldConfig& scaffold) {
  for (const AttemptRecord& r : records) {
    if (r.turn > scaffold.turns || r.sample >= scaffold.samples) continue;
    const fs::path dir = fs::path(run_path) / r.attempt_dir;
    const bool search = scaffold.kind == "beam" || scaffold.kind == "evolve";
    progress.done.push_back({{r.sample, r.turn}, r.outcome, r.speedup, read_or_empty(dir / "response.txt"),
                             search ? read_or_empty(dir / ("candidate" + extension)) : "",
                             read_or_empty(dir / "feedback.txt"), r.parents});
    if (r.ends_chain_for_good()) progress.ends_chain.insert({r.sample, r.turn});
  }
}

}  // namespace kloop
