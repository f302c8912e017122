// KernelBench-format (Python) candidates (tests/fixtures/kernelbench): the
// Python host runs them in kloop-worker under the same sandbox and the same
// judge as compiled candidates. Correct answers in plain PyTorch and with a
// load_inline C++ extension, weights by state_dict name, a wrong answer, a
// raising forward, a syntax error, answers that alias their input or
// remember their first result, and one that tries to leave the sandbox.
// Needs Debian's python3-torch and python3-dev (scripts/setup); without them
// the tests skip, unless KLOOP_REQUIRE_PYTHON_TORCH=1 (CI), where they fail.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/python_support.h"
#include "evaluator/evaluate.h"
#include "evaluator/problem/registry.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;

class PythonCandidateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KLOOP_NEED_PYTHON_CANDIDATES();
  }

  Verdict eval(const std::string& problem, const std::string& fixture, Isolation isolation = Isolation::kStrict) {
    ProblemRegistry registry(KLOOP_TEST_PROBLEMS);
    Builder builder(BuilderConfig::from_environment());
    EvalOptions o;
    o.worker_path = KLOOP_TEST_WORKER;
    o.measure_time = false;
    o.threads = 2;
    o.isolation = isolation;
    Evaluator evaluator(builder, o);
    return evaluator.evaluate(registry.load(problem), std::string(KLOOP_TEST_FIXTURES) + "/kernelbench/" + fixture);
  }
};

TEST_F(PythonCandidateTest, PlainPytorchAnswersAreJudgedLikeCompiledOnes) {
  const Verdict v = eval("19_ReLU", "relu_correct.py");
  EXPECT_EQ(v.verdict, VerdictClass::kCorrect) << v.message;
  EXPECT_EQ(v.tests.size(), 26u) << "13 cases of 2 calls each";
  const Verdict wrong = eval("19_ReLU", "relu_wrong.py");
  EXPECT_EQ(wrong.verdict, VerdictClass::kIncorrect) << wrong.message;
  EXPECT_NE(wrong.message.find("max abs error 0.5"), std::string::npos) << wrong.message;
}

TEST_F(PythonCandidateTest, ConstructorArgumentsInOrderAndWeightsByStateDictName) {
  const Verdict v = eval("12_Gemm_Multiply_LeakyReLU", "gemm_multiply_leakyrelu_correct.py");
  EXPECT_EQ(v.verdict, VerdictClass::kCorrect) << v.message;
}

// KernelBench runs ModelNew as it is built, in training mode (its eval
// never calls .eval()), and so do kloop's references: batch norm on the
// batch's statistics. In eval mode this answer would be incorrect.
TEST_F(PythonCandidateTest, TheModelRunsInTrainingModeAsKernelBenchRunsIt) {
  const Verdict v = eval("33_BatchNorm", "batchnorm_correct.py");
  EXPECT_EQ(v.verdict, VerdictClass::kCorrect) << v.message;
}

TEST_F(PythonCandidateTest, LoadInlineExtensionsAreBuiltInTheCompileSandbox) {
  const Verdict v = eval("19_ReLU", "relu_load_inline.py");
  EXPECT_EQ(v.verdict, VerdictClass::kCorrect) << v.message << "\n" << v.build.log;
  EXPECT_NE(v.build.log.find("extensions built: kloop_fixture_relu"), std::string::npos) << v.build.log;
}

TEST_F(PythonCandidateTest, FailuresAreVerdictsWithTheirTraceback) {
  const Verdict raised = eval("19_ReLU", "relu_raises.py");
  EXPECT_EQ(raised.verdict, VerdictClass::kRuntimeError);
  EXPECT_NE(raised.message.find("this forward always fails"), std::string::npos) << raised.message;
  EXPECT_NE(raised.message.find("Traceback"), std::string::npos) << raised.message;
  const Verdict syntax = eval("19_ReLU", "relu_syntax_error.py");
  EXPECT_EQ(syntax.verdict, VerdictClass::kCompileError);
  EXPECT_NE(syntax.message.find("SyntaxError"), std::string::npos) << syntax.message;
  EXPECT_NE(syntax.message.find("line 6"), std::string::npos) << syntax.message;
}

TEST_F(PythonCandidateTest, StrictCatchesPythonHacks) {
  const Verdict alias = eval("19_ReLU", "relu_in_place.py");
  EXPECT_EQ(alias.verdict, VerdictClass::kIntegrityViolation) << alias.message;
  ASSERT_FALSE(alias.integrity.empty());
  EXPECT_EQ(alias.integrity.front().check, "output_aliases_input");
  const Verdict stale = eval("19_ReLU", "relu_remembers.py");
  EXPECT_EQ(stale.verdict, VerdictClass::kIntegrityViolation) << stale.message;
  ASSERT_FALSE(stale.integrity.empty());
  EXPECT_EQ(stale.integrity.front().check, "stale_output");
}

// The build imports the candidate, so its code runs at build time too: as
// root under weak isolation it must not keep uid 0 there.
TEST_F(PythonCandidateTest, TheSandboxHoldsForPythonUnderBothLevels) {
  const fs::path target = fs::path(BuilderConfig::from_environment().cache_dir) / "builds" / "kloop-python-escape";
  for (Isolation level : {Isolation::kStrict, Isolation::kWeak}) {
    fs::remove(target);
    const Verdict v = eval("19_ReLU", "relu_escapes.py", level);
    EXPECT_EQ(v.verdict, VerdictClass::kCorrect) << isolation_name(level) << ": the candidate got out: " << v.message;
    EXPECT_FALSE(fs::exists(target)) << isolation_name(level) << ": the build wrote into kloop's cache";
    fs::remove(target);
    // The next level builds again (isolation is not part of the cache key).
    fs::remove_all(fs::path(BuilderConfig::from_environment().cache_dir) / "builds" / v.build.key);
  }
}

}  // namespace
}  // namespace kloop
