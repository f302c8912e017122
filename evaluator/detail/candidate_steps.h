// One candidate's evaluation once both workers run (evaluate.cpp builds,
// plans and starts them): the test calls streamed through the two workers,
// then the reference's trace, the candidate's timing, the call after it and
// the activity audit. What they observe goes to the judge (judge.h); a
// step returns the verdict the judge decides, or nothing to go on. For
// evaluate.cpp; not part of the evaluator's API.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "evaluator/detail/candidate_timing.h"
#include "evaluator/detail/worker_session.h"
#include "evaluator/protocol.h"
#include "evaluator/timing/sample_stats.h"

namespace kloop::detail {

class CandidateSteps {
 public:
  using Finish = std::function<Verdict(VerdictClass, std::string)>;
  CandidateSteps(const ProblemSpec& spec, const Protocol& protocol, const EvalOptions& options,
                 const TimingRules& rules, std::string cache_dir, const WorkDir& work, WorkerSession& ref,
                 WorkerSession& cand, Verdict& v, Finish finish);

  // The verdict of a candidate call that did not succeed, if it did not.
  std::optional<Verdict> worker_failed(const CallStatus& r);

  // A candidate call, timed as the candidate's phase.
  template <class Command>
  auto cand_call(const Command& cmd, std::chrono::milliseconds timeout, const std::vector<int>& fds = {}) {
    const auto t0 = Clock::now();
    auto reply = cand_.call(cmd, timeout, fds);
    v_.phases.candidate += since(t0);
    return reply;
  }

  // The test calls, one at a time: the reference draws the inputs and keeps
  // its expected outputs; the candidate gets the same inputs (on the GPU a
  // copy the reference publishes through CUDA IPC, on the CPU drawn again
  // from the same seed) and publishes its outputs and its inputs after the
  // call; the reference judges them where they are. Expected values never
  // leave the reference's process, and memory holds one call.
  // The tests, call by call. Under seeded construction with strict's
  // non-identity norm parameters, the candidate's norm layers must match
  // the reference's (count and shapes) for that check to apply; where they
  // do not, `cases` lose it, the tests start again without it, and the
  // verdict says which check was not applied and why.
  std::optional<Verdict> run_tests(const std::vector<TestCase>& tests, std::vector<wire::Case>& cases, int calls);

  // The reference's trace (for the activity audit), the timing by the
  // trusted timer (`timer`, calibrated before the candidate started), the
  // call after it, and on a GPU the device's evidence; `reference_key`
  // names the reference's build (its cached counters). Only for
  // evaluations that measure time.
  std::optional<Verdict> time_and_audit(const std::vector<TestCase>& tests, const std::vector<wire::Case>& cases,
                                        int calls, const json& device_info, const std::string& reference_key,
                                        TimerState& timer);

  // The error analyses the reference could not run beside the candidate
  // (its fp64 twin failed while the candidate's process held the device),
  // run once that process has ended: a call they find imprecise fails as
  // it would have failed then. The reference's last command.
  std::optional<Verdict> analyze_deferred();

 private:
  // A reference call after the candidate started: a reference that dies is
  // a verdict on the candidate (ReferenceDied), an error of its own kloop's.
  template <class Command>
  typename Command::Reply ref_call(const Command& cmd, std::chrono::milliseconds timeout, double& phase_seconds) {
    const auto t0 = Clock::now();
    auto reply = ref_.call(cmd, timeout);
    phase_seconds += since(t0);
    if (!reply) throw ReferenceDied(ref_.failure());
    if (!reply->ok()) reference_failed(reply->error_class(), reply->message(), "the reference of " + spec_.name);
    return reply->reply;
  }
  // A failure the reference replied with after the candidate started. Out
  // of memory is a verdict on the candidate (runtime_error): its process
  // may hold the device's memory on purpose, and either way it left the
  // reference no room to judge it. Any other failure is kloop's.
  [[noreturn]] void reference_failed(const std::string& error_class, const std::string& message,
                                     const std::string& what);
  // What the candidate claims it published, rebuilt from what kloop knows.
  json trusted_exchange(const json& claimed, const std::string& stem) const;
  // The reference's judgement of what the candidate published under `stem`.
  wire::JudgeReply judge(const json& claimed, const std::string& stem, bool post, bool keep, bool analyze = false);
  std::string transport() const { return v_.exchange == "cuda_ipc" ? "cuda_ipc" : "file"; }

  const ProblemSpec& spec_;
  const Protocol& protocol_;
  const EvalOptions& options_;
  const TimingRules& rules_;
  const std::string cache_dir_;
  const bool cpu_;
  const WorkDir& work_;
  WorkerSession& ref_;
  WorkerSession& cand_;
  Verdict& v_;
  Finish finish_;
  std::string inputs_via_;  // how the candidate gets its inputs: draw, file, cuda_ipc
  json tolerance_;
};

}  // namespace kloop::detail
