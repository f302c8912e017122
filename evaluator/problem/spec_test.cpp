#include "evaluator/problem/spec.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace kloop {
namespace {

namespace fs = std::filesystem;

const char* kValid = R"(name: 7_Task
level: 1
description: a test task
dims: {batch_size: 64, dim: 128, classes: 10}
cpu: {batch_size: 4}
args:
  - {name: dim, type: int, value: dim}
  - {name: eps, type: float, value: 0.00001}
  - {name: shape, type: ints, value: [dim, "dim * 2"]}
inputs:
  - {name: x, shape: [batch_size, dim], dtype: float32, dist: randn}
  - name: t
    shape: [batch_size]
    dtype: int64
    dist: {kind: randint, low: 0, high: classes}
outputs: 1
flops: "2 * batch_size * dim"
bytes: "4 * batch_size * dim + 8 * batch_size"
variants:
  - {name: odd, dims: {batch_size: 63}, cpu: {batch_size: 3, dim: 7}}
weights:
  fc.weight: {dist: normal, mean: 0, std: 0.02}
deviations: [none]
)";

class SpecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kloop-spec-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& yaml, bool with_cpp = true) {
    fs::path p = dir_ / (name + ".yaml");
    std::ofstream(p) << yaml;
    if (with_cpp) std::ofstream(dir_ / (name + ".cpp")) << "// reference\n";
    return p.string();
  }

  // Loads a spec expected to fail and returns the message.
  std::string error_of(const std::string& yaml, const std::string& name = "7_Task") {
    std::string path = write(name, yaml);
    try {
      load_problem_spec(path, "test");
    } catch (const SpecError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << "message must name the file: " << e.what();
      return e.what();
    }
    ADD_FAILURE() << "expected a SpecError";
    return "";
  }

  static std::string replace(std::string s, const std::string& from, const std::string& to) {
    auto pos = s.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    return s.replace(pos, from.size(), to);
  }

  fs::path dir_;
};

TEST_F(SpecTest, ParsesAValidSpec) {
  ProblemSpec s = load_problem_spec(write("7_Task", kValid), "test");
  EXPECT_EQ(s.name, "7_Task");
  EXPECT_EQ(s.level, 1);
  ASSERT_EQ(s.inputs.size(), 2u);
  EXPECT_EQ(s.inputs[1].dtype, DType::kInt64);
  EXPECT_EQ(s.inputs[1].dist.kind, "randint");
  EXPECT_EQ(s.weights.at("fc.weight").kind, "normal");

  DimValues cpu = s.resolve_dims(true);
  EXPECT_EQ(cpu.at("batch_size"), 4);
  EXPECT_EQ(cpu.at("dim"), 128);  // not overridden
  DimValues odd_cpu = s.resolve_dims(true, &s.variants[0]);
  EXPECT_EQ(odd_cpu.at("batch_size"), 3);
  EXPECT_EQ(odd_cpu.at("dim"), 7);
  EXPECT_EQ(s.resolve_dims(false, &s.variants[0]).at("batch_size"), 63);

  auto args = s.resolve_args(s.resolve_dims(false));
  ASSERT_EQ(args.size(), 3u);
  EXPECT_EQ(args[0].int_value, 128);
  EXPECT_DOUBLE_EQ(args[1].float_value, 1e-5);
  EXPECT_EQ(args[2].ints, (std::vector<long long>{128, 256}));
  EXPECT_EQ(s.resolve_shape(s.inputs[0], cpu), (std::vector<long long>{4, 128}));
  EXPECT_DOUBLE_EQ(s.flop_count(s.resolve_dims(false)), 2.0 * 64 * 128);
}

TEST_F(SpecTest, UnknownDtypeNamesFieldLineAndChoices) {
  std::string msg = error_of(replace(kValid, "dtype: float32", "dtype: flaot32"));
  EXPECT_NE(msg.find("field 'inputs[0].dtype'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("flaot32"), std::string::npos) << msg;
  EXPECT_NE(msg.find("float32, float64"), std::string::npos) << msg;
  EXPECT_NE(msg.find(":11:"), std::string::npos) << "line number expected: " << msg;
}

TEST_F(SpecTest, MissingRequiredFieldsAreNamed) {
  EXPECT_NE(error_of(replace(kValid, "flops: \"2 * batch_size * dim\"\n", "")).find("field 'flops': missing"),
            std::string::npos);
  EXPECT_NE(error_of(replace(kValid, "level: 1\n", "")).find("field 'level': missing"), std::string::npos);
}

TEST_F(SpecTest, ExpressionErrorsNameTheDimsSet) {
  std::string msg = error_of(replace(kValid, "[batch_size, dim], dtype", "[batch_size, dims], dtype"));
  EXPECT_NE(msg.find("inputs[0].shape"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown dim 'dims'"), std::string::npos) << msg;
}

TEST_F(SpecTest, RejectsFloatDistributionsForIntegerInputs) {
  std::string msg = error_of(replace(kValid, "dist: {kind: randint, low: 0, high: classes}", "dist: randn"));
  EXPECT_NE(msg.find("inputs[1].dist"), std::string::npos) << msg;
  EXPECT_NE(msg.find("randint"), std::string::npos) << msg;
}

TEST_F(SpecTest, RejectsMissingDistributionParameters) {
  std::string msg = error_of(replace(kValid, "{kind: randint, low: 0, high: classes}", "{kind: randint, low: 0}"));
  EXPECT_NE(msg.find("inputs[1].dist.high"), std::string::npos) << msg;
}

// Upstream's structured inputs: a structure over the last two dimensions,
// and sign labels (+-1, p optional).
TEST_F(SpecTest, StructuredAndSignDistributions) {
  const std::string structured =
      replace(replace(kValid, "{name: x, shape: [batch_size, dim], dtype: float32, dist: randn}",
                      "{name: x, shape: [batch_size, dim], dtype: float32, dist: {kind: rand, structure: "
                      "upper_triangular}}"),
              "dist: {kind: randint, low: 0, high: classes}", "dist: {kind: sign, p: 0.3}");
  const ProblemSpec s = load_problem_spec(write("7_Task", replace(structured, "dtype: int64", "dtype: float32")), "test");
  EXPECT_EQ(s.inputs[0].dist.kind, "rand");
  EXPECT_EQ(s.inputs[0].dist.structure, "upper_triangular");
  EXPECT_EQ(s.inputs[1].dist.kind, "sign");
  EXPECT_EQ(s.inputs[1].dist.params.at("p"), "0.3");

  std::string msg = error_of(replace(kValid, "dist: randn}", "dist: {kind: randn, structure: diagonal}}"));
  EXPECT_NE(msg.find("inputs[0].dist.structure"), std::string::npos) << msg;
  EXPECT_NE(msg.find("symmetric, upper_triangular, lower_triangular"), std::string::npos) << msg;
  msg = error_of(replace(kValid, "dist: {kind: randint, low: 0, high: classes}",
                         "dist: {kind: randint, low: 0, high: classes, structure: symmetric}"));
  EXPECT_NE(msg.find("inputs[1].dist.structure"), std::string::npos) << msg;
  EXPECT_NE(msg.find("shape has 1"), std::string::npos) << msg;
}

TEST_F(SpecTest, RejectsUnknownFieldsAndVariantDims) {
  EXPECT_NE(error_of(std::string(kValid) + "tolerence: 1\n").find("field 'tolerence': unknown field"),
            std::string::npos);
  std::string msg = error_of(replace(kValid, "dims: {batch_size: 63}", "dims: {batch: 63}"));
  EXPECT_NE(msg.find("variants[0].dims.batch"), std::string::npos) << msg;
}

// centered_inputs: true by default; false leaves strict's zero-mean case
// out; anything else names the field and the values it takes.
TEST_F(SpecTest, CenteredInputsIsABoolean) {
  EXPECT_TRUE(load_problem_spec(write("7_Task", kValid), "test").centered_inputs);
  EXPECT_FALSE(load_problem_spec(write("7_Task", std::string(kValid) + "centered_inputs: false\n"), "test").centered_inputs);
  const std::string msg = error_of(std::string(kValid) + "centered_inputs: sometimes\n");
  EXPECT_NE(msg.find("field 'centered_inputs': expected true or false, got 'sometimes'"), std::string::npos) << msg;
}

// upstream_init_draws: shapes of dims, randn or rand; anything else is
// named with the fix.
TEST_F(SpecTest, UpstreamInitDrawsAreShapesOfDims) {
  const ProblemSpec s = load_problem_spec(
      write("7_Task", std::string(kValid) + "upstream_init_draws:\n  - {shape: [batch_size, dim], dist: randn}\n"),
      "test");
  ASSERT_EQ(s.upstream_init_draws.size(), 1u);
  EXPECT_EQ(s.upstream_init_draws[0].dist, "randn");
  EXPECT_EQ(s.upstream_init_draws[0].shape, (std::vector<std::string>{"batch_size", "dim"}));
  std::string msg = error_of(std::string(kValid) + "upstream_init_draws:\n  - {shape: [batch_size], dist: zeros}\n");
  EXPECT_NE(msg.find("upstream_init_draws[0].dist': expected randn or rand"), std::string::npos) << msg;
  msg = error_of(std::string(kValid) + "upstream_init_draws:\n  - {shape: [nope], dist: rand}\n");
  EXPECT_NE(msg.find("upstream_init_draws[0].shape"), std::string::npos) << msg;
}

TEST_F(SpecTest, NameMustMatchFileAndReferenceMustExist) {
  EXPECT_NE(error_of(kValid, "8_Other").find("must equal the file name"), std::string::npos);
  std::string path = write("9_NoRef", replace(kValid, "name: 7_Task", "name: 9_NoRef"), /*with_cpp=*/false);
  try {
    load_problem_spec(path, "test");
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("9_NoRef.cpp is missing"), std::string::npos) << e.what();
  }
}

TEST_F(SpecTest, NonPositiveDimsAndBadYamlAreRejected) {
  EXPECT_NE(error_of(replace(kValid, "dim: 128,", "dim: -1,")).find("non-negative integer"), std::string::npos);
  EXPECT_NE(error_of("name: [unclosed\n").find("not valid YAML"), std::string::npos);
}

// The audit's findings at fp16 and bf16 sit under `precisions:`, on top of
// fp32's; a decision there is looked up first at its precision; bad blocks
// name the field and the fix.
TEST_F(SpecTest, PerPrecisionAuditDecisionsAddToFp32s) {
  const std::string spec = std::string(kValid) +
                           "audit:\n"
                           "  - {flag: weight_independent, decision: accept, note: the loss ignores it}\n"
                           "  - {flag: zeros_pass, decision: fixed, note: inputs scaled up}\n"
                           "precisions:\n"
                           "  bf16:\n"
                           "    excluded_from: [verified, strict]\n"
                           "    audit:\n"
                           "      - {flag: zeros_pass, decision: exclude, note: outputs near 4e-3 pass at 1e-2}\n";
  const ProblemSpec s = load_problem_spec(write("7_Task", spec), "test");
  EXPECT_TRUE(s.excluded_from.empty());
  EXPECT_TRUE(s.excluded_from_at(DType::kFloat32).empty());
  EXPECT_TRUE(s.excluded_from_at(DType::kFloat16).empty());
  EXPECT_EQ(s.excluded_from_at(DType::kBFloat16), (std::vector<std::string>{"verified", "strict"}));
  ASSERT_NE(s.audit_decision("zeros_pass", DType::kBFloat16), nullptr);
  EXPECT_EQ(s.audit_decision("zeros_pass", DType::kBFloat16)->decision, "exclude");
  EXPECT_EQ(s.audit_decision("zeros_pass", DType::kFloat16)->decision, "fixed");  // fp32's
  EXPECT_EQ(s.audit_decision("weight_independent", DType::kBFloat16)->decision, "accept");
  EXPECT_EQ(s.audit_decision("seed_invariant", DType::kBFloat16), nullptr);
  ASSERT_EQ(s.audit_at(DType::kBFloat16).size(), 2u);  // bf16's zeros_pass, fp32's weight_independent
  EXPECT_EQ(s.audit_at(DType::kBFloat16)[0].decision, "exclude");
  EXPECT_EQ(s.audit_at(DType::kFloat32).size(), 2u);

  std::string msg = error_of(std::string(kValid) +
                             "precisions:\n  fp16:\n    audit:\n      - {flag: zeros_pass, decision: exclude, note: x}\n");
  EXPECT_NE(msg.find("precisions.fp16.audit[0].decision"), std::string::npos) << msg;
  EXPECT_NE(msg.find("precisions.fp16.excluded_from: [verified, strict]"), std::string::npos) << msg;
  // fp32's exclusion is enough for an exclude at any precision.
  EXPECT_NO_THROW(load_problem_spec(
      write("7_Task", std::string(kValid) + "excluded_from: [verified, strict]\nprecisions:\n  fp16:\n    audit:\n"
                                            "      - {flag: zeros_pass, decision: exclude, note: x}\n"),
      "test"));
  msg = error_of(std::string(kValid) + "precisions:\n  fp32:\n    excluded_from: [strict]\n");
  EXPECT_NE(msg.find("precisions.fp32"), std::string::npos) << msg;
  EXPECT_NE(msg.find("top-level excluded_from and audit"), std::string::npos) << msg;
  msg = error_of(std::string(kValid) + "precisions:\n  half:\n    excluded_from: [strict]\n");
  EXPECT_NE(msg.find("unknown precision 'half'; expected fp16 or bf16"), std::string::npos) << msg;
  msg = error_of(std::string(kValid) + "precisions:\n  bf16:\n    exclude: [strict]\n");
  EXPECT_NE(msg.find("precisions.bf16.exclude"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected excluded_from or audit"), std::string::npos) << msg;
}

TEST_F(SpecTest, CpuRunWithoutCpuDimsIsAnError) {
  std::string no_cpu = replace(kValid, "cpu: {batch_size: 4}\n", "");
  EXPECT_NE(error_of(no_cpu).find("field 'cpu': missing; variant 'odd' has cpu dims"), std::string::npos);
  ProblemSpec s = load_problem_spec(write("7_Task", replace(no_cpu, ", cpu: {batch_size: 3, dim: 7}", "")), "test");
  EXPECT_THROW(s.resolve_dims(true), SpecError);
}

TEST_F(SpecTest, AuditDecisionsParseAndExclusionNeedsTheProtocols) {
  const std::string decided = std::string(kValid) +
                              "excluded_from: [verified, strict]\n"
                              "audit:\n"
                              "  - {flag: constant_output, decision: exclude, note: softmax over one element}\n";
  ProblemSpec s = load_problem_spec(write("7_Task", decided), "test");
  ASSERT_EQ(s.audit.size(), 1u);
  EXPECT_EQ(s.audit[0].flag, "constant_output");
  EXPECT_EQ(s.audit[0].decision, "exclude");
  EXPECT_EQ(s.audit[0].note, "softmax over one element");

  std::string msg = error_of(std::string(kValid) + "audit:\n  - {flag: constant_output, decision: exclude, note: x}\n");
  EXPECT_NE(msg.find("audit[0].decision"), std::string::npos) << msg;
  EXPECT_NE(msg.find("excluded_from"), std::string::npos) << msg;
  msg = error_of(std::string(kValid) + "audit:\n  - {flag: zero_pass, decision: accept, note: x}\n");
  EXPECT_NE(msg.find("unknown flag 'zero_pass'"), std::string::npos) << msg;
  msg = error_of(std::string(kValid) + "audit:\n  - {flag: zeros_pass, decision: ignore, note: x}\n");
  EXPECT_NE(msg.find("expected exclude, fixed or accept"), std::string::npos) << msg;
  msg = error_of(std::string(kValid) + "audit:\n  - {flag: zeros_pass, decision: accept}\n");
  EXPECT_NE(msg.find("audit[0].note"), std::string::npos) << msg;
}

}  // namespace
}  // namespace kloop
