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
  EXPECT_EQ(failure_kind(Outcome::kIncorrect, "", &plain), "wrong_values");

  const json scaled = verdict_with({test_case("seed 1, inputs x1", true), test_case("seed 8, inputs x-1", false)});
  EXPECT_EQ(failure_kind(Outcome::kIncorrect, "", &scaled), "input_scaling");

  const json hidden =
      verdict_with({test_case("seed 1, inputs x1", true), test_case("seed 9, inputs x1, shape variant 'odd'", false),
                    test_case("seed 10, inputs x-1, shape variant 'odd'", false)});
  EXPECT_EQ(failure_kind(Outcome::kIncorrect, "", &hidden), "hidden_shape");

  const json shape = verdict_with(
      {test_case("seed 1, inputs x1", false, {{"problem", "shape mismatch: expected [16, 4096], got [16, 4095]"}})});
  EXPECT_EQ(failure_kind(Outcome::kIncorrect, "", &shape), "shape");

  const json nan = verdict_with({test_case("seed 1, inputs x1", false, {{"non_finite", 3}})});
  EXPECT_EQ(failure_kind(Outcome::kIncorrect, "", &nan), "non_finite");

  json count = verdict_with({test_case("seed 1, inputs x1", false)});
  count["tests"][0]["problem"] = "forward returned 1 output(s), expected 2";
  EXPECT_EQ(failure_kind(Outcome::kIncorrect, "", &count), "output_count");
}

// Verdicts since the test calls carry their case (scaling, variant,
// centered) and problem_kind: the kind comes from those, whatever the texts
// say, and precision, degenerate outputs and the zero-mean case have kinds
// of their own.
json structured(const std::string& scaling, const std::string& variant, bool passed, json output = json::object()) {
  output["passed"] = passed;
  return {{"label", "(not read)"}, {"scaling", scaling},  {"variant", variant},
          {"centered", scaling == "centered"}, {"passed", passed}, {"outputs", json::array({output})}};
}

TEST(FailureKindTest, IncorrectKindsFromTheTestCallsCaseAndProblemKind) {
  const json plain = verdict_with({structured("x1", "", false), structured("x3", "", false)});
  EXPECT_EQ(failure_kind(Outcome::kIncorrect, "", &plain), "wrong_values");
  const json scaled = verdict_with({structured("x1", "", true), structured("x0.01", "", false)});
  EXPECT_EQ(failure_kind(Outcome::kIncorrect, "", &scaled), "input_scaling");
  const json centered = verdict_with({structured("x1", "", true), structured("x-1", "", true),
                                      structured("centered", "", false)});
  EXPECT_EQ(failure_kind(Outcome::kIncorrect, "", &centered), "centered_inputs");
  const json hidden = verdict_with({structured("x1", "", true), structured("x-1", "odd", false)});
  EXPECT_EQ(failure_kind(Outcome::kIncorrect, "", &hidden), "hidden_shape");

  const json broadcast = verdict_with(
      {structured("x1", "", false, {{"problem", "(any text)"}, {"problem_kind", "broadcast_output"}})});
  EXPECT_EQ(failure_kind(Outcome::kIncorrect, "", &broadcast), "broadcast_output");
  const json constant = verdict_with({structured("x3", "", false, {{"problem_kind", "constant_output"}})});
  EXPECT_EQ(failure_kind(Outcome::kIncorrect, "", &constant), "constant_output");

  json precision = verdict_with({structured("x1", "", false), structured("x3", "", true)});
  precision["tests"][0]["outputs"][0]["passed"] = true;
  precision["tests"][0]["problem"] = "output 0: precision: its RMS error against an fp64 reference is ...";
  precision["tests"][0]["problem_kind"] = "precision";
  EXPECT_EQ(failure_kind(Outcome::kIncorrect, "", &precision), "precision");
  precision["tests"][0].erase("problem_kind");  // a verdict file from before the field
  EXPECT_EQ(failure_kind(Outcome::kIncorrect, "", &precision), "precision");

  json device = verdict_with({structured("x1", "", false)});
  device["tests"][0]["problem_kind"] = "device";
  EXPECT_EQ(failure_kind(Outcome::kIncorrect, "", &device), "output_count");
}

TEST(FailureKindTest, IncorrectKindFromTheMessageWithoutAVerdictFile) {
  EXPECT_EQ(failure_kind(Outcome::kIncorrect,
                         "8 of 24 test calls failed; first: seed 9, inputs x1, shape variant 'odd': output0 differs",
                         nullptr),
            "hidden_shape");
  EXPECT_EQ(failure_kind(Outcome::kIncorrect, "2 of 16 test calls failed; first: seed 8, inputs x-1: output0 differs", nullptr),
            "input_scaling");
  EXPECT_EQ(failure_kind(Outcome::kIncorrect, "24 of 24 test calls failed; first: seed 1, inputs x1: output0 differs", nullptr),
            "wrong_values");
  EXPECT_EQ(failure_kind(Outcome::kIncorrect, "1 of 26 test calls failed; first: seed 7, inputs centered: output0 differs", nullptr),
            "centered_inputs");
  EXPECT_EQ(failure_kind(Outcome::kIncorrect,
                         "1 of 26 test calls failed; first: seed 1, inputs x1: output 0: precision: its RMS error ...",
                         nullptr),
            "precision");
  EXPECT_EQ(failure_kind(Outcome::kIncorrect, "something else", nullptr), "unclassified");
}

TEST(FailureKindTest, IntegrityViolationsByCheck) {
  const json v = {{"integrity", json::array({{{"check", "input_mutation"}, {"message", "..."}}})}};
  EXPECT_EQ(failure_kind(Outcome::kIntegrityViolation, "whatever", &v), "input_mutation");
  EXPECT_EQ(failure_kind(Outcome::kIntegrityViolation, "output_aliases_input: output 0 shares memory with input 0", nullptr),
            "output_aliases_input");
  EXPECT_EQ(failure_kind(Outcome::kIntegrityViolation, "Odd message: here", nullptr), "unclassified");
}

TEST(FailureKindTest, OtherVerdictsHaveNoKind) {
  EXPECT_EQ(failure_kind(Outcome::kCorrect, "", nullptr), "");
  EXPECT_EQ(failure_kind(Outcome::kCompileError, "candidate.cpp:9: error", nullptr), "");
  // The provider's outcomes are counted by their verdict's name, with no kind under it.
  EXPECT_EQ(failure_kind(Outcome::kRefused, "the provider refused: content_filter", nullptr), "");
  EXPECT_EQ(failure_kind(Outcome::kContextOverflow, "400 from openai (model m): the conversation does not fit", nullptr), "");
}

}  // namespace
}  // namespace kloop::report
