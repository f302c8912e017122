// The evaluator in-process: a crashing candidate leaves the driver intact
// and the next evaluation works; the human-readable verdict says what failed.
#include "evaluator/evaluate.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "evaluator/problem/registry.h"

namespace kloop {
namespace {

class EvaluatorTest : public ::testing::Test {
 protected:
  EvaluatorTest() : builder_(BuilderConfig::from_environment()) {
    options_.worker_path = KLOOP_TEST_WORKER;
    options_.max_timing_seconds = 0.05;
    options_.threads = 2;
    options_.run_timeout = std::chrono::seconds(30);
  }
  ProblemSpec relu() { return ProblemRegistry(ProblemRegistry::default_root()).load("19_ReLU"); }
  static std::string fixture(const std::string& name) { return std::string(KLOOP_TEST_FIXTURES) + "/relu/" + name; }

  Builder builder_;
  EvalOptions options_;
};

// The worker's clock slowed tenfold from inside the candidate's process
// (its GOT entry for steady_clock::now rewritten) after the test calls:
// the timer is the reference's process, so the candidate's time stays what
// the same loop takes without the attack (a tenth of it would be the
// forgery), and nothing is amiss to find. At a size where a call takes
// milliseconds, one thread each, the two runs side by side.
TEST_F(EvaluatorTest, AClockSlowedInTheCandidatesProcessForgesNothing) {
  ProblemSpec spec = relu();
  spec.dims["batch_size"] = 512;  // as --set-dim batch_size=512: calls of milliseconds
  if (spec.cpu_dims) (*spec.cpu_dims)["batch_size"] = 512;
  options_.threads = 1;
  options_.max_timing_seconds = 0.3;
  Evaluator ev(builder_, options_);
  const Verdict forged = ev.evaluate(spec, std::string(KLOOP_TEST_FIXTURES) + "/attacks/attack_slow_clock.cpp");
  const Verdict honest = ev.evaluate(spec, fixture("correct.cpp"));
  ASSERT_EQ(forged.verdict, VerdictClass::kCorrect) << forged.message;
  ASSERT_EQ(honest.verdict, VerdictClass::kCorrect) << honest.message;
  ASSERT_TRUE(forged.candidate_time && honest.candidate_time);
  EXPECT_GT(forged.candidate_time->median, 0.3 * honest.candidate_time->median)
      << "forged " << forged.candidate_time->median << " s, honest " << honest.candidate_time->median << " s";
  EXPECT_GE(forged.timing_check.value("checked_calls", 0), 2) << forged.timing_check.dump();
  EXPECT_EQ(forged.timing_check.value("source", ""), "trusted timer (the reference's process)");
}

// Every forward after the tests gets inputs drawn for it alone, on the CPU
// as on a GPU: a candidate that aborts on any input it has seen before
// (standing for every cache of outputs) survives the warm-up, the timed
// calls, their checks and the check after timing.
TEST_F(EvaluatorTest, NoForwardAfterTheTestsSeesAnInputTwice) {
  options_.max_timing_seconds = 0.2;
  Evaluator ev(builder_, options_);
  const Verdict v = ev.evaluate(relu(), std::string(KLOOP_TEST_FIXTURES) + "/relu/refuses_repeats.cpp");
  EXPECT_EQ(v.verdict, VerdictClass::kCorrect) << v.to_text();
  EXPECT_GE(v.timing_check.value("checked_calls", 0), 2) << v.timing_check.dump();
  ASSERT_TRUE(v.candidate_time);
  EXPECT_GT(v.candidate_time->n, 10);
  EXPECT_GT(v.phases.timed_checks, 0) << "the checks' cost is reported";
}

TEST_F(EvaluatorTest, CrashThenNextEvaluationWorks) {
  Evaluator ev(builder_, options_);
  Verdict crash = ev.evaluate(relu(), fixture("segfault.cpp"));
  EXPECT_EQ(crash.verdict, VerdictClass::kRuntimeError);
  EXPECT_NE(crash.message.find("during forward, case 0 call 0"), std::string::npos) << crash.message;
  EXPECT_NE(crash.to_text().find("candidate process output"), std::string::npos);
  Verdict ok = ev.evaluate(relu(), fixture("correct.cpp"));
  EXPECT_EQ(ok.verdict, VerdictClass::kCorrect) << ok.to_text();
  ASSERT_TRUE(ok.speedup.has_value());
  EXPECT_GT(ok.phases.total, 0);
  EXPECT_EQ(ok.exchange, "file");  // CPU: the candidate publishes files, the reference worker judges
}

// Inputs published by the reference (files here; CUDA IPC on the GPU)
// instead of drawn again by the candidate: the same verdicts, and the checks
// that look at inputs (mutation) and at calls (caching) still see them.
TEST_F(EvaluatorTest, InputsPublishedByTheReferenceGiveTheSameVerdicts) {
  options_.input_transport = "file";
  options_.max_timing_seconds = 0.02;
  Evaluator ev(builder_, options_);
  Verdict ok = ev.evaluate(relu(), fixture("correct.cpp"));
  EXPECT_EQ(ok.verdict, VerdictClass::kCorrect) << ok.to_text();
  EXPECT_EQ(ok.input_exchange, "file");
  Verdict mutates = ev.evaluate(relu(), fixture("mutates_input.cpp"));
  EXPECT_EQ(mutates.verdict, VerdictClass::kIntegrityViolation) << mutates.to_text();
  EXPECT_NE(mutates.message.find("input_mutation"), std::string::npos) << mutates.message;
  Verdict caches = ev.evaluate(relu(), fixture("caches_result.cpp"));
  EXPECT_EQ(caches.verdict, VerdictClass::kIntegrityViolation) << caches.to_text();
  EXPECT_NE(caches.message.find("stale_output"), std::string::npos) << caches.message;
  options_.input_transport = "pigeon";
  EXPECT_THROW(Evaluator(builder_, options_).evaluate(relu(), fixture("correct.cpp")), EvaluationError);
}

// CUDA IPC asked for where it cannot work (CPU tensors): the reference's
// inputs fall back to being drawn by the candidate, the candidate's outputs
// to files, the verdict says why, and nothing else changes.
TEST_F(EvaluatorTest, RefusedCudaIpcFallsBackAndSaysWhy) {
  options_.input_transport = "cuda_ipc";
  options_.output_transport = "cuda_ipc";
  options_.max_timing_seconds = 0.02;
  Evaluator ev(builder_, options_);
  Verdict ok = ev.evaluate(relu(), fixture("correct.cpp"));
  EXPECT_EQ(ok.verdict, VerdictClass::kCorrect) << ok.to_text();
  EXPECT_EQ(ok.input_exchange.rfind("drawn (cuda_ipc failed: ", 0), 0u) << ok.input_exchange;
  EXPECT_EQ(ok.exchange.rfind("file (cuda_ipc failed: ", 0), 0u) << ok.exchange;
  EXPECT_NE(ok.exchange.find("CUDA tensors only"), std::string::npos) << ok.exchange;
  Verdict off = ev.evaluate(relu(), fixture("slightly_off.cpp"));
  EXPECT_EQ(off.verdict, VerdictClass::kIncorrect) << off.to_text();
}

// --fp64-reference: a bf16 matmul passes kernelbench's tolerance at cpu
// dims, but against an fp64 run of the reference it is orders of magnitude
// further from exact than the fp32 reference is.
TEST_F(EvaluatorTest, Fp64ReferenceMeasuresHowFarCandidateAndReferenceAreFromExact) {
  options_.protocol = "kernelbench";
  options_.measure_time = false;
  options_.fp64_reference = true;
  Evaluator ev(builder_, options_);
  Verdict v = ev.evaluate(ProblemRegistry(ProblemRegistry::default_root()).load("1_Square_matrix_multiplication_"),
                          std::string(KLOOP_TEST_FIXTURES) + "/../../examples/cpu/1_Square_matrix_multiplication_bf16.cpp");
  ASSERT_TRUE(v.error_analysis.is_array()) << v.to_text();
  ASSERT_EQ(v.error_analysis.size(), 1u) << v.error_analysis.dump();
  const auto& e = v.error_analysis[0];
  const double ref = e.at("reference_max_abs_error"), cand = e.at("candidate_max_abs_error");
  EXPECT_GT(ref, 0) << "fp32 and fp64 accumulate differently";
  EXPECT_LT(ref, 1e-3);
  EXPECT_GT(cand, 100 * ref) << e.dump();
  EXPECT_GT(e.at("max_abs_fp64").get<double>(), 1);
  EXPECT_TRUE(v.fp64_unavailable.empty()) << v.fp64_unavailable;
  EXPECT_NE(v.to_text().find("vs fp64 reference, output 0"), std::string::npos) << v.to_text();
}

TEST_F(EvaluatorTest, TextReportShowsMismatches) {
  options_.protocol = "verified";
  Evaluator ev(builder_, options_);
  Verdict v = ev.evaluate(relu(), fixture("slightly_off.cpp"));
  ASSERT_EQ(v.verdict, VerdictClass::kIncorrect);
  std::string text = v.to_text();
  EXPECT_EQ(text.rfind("19_ReLU [verified, cpu]: incorrect", 0), 0u) << text;
  EXPECT_NE(text.find("elements differ; max abs error"), std::string::npos) << text;
  EXPECT_NE(text.find("expected "), std::string::npos) << text;
}

TEST_F(EvaluatorTest, SameSeedSameVerdictDetails) {
  options_.measure_time = false;
  Evaluator ev(builder_, options_);
  Verdict a = ev.evaluate(relu(), fixture("slightly_off.cpp"));
  Verdict b = ev.evaluate(relu(), fixture("slightly_off.cpp"));
  ASSERT_EQ(a.tests.size(), b.tests.size());
  for (std::size_t i = 0; i < a.tests.size(); ++i) {
    ASSERT_EQ(a.tests[i].outputs.size(), b.tests[i].outputs.size());
    for (std::size_t j = 0; j < a.tests[i].outputs.size(); ++j) {
      EXPECT_EQ(a.tests[i].outputs[j].max_abs_error, b.tests[i].outputs[j].max_abs_error);
    }
  }
}

// Where an evaluation's time goes (issue 52's phases): its steps after the
// builds, in the order they run, add up to its total less the builds, and
// each one ran. An account, not a time: nothing here depends on how fast
// the machine is.
TEST_F(EvaluatorTest, AnEvaluationsStepsAccountForItsTotal) {
  Evaluator ev(builder_, options_);
  const Verdict v = ev.evaluate(relu(), fixture("correct.cpp"));
  ASSERT_EQ(v.verdict, VerdictClass::kCorrect) << v.message;
  const PhaseTimes& p = v.phases;
  for (double step : {p.plan, p.reference_start, p.baseline, p.candidate_start, p.tests, p.timing, p.end}) {
    EXPECT_GT(step, 0) << v.to_text();
  }
  const double steps = p.plan + p.reference_start + p.baseline + p.candidate_start + p.tests + p.timing + p.end;
  const double accounted = steps + p.build_candidate + p.build_reference;
  EXPECT_LE(accounted, p.total * 1.0001 + 1e-6) << v.to_text();
  EXPECT_GE(accounted, 0.8 * p.total) << v.to_text();
  EXPECT_NE(v.to_text().find("steps: builds"), std::string::npos) << v.to_text();
  EXPECT_TRUE(v.to_json()["phases"].contains("candidate_start")) << v.to_json().dump();
}

}  // namespace
}  // namespace kloop

namespace kloop {
namespace {

TEST(AuditTest, FlagsTinyOutputsAndLeavesHealthyTasksAlone) {
  Builder builder(BuilderConfig::from_environment());
  EvalOptions opts;
  opts.measure_time = false;
  opts.threads = 2;
  Evaluator ev(builder, opts);
  ProblemRegistry reg(ProblemRegistry::default_root());
  // Softmax over 4096 columns: every output is ~2.4e-4, so zeros pass at 1e-3.
  AuditReport softmax = ev.audit_reference(reg.load("23_Softmax"));
  ASSERT_TRUE(softmax.error.empty()) << softmax.error;
  // Every output is near 1/4096 whatever the input: zeros pass, and so does
  // any answer that ignores the input (the checks compare within tolerance).
  std::vector<std::string> checks;
  for (const auto& f : softmax.flags) checks.push_back(f.check);
  EXPECT_EQ(checks, (std::vector<std::string>{"zeros_pass", "seed_invariant", "input_independent"}));
  EXPECT_LT(softmax.max_abs_output, 1e-3);
  AuditReport relu = ev.audit_reference(reg.load("19_ReLU"));
  EXPECT_TRUE(relu.flags.empty()) << relu.flags[0].check;
  // BatchNorm has parameters, and its output depends on them.
  AuditReport bn = ev.audit_reference(reg.load("33_BatchNorm"));
  EXPECT_TRUE(bn.has_weights);
  EXPECT_TRUE(bn.flags.empty()) << bn.flags[0].check;
}

// Strict's zero-mean case is audited too: KL divergence takes the log of its
// inputs, so centered ones give NaN and the case would test nothing (its
// spec says centered_inputs: false, which leaves both the case and the
// flag out).
TEST(AuditTest, FlagsTasksWhoseZeroMeanCaseIsNotFinite) {
  Builder builder(BuilderConfig::from_environment());
  EvalOptions opts;
  opts.measure_time = false;
  opts.threads = 2;
  Evaluator ev(builder, opts);
  ProblemSpec kl = ProblemRegistry(ProblemRegistry::default_root()).load("98_KLDivLoss");
  ASSERT_FALSE(kl.centered_inputs);
  auto has = [](const AuditReport& r, const std::string& check) {
    return std::any_of(r.flags.begin(), r.flags.end(), [&](const AuditFlag& f) { return f.check == check; });
  };
  EXPECT_FALSE(has(ev.audit_reference(kl), "centered_not_finite"));
  kl.centered_inputs = true;
  const AuditReport r = ev.audit_reference(kl);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_TRUE(has(r, "centered_not_finite"));
}

}  // namespace
}  // namespace kloop
