// The judge on synthetic observations, no worker or device: each verdict
// class it decides (correct, incorrect, integrity_violation) and each
// integrity check it raises, under a protocol that checks integrity and one
// that does not.
#include "evaluator/judge.h"

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
  EXPECT_NE(d->message.find("2 of 3 test calls failed; first: case 1 (x3): output0 differs in 3 of 16"),
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

TEST(JudgeTest, AliasingMutationAndStaleOutputsAreFindings) {
  CallObservation o = observed(passing("output0"), 1);
  o.aliases = {{0, 1}};
  o.judged->mutated_inputs = std::vector<std::size_t>{0};
  o.judged->same_as_previous_call = true;
  o.judged->expected_same_as_previous_call = false;
  const CallJudgement j = judge_call(o, protocol_by_name("strict"), kInputs, "cpu");
  EXPECT_TRUE(j.outcome.passed) << "the outputs themselves were right";
  EXPECT_EQ(checks(j.findings), (std::vector<std::string>{"output_aliases_input", "input_mutation", "stale_output"}));
  EXPECT_NE(j.findings[0].message.find("input 1 (y)"), std::string::npos) << j.findings[0].message;
  EXPECT_NE(j.findings[1].message.find("input 0 (x) on case 1 (x3)"), std::string::npos) << j.findings[1].message;

  const auto strict = judge_tests({j.outcome}, j.findings, protocol_by_name("strict"));
  ASSERT_TRUE(strict);
  EXPECT_EQ(strict->verdict, VerdictClass::kIntegrityViolation);
  EXPECT_EQ(strict->message.rfind("output_aliases_input: ", 0), 0u) << strict->message;
  EXPECT_FALSE(judge_tests({j.outcome}, j.findings, protocol_by_name("kernelbench")).has_value())
      << "kernelbench records findings but does not judge by them";

  // The same output for the same inputs is no cache.
  o.aliases.clear();
  o.judged->mutated_inputs = std::vector<std::size_t>{};
  o.judged->expected_same_as_previous_call = true;
  EXPECT_TRUE(judge_call(o, protocol_by_name("strict"), kInputs, "cpu").findings.empty());
}

TEST(JudgeTest, AnHonestTimingPhaseDecidesNothing) {
  TimingObservation t;
  std::vector<IntegrityFinding> integrity;
  EXPECT_FALSE(judge_timing(t, protocol_by_name("strict"), integrity).has_value());
  t.cpu = false;
  t.headline_seconds = t.event_median = 1e-3;
  t.wall_median = 1.1e-3;
  t.floor_seconds = 0.5e-3;
  t.floor_bound = "memory";
  EXPECT_FALSE(judge_timing(t, protocol_by_name("strict"), integrity).has_value());
  EXPECT_TRUE(integrity.empty());
}

TEST(JudgeTest, ImplausibleTimesAreAViolationUnderEveryProtocol) {
  for (const char* name : {"kernelbench", "strict"}) {
    TimingObservation t;
    t.implausible = "claimed 1 s where 3 s passed";
    std::vector<IntegrityFinding> integrity;
    const auto d = judge_timing(t, protocol_by_name(name), integrity);
    ASSERT_TRUE(d) << name;
    EXPECT_EQ(d->verdict, VerdictClass::kIntegrityViolation);
    EXPECT_EQ(d->message, "implausible_timing: claimed 1 s where 3 s passed");
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
  t.headline_seconds = t.event_median = 1e-6;
  t.wall_median = 900e-6;  // the device was busy far longer than the events say
  t.floor_seconds = 100e-6;
  t.floor_bound = "memory";
  t.activity = {{"side_stream_work", "1 kernel(s) on a stream other than the current one"}};
  t.persisting_l2_limit = 1 << 20;
  std::vector<IntegrityFinding> integrity;
  const auto d = judge_timing(t, protocol_by_name("strict"), integrity);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->verdict, VerdictClass::kIntegrityViolation);
  EXPECT_EQ(checks(integrity), (std::vector<std::string>{"below_speed_of_light", "unaccounted_work", "side_stream_work",
                                                         "persisting_l2"}));
  EXPECT_EQ(d->message.rfind("below_speed_of_light: the candidate took 1.0", 0), 0u) << d->message;

  // verified has no speed-of-light floor; kernelbench judges none of it.
  integrity.clear();
  EXPECT_TRUE(judge_timing(t, protocol_by_name("verified"), integrity).has_value());
  EXPECT_EQ(integrity.front().check, "unaccounted_work");
  integrity.clear();
  EXPECT_FALSE(judge_timing(t, protocol_by_name("kernelbench"), integrity).has_value());
  EXPECT_EQ(integrity.size(), 3u);

  // The CPU has none of the device's checks.
  t.cpu = true;
  integrity.clear();
  EXPECT_FALSE(judge_timing(t, protocol_by_name("strict"), integrity).has_value());
  EXPECT_TRUE(integrity.empty());
}

}  // namespace
}  // namespace kloop
