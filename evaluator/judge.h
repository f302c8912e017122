// The judge: what the workers observed of a candidate, turned into test
// outcomes, integrity findings and a verdict class with its message. Pure:
// no process, file or device, so every verdict class and integrity check
// is unit-tested on synthetic observations (judge_test.cpp); evaluate.cpp
// gathers the observations and applies what the judge decides.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "evaluator/isolation/wire.h"
#include "evaluator/protocol.h"
#include "evaluator/verdict.h"

namespace kloop {

// A verdict class with the message it ends an evaluation with.
struct Decision {
  VerdictClass verdict = VerdictClass::kCorrect;
  std::string message;
};

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

// After the test calls: the first integrity finding where the protocol
// checks integrity, else the failed calls (incorrect), else nothing (go on
// to timing).
std::optional<Decision> judge_tests(const std::vector<TestOutcome>& tests,
                                    const std::vector<IntegrityFinding>& integrity, const Protocol& protocol);

// What the timing phase saw: the checked timed calls, the claims check, the
// call after timing and, on a GPU, the device's own evidence.
struct TimingObservation {
  bool cpu = true;
  std::string timed_wrong;    // why a checked timed call was wrong; "" when none was
  std::string implausible;    // why the claimed times cannot be true; "" when they can
  bool still_correct = true;  // the call after the timed repetitions
  // GPU only.
  double headline_seconds = 0;             // the candidate's time by the protocol's statistic
  double event_median = 0;                 // the events on kloop's stream
  double wall_median = 0;                  // the device busy, by the wall clock
  std::optional<double> floor_seconds;     // the speed-of-light floor, where the device is calibrated
  std::string floor_bound;                 // "memory", "compute"
  std::vector<IntegrityFinding> activity;  // the activity audit's findings, in its order
  long long persisting_l2_limit = 0;
  long long persisting_l2_window_bytes = 0;
};

// The timing phase's findings, appended to `integrity` in the order a
// reader meets them, and the verdict they force, if any: under protocols
// that check integrity any finding ends the evaluation; an implausible time
// does under every protocol (the figure would not be a measurement).
std::optional<Decision> judge_timing(const TimingObservation& t, const Protocol& protocol,
                                     std::vector<IntegrityFinding>& integrity);

}  // namespace kloop
