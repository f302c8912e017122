// The judge: what the workers observed of a candidate, turned into test
// outcomes, integrity findings and a verdict class with its message. Pure:
// no process, file or device, so every verdict class and integrity check
// is unit-tested on synthetic observations (judge_test.cpp); evaluate.cpp
// gathers the observations and applies what the judge decides.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "evaluator/check/activity_audit.h"
#include "evaluator/isolation/wire.h"
#include "evaluator/protocol.h"
#include "evaluator/verdict.h"

namespace kloop {

// A verdict class with the message it ends an evaluation with.
struct Decision {
  VerdictClass verdict = VerdictClass::kCorrect;
  std::string message;
};

// How the candidate's build went, or, before it, why it cannot be built in
// the format asked for.
struct BuildObservation {
  std::string python_under_cpp;  // why it is a Python ModelNew when the C++ format was asked ("" = it is not)
  bool ok = true;
  bool timed_out = false;
  long long timeout_s = 0;
  std::string python_failure;  // a Python candidate's failed build, in words ("" for C++)
  // A failed build that is no verdict of the compiler's (BuildResult::failure:
  // a signal, a limit, the machine): said as it is, never counted as errors.
  std::string failure;
  std::vector<CompilerDiagnostic> diagnostics;
  std::string log_end;  // the build log's last line, for a failure no diagnostic names
};

// compile_error when it did not build (or cannot be built as asked);
// nothing when it did.
std::optional<Decision> judge_build(const BuildObservation& b, const std::string& candidate_path);

// A call to the candidate's worker that did not give its reply, or the
// reference's worker lost while the candidate ran.
struct WorkerFailure {
  enum class Kind {
    kReplied,            // a failure status in its reply: `error_class` and `message`
    kTimedOut,           // no reply by the deadline; `message` says during what
    kDied,               // the process ended without a reply; `message` says how
    kProtocolViolation,  // a reply that is not what was asked, or unreadable; `message` says what
    kReferenceDied,      // the reference worker died or hung; `message` is its failure
  };
  Kind kind = Kind::kDied;
  std::string error_class;  // kReplied: load_error, timeout; any other is a runtime error
  std::string message;
};

struct FailureJudgement {
  Decision decision;
  std::optional<IntegrityFinding> finding;  // protocol_violation, reference_died
};

// load_error, timeout or runtime_error for the candidate's own failures;
// an integrity violation when it broke the protocol or the reference
// worker did not survive it (it may have been attacked).
FailureJudgement judge_failure(const WorkerFailure& f);

// One failed output in words, with the tolerance it was held to.
std::string describe_failed_output(const TensorComparison& c, const Tolerance& tol);

// One test call as the two workers saw it.
struct CallObservation {
  TestOutcome test;        // which call: case_id, call, label, scaling, variant, centered (the rest is the judge's)
  int expected_count = 0;  // the reference's outputs
  std::vector<wire::Alias> aliases;  // in range (the driver checked)
  std::vector<wire::WrongDevice> wrong_device;
  std::optional<wire::JudgeReply> judged;  // absent when an output was on the wrong device
};

// What one call means: its outcome and the integrity findings it raised.
struct CallJudgement {
  TestOutcome outcome;
  std::vector<IntegrityFinding> findings;
};

// `input_names`: the problem's inputs, by index; `device`: where outputs
// must be.
CallJudgement judge_call(const CallObservation& o, const Protocol& protocol,
                         const std::vector<std::string>& input_names, const std::string& device);

// Strict's precision check of a call within its tolerance, from its error
// analysis against the fp64 twin: the first output whose error is far
// beyond what fp32 arithmetic gives this reference fails it ("precision").
// judge_call applies it; an analysis the reference deferred until the
// candidate's process ended is applied to the call's outcome afterwards.
void judge_precision(TestOutcome& out, const std::vector<wire::ErrorAnalysisRow>& rows, const Protocol& protocol);

// After the test calls: the first integrity finding where the protocol
// checks integrity, else the failed calls (incorrect), else nothing (go on
// to timing).
std::optional<Decision> judge_tests(const std::vector<TestOutcome>& tests,
                                    const std::vector<IntegrityFinding>& integrity, const Protocol& protocol);

// One traced forward of the candidate (GPU): its kernels as the activity
// audit found them, on the timed shape or on a hidden shape variant.
struct ActivityObservation {
  std::string where;           // "" for the timed shape, else " on shape variant 'NAME'"
  bool module_failed = false;  // the module failed while traced; `why` says how
  std::string why;             // that failure, or why the audit could not run; "" when it ran
  ActivityAudit audit;         // what it found, when it ran
};

// What the timing phase saw: the trusted timer's checked calls and the
// candidate's work it found outside the calls, the call after timing and,
// on a GPU, the device's own evidence.
struct TimingObservation {
  bool cpu = true;
  std::string timed_wrong;    // why a checked timed call was wrong; "" when none was
  std::string outside_work;   // the candidate's work outside its timed calls, when it is too much to be noise
  bool still_correct = true;  // the call after the timed repetitions
  // GPU only.
  double headline_seconds = 0;             // the candidate's time by the protocol's statistic
  std::optional<double> floor_seconds;     // the speed-of-light floor, where the device is calibrated
  std::string floor_bound;                 // "memory", "compute"
  // The trusted timer's resolution (floors.resolution); 0 where unknown. A
  // time is below the floor only when it is even after twice this.
  double resolution_seconds = 0;
  // The activity audit's traced forwards: the timed shape's first, then
  // each hidden shape variant's (none when the audit was off).
  std::vector<ActivityObservation> activity;
  double reference_kernels_per_call = 0;  // from the reference's own trace; 0 when unknown
  long long persisting_l2_limit = 0;
  long long persisting_l2_window_bytes = 0;
};

// The activity audit's findings, in the order a reader meets them: for the
// timed shape no_kernel_launched, side_stream_work, work_after_sync,
// library_kernels (where the protocol wants custom kernels) and
// timer_mismatch, then each variant's; an audit that could not run, or a
// module that failed while traced, is audit_unavailable where the protocol
// checks integrity (a timing stands only with its kernels seen).
std::vector<IntegrityFinding> judge_activity(const TimingObservation& t, const Protocol& protocol);

// The timing phase's findings, appended to `integrity` in the order a
// reader meets them, and the verdict they force, if any: under protocols
// that check integrity any finding ends the evaluation.
std::optional<Decision> judge_timing(const TimingObservation& t, const Protocol& protocol,
                                     std::vector<IntegrityFinding>& integrity);

// The message of a correct verdict: "N test calls passed; speedup Xx".
std::string correct_message(std::size_t test_calls, const std::optional<double>& speedup);

// What a verdict keeps of its observations (Verdict::observed) before its
// timing phase, which fills in "timing"; rejudge reads this format only.
constexpr int kObservationsFormat = 2;  // 2: the trusted timer (no claims check)
nlohmann::json observations_before_timing();

// The timing phase as the judge saw it, kept in the verdict
// (Verdict::observed["timing"]) so that a protocol with the same
// measurements judges it again: the integrity findings made before it,
// what it observed, and the headline times the speedup is the ratio of
// (`reference_headline` absent when no baseline was measured).
nlohmann::json timing_stage_to_json(const TimingObservation& t, std::size_t findings_before,
                                    const std::optional<double>& reference_headline, double candidate_headline);

// A stored verdict judged again, and its verdict.json under the new
// protocol.
struct Rejudged {
  VerdictClass verdict = VerdictClass::kCorrect;
  std::string message;
  std::optional<double> speedup;
  nlohmann::json verdict_json;
};

// A stored verdict (Verdict::to_json) judged under `to`, a protocol with
// the same measurements as the one it was judged under (same_measurements:
// they differ only in rules the judge applies to the timing phase). An
// evaluation decided before its timing phase keeps its decision; one that
// reached it has that phase's observation judged anew: its verdict,
// message, integrity findings and speedup. The JSON's protocol becomes
// `to`'s and "rejudged_from" names the one it was measured under. Throws
// std::invalid_argument saying why when the verdict holds no observations to
// judge (one written before kloop kept them, or not kloop's); the caller
// then evaluates the candidate again.
Rejudged rejudge(const nlohmann::json& stored, const Protocol& to);

}  // namespace kloop
