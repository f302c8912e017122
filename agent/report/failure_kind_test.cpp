// Failure kinds from verdict.json tests and, without one, from the message.
#include "agent/report/failure_kind.h"

#include <gtest/gtest.h>

namespace kloop::report {
namespace {

using json = nlohmann::json;

json test_case(const std::string& label, bool passed, json output = json::object()) {
  output["passed"] = passed;
  return {{"label", label}, {"passed", passed}, {"outputs", json::array({output})}};
}

json verdict_with(std::vector<json> tests) { return {{"verdict", "incorrect"}, {"tests", tests}}; }

TEST(FailureKindTest, IncorrectKindsFromTheFailingTests) {
  const json plain = verdict_with({test_case("seed 1, inputs x1", false), test_case("seed 6, inputs x3", false)});
  EXPECT_EQ(failure_kind("incorrect", "", &plain), "wrong_values");

  const json scaled = verdict_with({test_case("seed 1, inputs x1", true), test_case("seed 8, inputs x-1", false)});
  EXPECT_EQ(failure_kind("incorrect", "", &scaled), "input_scaling");

  const json hidden =
      verdict_with({test_case("seed 1, inputs x1", true), test_case("seed 9, inputs x1, shape variant 'odd'", false),
                    test_case("seed 10, inputs x-1, shape variant 'odd'", false)});
  EXPECT_EQ(failure_kind("incorrect", "", &hidden), "hidden_shape");

  const json shape = verdict_with(
      {test_case("seed 1, inputs x1", false, {{"problem", "shape mismatch: expected [16, 4096], got [16, 4095]"}})});
  EXPECT_EQ(failure_kind("incorrect", "", &shape), "shape");

  const json nan = verdict_with({test_case("seed 1, inputs x1", false, {{"non_finite", 3}})});
  EXPECT_EQ(failure_kind("incorrect", "", &nan), "non_finite");

  json count = verdict_with({test_case("seed 1, inputs x1", false)});
  count["tests"][0]["problem"] = "forward returned 1 output(s), expected 2";
  EXPECT_EQ(failure_kind("incorrect", "", &count), "output_count");
}

TEST(FailureKindTest, IncorrectKindFromTheMessageWithoutAVerdictFile) {
  EXPECT_EQ(failure_kind("incorrect",
                         "8 of 24 test calls failed; first: seed 9, inputs x1, shape variant 'odd': output0 differs",
                         nullptr),
            "hidden_shape");
  EXPECT_EQ(failure_kind("incorrect", "2 of 16 test calls failed; first: seed 8, inputs x-1: output0 differs", nullptr),
            "input_scaling");
  EXPECT_EQ(failure_kind("incorrect", "24 of 24 test calls failed; first: seed 1, inputs x1: output0 differs", nullptr),
            "wrong_values");
  EXPECT_EQ(failure_kind("incorrect", "something else", nullptr), "unclassified");
}

TEST(FailureKindTest, IntegrityViolationsByCheck) {
  const json v = {{"integrity", json::array({{{"check", "input_mutation"}, {"message", "..."}}})}};
  EXPECT_EQ(failure_kind("integrity_violation", "whatever", &v), "input_mutation");
  EXPECT_EQ(failure_kind("integrity_violation", "output_aliases_input: output 0 shares memory with input 0", nullptr),
            "output_aliases_input");
  EXPECT_EQ(failure_kind("integrity_violation", "Odd message: here", nullptr), "unclassified");
}

TEST(FailureKindTest, OtherVerdictsHaveNoKind) {
  EXPECT_EQ(failure_kind("correct", "", nullptr), "");
  EXPECT_EQ(failure_kind("compile_error", "candidate.cpp:9: error", nullptr), "");
  // The provider's outcomes are counted by their verdict's name, with no kind under it.
  EXPECT_EQ(failure_kind("refused", "the provider refused: content_filter", nullptr), "");
  EXPECT_EQ(failure_kind("context_overflow", "400 from openai (model m): the conversation does not fit", nullptr), "");
}

}  // namespace
}  // namespace kloop::report
