// The judge on synthetic observations, no worker or device: each verdict
// class it decides (correct, incorrect, integrity_violation) and each
// integrity check it raises, under a protocol that checks integrity and one
// that does not.
#include "evaluator/judge.h"

#include "evaluator/check/activity_audit.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kloop {
namespace {

using json = nlohmann::json;

json passing(const std::string& name) {
  TensorComparison c;
  c.name = name;
  c.passed = true;
  c.numel = 16;
  return to_json(c);
}

json failing(const std::string& name) {
  TensorComparison c;
  c.name = name;
  c.numel = 16;
  c.mismatches = 3;
  c.max_abs_error = 0.5;
  return to_json(c);
}

// A call whose one output the reference judged.
CallObservation observed(json comparison, int call = 0) {
  CallObservation o;
  o.test.case_id = 1;
  o.test.call = call;
  o.test.label = "case 1 (x3)";
  o.test.scaling = "x3";
  o.expected_count = 1;
  wire::JudgeReply r;
  r.outputs = {std::move(comparison)};
  r.output_count = r.expected_count = 1;
  r.mutated_inputs = std::vector<std::size_t>{};
  o.judged = r;
  return o;
}

const std::vector<std::string> kInputs = {"x", "y"};

std::vector<std::string> checks(const std::vector<IntegrityFinding>& f) {
  std::vector<std::string> out;
  for (const auto& x : f) out.push_back(x.check);
  return out;
}

TEST(JudgeTest, APassingCallPassesAndRaisesNothing) {
  const CallJudgement j = judge_call(observed(passing("output0")), protocol_by_name("strict"), kInputs, "cpu");
  EXPECT_TRUE(j.outcome.passed);
  EXPECT_EQ(j.outcome.scaling, "x3");
  EXPECT_TRUE(j.findings.empty());
  EXPECT_FALSE(judge_tests({j.outcome}, j.findings, protocol_by_name("strict")).has_value()) << "on to timing";
}

TEST(JudgeTest, FailedCallsAreIncorrectWithTheFirstNamed) {
  const Protocol strict = protocol_by_name("strict");
  const CallJudgement ok = judge_call(observed(passing("output0")), strict, kInputs, "cpu");
  const CallJudgement bad = judge_call(observed(failing("output0"), 1), strict, kInputs, "cpu");
  EXPECT_FALSE(bad.outcome.passed);
  const auto d = judge_tests({ok.outcome, bad.outcome, bad.outcome}, {}, strict);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->verdict, VerdictClass::kIncorrect);
  // The failing call is its case's second: the message says which.
  EXPECT_NE(d->message.find("2 of 3 test calls failed; first: call 1 of case 1 (x3): output0 differs in 3 of 16"),
            std::string::npos)
      << d->message;
  EXPECT_NE(d->message.find("max abs error 0.5"), std::string::npos) << d->message;
}

TEST(JudgeTest, WrongOutputCountAndDeviceAreProblemsOfTheCall) {
  CallObservation count = observed(passing("output0"));
  count.judged->output_count = 2;
  const CallJudgement c = judge_call(count, protocol_by_name("kernelbench"), kInputs, "cpu");
  EXPECT_FALSE(c.outcome.passed);
  EXPECT_EQ(c.outcome.problem_kind, "output_count");
  EXPECT_EQ(c.outcome.problem, "forward returned 2 output(s), expected 1");

  CallObservation device;
  device.expected_count = 1;
  device.wrong_device = {{0, "cpu"}};
  const CallJudgement d = judge_call(device, protocol_by_name("kernelbench"), kInputs, "cuda:0");
  EXPECT_FALSE(d.outcome.passed);
  EXPECT_EQ(d.outcome.problem_kind, "device");
  EXPECT_EQ(d.outcome.problem, "output 0 is on cpu, expected cuda:0");
  const auto verdict = judge_tests({d.outcome}, {}, protocol_by_name("kernelbench"));
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->verdict, VerdictClass::kIncorrect);
}

TEST(JudgeTest, PrecisionFailsStrictOnlyWhereTheErrorIsFarBeyondTheReferences) {
  CallObservation o = observed(passing("output0"));
  o.judged->error_analysis = std::vector<wire::ErrorAnalysisRow>{{0, 1.0, 1.0, 1e-3, 1e-3, 1e-7, 1e-7}};
  const CallJudgement strict = judge_call(o, protocol_by_name("strict"), kInputs, "cpu");
  EXPECT_FALSE(strict.outcome.passed);
  EXPECT_EQ(strict.outcome.problem_kind, "precision");
  const CallJudgement verified = judge_call(o, protocol_by_name("verified"), kInputs, "cpu");
  EXPECT_TRUE(verified.outcome.passed) << "only strict checks precision";
  o.judged->error_analysis->at(0).candidate_rms_error = 2e-7;
  EXPECT_TRUE(judge_call(o, protocol_by_name("strict"), kInputs, "cpu").outcome.passed) << "an honest fp32 error";
  o.judged->error_analysis->at(0).candidate_rms_error = std::nan("");
  EXPECT_TRUE(judge_call(o, protocol_by_name("strict"), kInputs, "cpu").outcome.passed) << "no figure, no finding";
}

// A call whose analysis the reference deferred (its fp64 twin did not run
// beside the candidate) passed its tolerance then; the rows that come after
// the candidate's process ended fail it as they would have then.
TEST(JudgeTest, ADeferredAnalysisFailsTheCallItWouldHaveFailed) {
  TestOutcome call = judge_call(observed(passing("output0")), protocol_by_name("strict"), kInputs, "cpu").outcome;
  ASSERT_TRUE(call.passed);
  const std::vector<wire::ErrorAnalysisRow> rows{{0, 1.0, 1.0, 1e-3, 1e-3, 1e-7, 1e-7}};
  TestOutcome unchecked = call;
  judge_precision(unchecked, rows, protocol_by_name("verified"));
  EXPECT_TRUE(unchecked.passed) << "only strict checks precision";
  judge_precision(call, rows, protocol_by_name("strict"));
  EXPECT_FALSE(call.passed);
  EXPECT_EQ(call.problem_kind, "precision");
  const auto verdict = judge_tests({call}, {}, protocol_by_name("strict"));
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->verdict, VerdictClass::kIncorrect);
  EXPECT_NE(verdict->message.find("precision"), std::string::npos) << verdict->message;
}

TEST(JudgeTest, AliasingMutationAndStaleOutputsAreFindings) {
  CallObservation o = observed(passing("output0"), 1);
  o.aliases = {{0, 1}};
  o.judged->mutated_inputs = std::vector<std::size_t>{0};
  const CallJudgement j = judge_call(o, protocol_by_name("strict"), kInputs, "cpu");
  EXPECT_TRUE(j.outcome.passed) << "the outputs themselves were right";
  EXPECT_EQ(checks(j.findings), (std::vector<std::string>{"output_aliases_input", "input_mutation"}));
  EXPECT_NE(j.findings[0].message.find("input 1 (y)"), std::string::npos) << j.findings[0].message;
  EXPECT_NE(j.findings[1].message.find("input 0 (x) on case 1 (x3)"), std::string::npos) << j.findings[1].message;

  const auto strict = judge_tests({j.outcome}, j.findings, protocol_by_name("strict"));
  ASSERT_TRUE(strict);
  EXPECT_EQ(strict->verdict, VerdictClass::kIntegrityViolation);
  EXPECT_EQ(strict->message.rfind("output_aliases_input: ", 0), 0u) << strict->message;
  EXPECT_FALSE(judge_tests({j.outcome}, j.findings, protocol_by_name("kernelbench")).has_value())
      << "kernelbench records findings but does not judge by them";

}

// stale_output only where the outputs are the previous call's expected
// ones and not this call's: a wrong kernel that repeats its mistake (a
// constant, zeros) is incorrect, as the comparison describes it.
TEST(JudgeTest, StaleOutputOnlyWhereTheOutputsAreThePreviousCallsExpected) {
  CallObservation o = observed(failing("output0"), 1);
  o.judged->same_as_previous_call = true;
  o.judged->expected_same_as_previous_call = false;
  o.judged->matches_previous_expected = false;
  const CallJudgement wrong = judge_call(o, protocol_by_name("strict"), kInputs, "cpu");
  EXPECT_FALSE(wrong.outcome.passed);
  EXPECT_TRUE(wrong.findings.empty()) << "the same wrong output twice is a mismatch, not a cache";
  const auto verdict = judge_tests({wrong.outcome}, wrong.findings, protocol_by_name("strict"));
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->verdict, VerdictClass::kIncorrect) << verdict->message;

  o.judged->matches_previous_expected = true;
  const CallJudgement cached = judge_call(o, protocol_by_name("strict"), kInputs, "cpu");
  EXPECT_EQ(checks(cached.findings), (std::vector<std::string>{"stale_output"}));
  // Within the tolerance of the previous call's expected outputs is enough:
  // a cache that perturbs what it returns is no less a cache.
  o.judged->same_as_previous_call = false;
  EXPECT_EQ(checks(judge_call(o, protocol_by_name("strict"), kInputs, "cpu").findings),
            (std::vector<std::string>{"stale_output"}));

  // The reference's outputs are the same for both calls: no cache to tell.
  o.judged->expected_same_as_previous_call = true;
  EXPECT_TRUE(judge_call(o, protocol_by_name("strict"), kInputs, "cpu").findings.empty());
  // A right answer is never stale.
  CallObservation right = observed(passing("output0"), 1);
  right.judged->same_as_previous_call = true;
  right.judged->expected_same_as_previous_call = false;
  right.judged->matches_previous_expected = true;
  EXPECT_TRUE(judge_call(right, protocol_by_name("strict"), kInputs, "cpu").findings.empty());
}

TEST(JudgeTest, AnHonestTimingPhaseDecidesNothing) {
  TimingObservation t;
  std::vector<IntegrityFinding> integrity;
  EXPECT_FALSE(judge_timing(t, protocol_by_name("strict"), integrity).has_value());
  t.cpu = false;
  t.headline_seconds = 1e-3;
  t.floor_seconds = 0.5e-3;
  t.floor_bound = "memory";
  EXPECT_FALSE(judge_timing(t, protocol_by_name("strict"), integrity).has_value());
  EXPECT_TRUE(integrity.empty());
}

// The timer counts work outside the calls in their times; much of it is a
// violation where integrity is checked, on the CPU as on a GPU, and a
// finding without a verdict under kernelbench.
TEST(JudgeTest, WorkOutsideTheTimedCallsIsAViolationWhereIntegrityIsChecked) {
  for (const bool cpu : {true, false}) {
    TimingObservation t;
    t.cpu = cpu;
    t.outside_work = "9 ms of the candidate's work fell outside its timed calls, against 1 ms inside them";
    std::vector<IntegrityFinding> integrity;
    const auto d = judge_timing(t, protocol_by_name("strict"), integrity);
    ASSERT_TRUE(d) << cpu;
    EXPECT_EQ(d->verdict, VerdictClass::kIntegrityViolation);
    EXPECT_EQ(d->message.rfind("work_outside_timed_window: 9 ms of the candidate's work", 0), 0u) << d->message;
    integrity.clear();
    EXPECT_FALSE(judge_timing(t, protocol_by_name("kernelbench"), integrity).has_value());
    EXPECT_EQ(checks(integrity), (std::vector<std::string>{"work_outside_timed_window"}));
  }
}

TEST(JudgeTest, WrongTimedCallsAndCorruptionAfterRepeatsAreViolationsWhereIntegrityIsChecked) {
  TimingObservation t;
  t.timed_wrong = "output0 differs";
  std::vector<IntegrityFinding> integrity;
  auto d = judge_timing(t, protocol_by_name("strict"), integrity);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->message.rfind("timed_call_incorrect: a timed call, on inputs of its own, gave a wrong result", 0), 0u)
      << d->message;
  integrity.clear();
  EXPECT_FALSE(judge_timing(t, protocol_by_name("kernelbench"), integrity).has_value());
  EXPECT_EQ(checks(integrity), (std::vector<std::string>{"timed_call_incorrect"})) << "recorded all the same";

  TimingObservation after;
  after.still_correct = false;
  integrity.clear();
  d = judge_timing(after, protocol_by_name("verified"), integrity);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->message, "corrupt_after_repeat: the output was correct at first but wrong after the timed repetitions");
  integrity.clear();
  EXPECT_FALSE(judge_timing(after, protocol_by_name("kernelbench"), integrity).has_value());
  EXPECT_EQ(checks(integrity), (std::vector<std::string>{"corrupt_after_repeat"}));
}

TEST(JudgeTest, TheDevicesEvidenceIsJudgedInOrderOnAGpu) {
  TimingObservation t;
  t.cpu = false;
  t.headline_seconds = 1e-6;
  t.outside_work = "0.9 ms of the candidate's work fell outside its timed calls";
  t.floor_seconds = 100e-6;
  t.floor_bound = "memory";
  ActivityObservation side;
  side.audit.kernels_per_call = 1;
  side.audit.other_stream_kernels = 1;
  side.audit.other_stream_names = {"spin"};
  t.activity = {side};
  t.persisting_l2_limit = 1 << 20;
  std::vector<IntegrityFinding> integrity;
  const auto d = judge_timing(t, protocol_by_name("strict"), integrity);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->verdict, VerdictClass::kIntegrityViolation);
  EXPECT_EQ(checks(integrity), (std::vector<std::string>{"work_outside_timed_window", "below_speed_of_light",
                                                         "side_stream_work", "persisting_l2"}));
  EXPECT_EQ(d->message.rfind("work_outside_timed_window: 0.9 ms", 0), 0u) << d->message;

  // verified has no speed-of-light floor; kernelbench judges none of it.
  integrity.clear();
  EXPECT_TRUE(judge_timing(t, protocol_by_name("verified"), integrity).has_value());
  EXPECT_EQ(checks(integrity), (std::vector<std::string>{"work_outside_timed_window", "side_stream_work", "persisting_l2"}));
  integrity.clear();
  EXPECT_FALSE(judge_timing(t, protocol_by_name("kernelbench"), integrity).has_value());
  EXPECT_EQ(integrity.size(), 3u);

  // The CPU has none of the device's checks.
  t.cpu = true;
  t.outside_work.clear();
  integrity.clear();
  EXPECT_FALSE(judge_timing(t, protocol_by_name("strict"), integrity).has_value());
  EXPECT_TRUE(integrity.empty());
}

// Every check of the activity audit, from what the traces saw.
TEST(JudgeTest, EachActivityCheckFromTheTraces) {
  TimingObservation t;
  t.cpu = false;
  t.headline_seconds = 10e-6;  // 10 us per call by the timer
  t.reference_kernels_per_call = 2;
  ActivityObservation timed;
  timed.audit.kernels_per_call = 0;  // nothing launched, where the reference launches 2
  t.activity = {timed};
  const Protocol strict = protocol_by_name("strict");
  std::vector<IntegrityFinding> found = judge_activity(t, strict);
  ASSERT_EQ(checks(found), (std::vector<std::string>{"no_kernel_launched"}));
  EXPECT_EQ(found[0].message.rfind("the forward launched no kernel while the reference launches 2", 0), 0u)
      << found[0].message;

  // On the timed shape, in this order: streams, late work, libraries, timer.
  timed.audit.kernels_per_call = 3;
  timed.audit.other_stream_kernels = 1;
  timed.audit.other_stream_names = {"side_kernel"};
  timed.audit.late_kernels = 2;
  timed.audit.late_names = {"late_a", "late_b"};
  timed.audit.libraries = {"cublas", "cudnn"};
  timed.audit.gpu_us_per_call = 100;  // more than twice the events' 10 us, plus 20
  t.activity = {timed};
  found = judge_activity(t, strict);
  EXPECT_EQ(checks(found),
            (std::vector<std::string>{"side_stream_work", "work_after_sync", "library_kernels", "timer_mismatch"}));
  EXPECT_NE(found[0].message.find("(side_kernel) were still running"), std::string::npos) << found[0].message;
  EXPECT_NE(found[1].message.find("(late_a, late_b) were still running after"), std::string::npos);
  EXPECT_NE(found[2].message.find("library kernels (cublas, cudnn) where the strict protocol"), std::string::npos);
  // verified and kernelbench allow library kernels; the rest is found under each.
  EXPECT_EQ(checks(judge_activity(t, protocol_by_name("verified"))),
            (std::vector<std::string>{"side_stream_work", "work_after_sync", "timer_mismatch"}));
  timed.audit.gpu_us_per_call = 2 * 10 + 20;  // at the margin: not a mismatch
  timed.audit.other_stream_kernels = timed.audit.late_kernels = 0;
  timed.audit.libraries.clear();
  t.activity = {timed};
  EXPECT_TRUE(judge_activity(t, strict).empty());

  // Hidden shape variants: their findings name the variant; a variant that
  // could not be traced is unavailable and the next is still judged; a
  // module that failed while traced ends the list.
  ActivityObservation odd, broken, failed, never;
  odd.where = " on shape variant 'odd'";
  odd.audit.kernels_per_call = 1;
  odd.audit.libraries = {"cublas"};
  broken.where = " on shape variant 'tall'";
  broken.why = "the markers were miscounted";
  failed.where = " on shape variant 'wide'";
  failed.module_failed = true;
  failed.why = "runtime_error: boom";
  never.where = " on shape variant 'never'";
  never.audit.libraries = {"cudnn"};
  t.activity = {timed, odd, broken, failed, never};
  found = judge_activity(t, strict);
  ASSERT_EQ(checks(found), (std::vector<std::string>{"library_kernels", "audit_unavailable", "audit_unavailable"}));
  EXPECT_NE(found[0].message.find("(cublas) on shape variant 'odd' where"), std::string::npos) << found[0].message;
  EXPECT_EQ(found[1].message, "the activity audit could not run on shape variant 'tall': the markers were miscounted");
  EXPECT_EQ(found[2].message,
            "the module failed while its kernels were traced on shape variant 'wide': runtime_error: boom");

  // The timed shape's audit fails closed where integrity is checked, and
  // only there.
  ActivityObservation blind;
  blind.why = "no CUPTI in this kloop-worker";
  t.activity = {blind};
  found = judge_activity(t, strict);
  ASSERT_EQ(checks(found), (std::vector<std::string>{"audit_unavailable"}));
  EXPECT_EQ(found[0].message.rfind("the activity audit could not run: no CUPTI in this kloop-worker (under this", 0),
            0u);
  EXPECT_TRUE(judge_activity(t, protocol_by_name("kernelbench")).empty());
  blind.module_failed = true;
  blind.why = "exit status 3";
  t.activity = {blind};
  found = judge_activity(t, protocol_by_name("verified"));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].message,
            "the module failed while its kernels were traced, after passing its tests and timing: exit status 3");
  std::vector<IntegrityFinding> integrity;
  const auto d = judge_timing(t, protocol_by_name("verified"), integrity);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->verdict, VerdictClass::kIntegrityViolation);
  EXPECT_EQ(d->message.rfind("audit_unavailable: the module failed", 0), 0u) << d->message;
}

TEST(JudgeTest, ABuildThatFailedIsACompileError) {
  BuildObservation b;
  EXPECT_FALSE(judge_build(b, "c.cpp").has_value());
  b.python_under_cpp = "it imports torch";
  auto d = judge_build(b, "c.py");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->verdict, VerdictClass::kCompileError);
  EXPECT_EQ(d->message.rfind("c.py is a Python ModelNew (it imports torch), KernelBench's format", 0), 0u);

  b = {};
  b.ok = false;
  b.diagnostics = {{"c.cpp", 3, 1, "warning", "unused"}, {"c.cpp", 9, 5, "error", "no member named 'foo'"},
                   {"c.cpp", 12, 2, "error", "expected ';'"}};
  d = judge_build(b, "c.cpp");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->verdict, VerdictClass::kCompileError);
  EXPECT_EQ(d->message, "2 error(s); first: " + b.diagnostics[1].format());
  b.timed_out = true;
  b.timeout_s = 120;
  EXPECT_EQ(judge_build(b, "c.cpp")->message, "compilation did not finish within 120 s");
  b.timed_out = false;
  b.python_failure = "importing the candidate raised SyntaxError";
  EXPECT_EQ(judge_build(b, "c.py")->message, "importing the candidate raised SyntaxError");
  // A build ended by a signal, a limit or the machine says so (and was not
  // cached), never "0 error(s)".
  b.failure = "the build was killed by SIGKILL (killed)";
  EXPECT_EQ(judge_build(b, "c.py")->message,
            "the build was killed by SIGKILL (killed) (not cached: tried again next time)");
  // One the compiler itself ended without a diagnostic (the assembler's).
  b = {};
  b.ok = false;
  b.log_end = "candidate.cpp:1: Error: file not found: /secret";
  EXPECT_EQ(judge_build(b, "c.cpp")->message,
            "the build failed without a compiler error; its log ends: candidate.cpp:1: Error: file not found: /secret");
}

// Each way a worker call can fail, as the candidate's verdict.
TEST(JudgeTest, WorkerFailuresAreTheCandidatesVerdicts) {
  using Kind = WorkerFailure::Kind;
  struct Case {
    WorkerFailure failure;
    VerdictClass verdict;
    std::string message;
    std::string finding;
  };
  const std::vector<Case> cases = {
      {{Kind::kReplied, "load_error", "no ModelNew in the module"}, VerdictClass::kLoadError,
       "no ModelNew in the module", ""},
      {{Kind::kReplied, "timeout", "forward did not return"}, VerdictClass::kTimeout, "forward did not return", ""},
      {{Kind::kReplied, "runtime_error", "std::bad_alloc"}, VerdictClass::kRuntimeError, "std::bad_alloc", ""},
      {{Kind::kReplied, "made_up_class", "odd"}, VerdictClass::kRuntimeError, "odd", ""},
      {{Kind::kTimedOut, "", "no result within 10 s"}, VerdictClass::kTimeout, "no result within 10 s", ""},
      {{Kind::kDied, "", "the process was killed by SIGSEGV"}, VerdictClass::kRuntimeError,
       "the process was killed by SIGSEGV", ""},
      {{Kind::kProtocolViolation, "", "a forged reply"}, VerdictClass::kIntegrityViolation,
       "protocol_violation: a forged reply", "protocol_violation"},
      {{Kind::kReferenceDied, "", "exit status 9"}, VerdictClass::kIntegrityViolation,
       "reference_died: the reference worker died or hung while the candidate ran: exit status 9", "reference_died"},
  };
  for (const auto& c : cases) {
    const FailureJudgement j = judge_failure(c.failure);
    EXPECT_EQ(j.decision.verdict, c.verdict) << c.message;
    EXPECT_EQ(j.decision.message, c.message);
    EXPECT_EQ(j.finding ? j.finding->check : "", c.finding) << c.message;
  }
}

// A verdict as Evaluator::evaluate stores it after its timing phase: the
// test calls passed, the phase observed as `t`, judged under `protocol`.
Verdict stored_after_timing(const TimingObservation& t, const Protocol& protocol,
                            std::vector<IntegrityFinding> before = {}) {
  Verdict v;
  v.integrity = std::move(before);
  v.protocol_name = protocol.name;
  v.protocol = protocol.to_json();
  v.tests.resize(4);
  for (auto& x : v.tests) x.passed = true;
  TimingSummary cand, ref;
  cand.n = ref.n = 10;
  cand.median = t.headline_seconds;
  ref.median = 3 * t.headline_seconds;
  v.candidate_time = cand;
  v.reference_time = ref;
  v.observed = observations_before_timing();
  v.observed["timing"] = timing_stage_to_json(t, v.integrity.size(), ref.median, cand.median);
  if (const auto d = judge_timing(t, protocol, v.integrity)) {
    v.verdict = d->verdict;
    v.message = d->message;
  } else {
    v.speedup = ref.median / cand.median;
    v.verdict = VerdictClass::kCorrect;
    v.message = correct_message(v.tests.size(), v.speedup);
  }
  return v;
}

// A GPU timing phase of 20 us a call whose one kernel a vendor library
// launched: a library_kernels violation under strict, correct under
// strict-libraries.
TimingObservation library_timing() {
  TimingObservation t;
  t.cpu = false;
  t.headline_seconds = 20e-6;
  t.floor_seconds = 2e-6;
  t.reference_kernels_per_call = 1;
  ActivityObservation timed;
  timed.audit.kernels_per_call = 1;
  timed.audit.gpu_us_per_call = 18;
  timed.audit.libraries = {"cublas"};
  t.activity = {timed};
  return t;
}

// A GPU time within the trusted timer's resolution carries no speedup, and
// judging the stored verdict again does not make one from its times.
TEST(JudgeTest, ATimeWithinTheTimersResolutionStaysWithoutASpeedupWhenJudgedAgain) {
  const TimingObservation t = library_timing();
  Verdict v = stored_after_timing(t, protocol_by_name("strict"));
  ASSERT_EQ(v.verdict, VerdictClass::kIntegrityViolation);
  const Rejudged measured = rejudge(v.to_json(), protocol_by_name("strict-libraries"));
  ASSERT_TRUE(measured.speedup.has_value()) << "a time above the resolution keeps its speedup";
  v.timing_check["below_resolution"] = "within twice the trusted timer's resolution";
  const Rejudged r = rejudge(v.to_json(), protocol_by_name("strict-libraries"));
  EXPECT_EQ(r.verdict, VerdictClass::kCorrect) << r.message;
  EXPECT_FALSE(r.speedup.has_value());
  EXPECT_FALSE(r.verdict_json["timing"].contains("speedup"));
}

// The speed-of-light floor allows for the trusted timer's resolution: an
// honest kernel of a few microseconds, timed at 0 (its window within the
// floors), is not below a floor smaller than twice the resolution; a time
// of 0 against a floor well above it still is, also when judged again.
TEST(JudgeTest, TheSpeedOfLightFloorAllowsForTheTimersResolution) {
  TimingObservation t;
  t.cpu = false;
  t.headline_seconds = 0;
  t.floor_seconds = 0.17e-6;
  t.floor_bound = "memory";
  t.resolution_seconds = 2.5e-6;
  std::vector<IntegrityFinding> integrity;
  EXPECT_FALSE(judge_timing(t, protocol_by_name("strict"), integrity).has_value());
  EXPECT_TRUE(integrity.empty()) << integrity.front().message;
  t.resolution_seconds = 0;  // unknown: the time is taken as it is
  EXPECT_TRUE(judge_timing(t, protocol_by_name("strict"), integrity).has_value());
  EXPECT_EQ(checks(integrity), (std::vector<std::string>{"below_speed_of_light"}));

  t.resolution_seconds = 2.5e-6;
  t.floor_seconds = 100e-6;
  integrity.clear();
  const auto d = judge_timing(t, protocol_by_name("strict"), integrity);
  ASSERT_TRUE(d);
  EXPECT_EQ(checks(integrity), (std::vector<std::string>{"below_speed_of_light"}));
  EXPECT_NE(d->message.find("at most 5.0"), std::string::npos) << d->message;
  const Verdict stored = stored_after_timing(t, protocol_by_name("strict"));
  const Rejudged again = rejudge(stored.to_json(), protocol_by_name("strict-libraries"));
  EXPECT_EQ(again.verdict, VerdictClass::kIntegrityViolation) << again.message;
  t.floor_seconds = 0.17e-6;
  t.headline_seconds = 1e-6;
  const Rejudged honest = rejudge(stored_after_timing(t, protocol_by_name("strict-libraries")).to_json(),
                                  protocol_by_name("strict"));
  EXPECT_NE(honest.verdict, VerdictClass::kIntegrityViolation) << honest.message;
}

// strict and strict-libraries measure the same: a stored verdict is judged
// again under the other from what its timing phase observed, both ways.
TEST(JudgeTest, AStoredVerdictIsJudgedAgainUnderAProtocolThatMeasuresTheSame) {
  TimingObservation t = library_timing();
  const Protocol strict = protocol_by_name("strict"), libraries = protocol_by_name("strict-libraries");

  const Verdict under_strict = stored_after_timing(t, strict);
  ASSERT_EQ(under_strict.verdict, VerdictClass::kIntegrityViolation);
  const Rejudged allowed = rejudge(under_strict.to_json(), libraries);
  EXPECT_EQ(allowed.verdict, VerdictClass::kCorrect) << allowed.message;
  ASSERT_TRUE(allowed.speedup.has_value());
  EXPECT_DOUBLE_EQ(*allowed.speedup, 3.0);
  EXPECT_EQ(allowed.message, "4 test calls passed; speedup 3x");
  EXPECT_EQ(allowed.verdict_json["verdict"], "correct");
  EXPECT_EQ(allowed.verdict_json["integrity"], json::array());
  EXPECT_EQ(allowed.verdict_json["timing"]["speedup"], 3.0);
  EXPECT_EQ(allowed.verdict_json["protocol"]["name"], "strict-libraries");
  EXPECT_EQ(allowed.verdict_json["rejudged_from"], "strict");
  // Judged again as what it was: the same verdict as the evaluation's.
  const Verdict under_libraries = stored_after_timing(t, libraries);
  EXPECT_EQ(allowed.message, under_libraries.message);
  const Rejudged back = rejudge(under_libraries.to_json(), strict);
  EXPECT_EQ(back.verdict, VerdictClass::kIntegrityViolation);
  EXPECT_EQ(back.message, under_strict.message);
  EXPECT_FALSE(back.speedup.has_value());
  EXPECT_FALSE(back.verdict_json["timing"].contains("speedup"));
  EXPECT_EQ(back.verdict_json["integrity"][0]["check"], "library_kernels");

  // Findings made before the timing phase stay first; the floor is a rule
  // of both, so a time below it stays a violation.
  t.headline_seconds = 0.5e-6;
  t.activity[0].audit.gpu_us_per_call = 0.4;
  const Verdict below = stored_after_timing(t, libraries, {{"input_mutation", "found by the tests"}});
  const Rejudged again = rejudge(below.to_json(), strict);
  EXPECT_EQ(again.verdict, VerdictClass::kIntegrityViolation);
  ASSERT_EQ(again.verdict_json["integrity"].size(), 3u) << again.verdict_json["integrity"].dump();
  EXPECT_EQ(again.verdict_json["integrity"][0]["check"], "input_mutation");
  EXPECT_EQ(again.verdict_json["integrity"][1]["check"], "below_speed_of_light");
  EXPECT_EQ(again.verdict_json["integrity"][2]["check"], "library_kernels");
}

TEST(JudgeTest, AVerdictDecidedBeforeTimingKeepsItsDecisionAndOneWithoutObservationsIsRefused) {
  Verdict v;
  v.protocol_name = "strict";
  v.protocol = protocol_by_name("strict").to_json();
  v.verdict = VerdictClass::kIncorrect;
  v.message = "1 of 4 test calls failed";
  v.observed = observations_before_timing();
  const Rejudged same = rejudge(v.to_json(), protocol_by_name("strict-libraries"));
  EXPECT_EQ(same.verdict, VerdictClass::kIncorrect);
  EXPECT_EQ(same.message, v.message);
  EXPECT_EQ(same.verdict_json["protocol"]["name"], "strict-libraries");

  v.observed = nullptr;  // a verdict from before kloop kept observations
  try {
    rejudge(v.to_json(), protocol_by_name("strict-libraries"));
    FAIL() << "judged without observations";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("keeps no observations"), std::string::npos) << e.what();
  }
  json damaged = stored_after_timing(TimingObservation{}, protocol_by_name("strict")).to_json();
  damaged["observed"]["timing"]["seen"].erase("activity");
  EXPECT_THROW(rejudge(damaged, protocol_by_name("strict-libraries")), std::invalid_argument);
}

// The audit's records come from the candidate's process: every verdict that
// has them says so, in its JSON and its text, whatever it found.
TEST(JudgeTest, AVerdictWithAnAuditSaysItsEvidenceIsTheCandidatesClaim) {
  Verdict v;
  v.verdict = VerdictClass::kCorrect;
  v.activity = {{"calls", 5}, {"kernels_per_call", 1.0}, {"gpu_us_per_call", 17.3}, {"evidence", kActivityEvidence}};
  const std::string text = v.to_text();
  EXPECT_NE(text.find("activity: 1 kernels per call"), std::string::npos) << text;
  EXPECT_NE(text.find("activity evidence: traced in the candidate's own process"), std::string::npos) << text;
  EXPECT_NE(v.to_json()["activity"].value("evidence", "").find("rests on this claim"), std::string::npos);
}

}  // namespace
}  // namespace kloop
