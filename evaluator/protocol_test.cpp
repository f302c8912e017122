#include "evaluator/protocol.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace kloop {
namespace {

ProblemSpec two_variant_spec() {
  ProblemSpec s;
  s.name = "t";
  s.dims = {{"n", 100}};
  s.cpu_dims = DimValues{{"n", 10}};
  s.variants = {{"odd", {{"n", 97}}, DimValues{{"n", 7}}}, {"gpu_only", {{"n", 4096}}, std::nullopt}};
  return s;
}

TEST(ProtocolTest, Tolerances) {
  EXPECT_DOUBLE_EQ(protocol_by_name("kernelbench").tolerance.atol, 1e-2);
  EXPECT_DOUBLE_EQ(protocol_by_name("verified").tolerance.rtol, 1e-3);
  EXPECT_DOUBLE_EQ(protocol_by_name("strict").tolerance.atol, 1e-3);
  EXPECT_THROW(protocol_by_name("lenient"), std::invalid_argument);
  EXPECT_EQ(protocol_by_name("kernelbench").cpu_timing.statistic, "mean");
  EXPECT_EQ(protocol_by_name("kernelbench").cpu_timing.max_samples, 100);
}

// KernelBench's eval builds ModelNew once and calls it on each of its five
// trials' inputs (run_and_check_correctness): one case, five calls.
TEST(ProtocolTest, KernelbenchPlanIsOneInstanceCalledOnFiveTrialsAtFixedShape) {
  for (const char* name : {"kernelbench", "kernelbench-v0.2"}) {
    const Protocol p = protocol_by_name(name);
    auto plan = plan_tests(two_variant_spec(), p, true, 42);
    ASSERT_EQ(plan.size(), 1u) << name;
    EXPECT_EQ(plan[0].seed, 42u) << name;
    EXPECT_DOUBLE_EQ(plan[0].scale, 1.0);
    EXPECT_EQ(plan[0].dims.at("n"), 10);
    EXPECT_EQ(p.calls_per_case, 5) << name;
  }
}

TEST(ProtocolTest, VerifiedAddsScaledDistributions) {
  auto plan = plan_tests(two_variant_spec(), protocol_by_name("verified"), false, 1);
  ASSERT_EQ(plan.size(), 8u);
  EXPECT_DOUBLE_EQ(plan[5].scale, 3.0);
  EXPECT_DOUBLE_EQ(plan[6].scale, 0.01);
  EXPECT_DOUBLE_EQ(plan[7].scale, -1.0);
  EXPECT_EQ(plan[7].dims.at("n"), 100);
}

TEST(ProtocolTest, StrictAddsHiddenShapesWhereTheyHaveCpuDims) {
  auto cpu = plan_tests(two_variant_spec(), protocol_by_name("strict"), true, 1);
  ASSERT_EQ(cpu.size(), 10u);  // 8 + odd x1 + odd x-1; gpu_only has no cpu dims
  EXPECT_EQ(cpu[8].variant, "odd");
  EXPECT_EQ(cpu[8].dims.at("n"), 7);
  EXPECT_DOUBLE_EQ(cpu[9].scale, -1.0);
  auto gpu = plan_tests(two_variant_spec(), protocol_by_name("strict"), false, 1);
  ASSERT_EQ(gpu.size(), 12u);
  EXPECT_EQ(gpu[10].dims.at("n"), 4096);
  EXPECT_EQ(gpu[11].label(), "seed 12, inputs x-1, shape variant 'gpu_only'");
}

// Strict's zero-mean case: after x-1, once per task with an input to
// shift, none where the spec says its inputs must not be centered.
TEST(ProtocolTest, StrictAddsACenteredCaseWhereAnInputCanBeShifted) {
  ProblemSpec spec = two_variant_spec();
  InputSpec x;
  x.name = "x";
  x.shape = {"n"};
  x.dist.kind = "rand";
  spec.inputs.push_back(x);
  auto plan = plan_tests(spec, protocol_by_name("strict"), true, 1);
  ASSERT_EQ(plan.size(), 11u);
  EXPECT_TRUE(plan[8].centered);
  EXPECT_EQ(plan[8].label(), "seed 9, inputs centered");
  EXPECT_EQ(plan[9].variant, "odd");
  EXPECT_EQ(plan_tests(spec, protocol_by_name("verified"), true, 1).size(), 8u) << "verified keeps upstream's four";
  spec.centered_inputs = false;
  EXPECT_EQ(plan_tests(spec, protocol_by_name("strict"), true, 1).size(), 10u);
  spec.centered_inputs = true;
  spec.inputs[0].dist.kind = "randn";  // already zero-mean
  EXPECT_EQ(plan_tests(spec, protocol_by_name("strict"), true, 1).size(), 10u);
}

TEST(ProtocolTest, CenteredDrawsHaveMeanZero) {
  using nlohmann::json;
  EXPECT_EQ(centered_draw({{"kind", "rand"}, {"params", json::object()}}),
            json({{"kind", "uniform"}, {"params", {{"low", -1.0}, {"high", 1.0}}}}));
  EXPECT_EQ(centered_draw({{"kind", "uniform"}, {"params", {{"low", 1.0}, {"high", 3.0}}}}),
            json({{"kind", "uniform"}, {"params", {{"low", -1.0}, {"high", 1.0}}}}));
  EXPECT_EQ(centered_draw({{"kind", "normal"}, {"params", {{"mean", 2.0}, {"std", 0.5}}}}),
            json({{"kind", "normal"}, {"params", {{"mean", 0.0}, {"std", 0.5}}}}));
  const json constant = {{"kind", "uniform"}, {"params", {{"low", 3.14}, {"high", 3.14}}}};
  EXPECT_EQ(centered_draw(constant), constant) << "a constant input stays what it is";
  const json ints = {{"kind", "randint"}, {"params", {{"low", 0.0}, {"high", 10.0}}}};
  EXPECT_EQ(centered_draw(ints), ints);
}

// The precision bound: 16x the fp32 reference's error, or 64 fp32 units of
// the output's RMS, whichever is larger; only strict checks it.
TEST(ProtocolTest, PrecisionBoundIsRelativeToTheReferenceWithAnFp32Floor) {
  EXPECT_TRUE(protocol_by_name("strict").precision_check);
  EXPECT_FALSE(protocol_by_name("verified").precision_check);
  EXPECT_FALSE(protocol_by_name("kernelbench").precision_check);
  const double unit = 1.0 / (1 << 24);
  // An output of RMS 32 whose fp32 reference errs by 1e-5 RMS: bound 1.6e-4.
  EXPECT_EQ(precision_failure(1.5e-4, 1e-5, 32), "");
  const std::string why = precision_failure(1.5e-3, 1e-5, 32);
  EXPECT_NE(why.find("precision:"), std::string::npos) << why;
  EXPECT_NE(why.find("150x the fp32 reference's"), std::string::npos) << why;
  // An exact reference (error 0, as ReLU's): the floor, 64 units of the RMS.
  EXPECT_EQ(precision_failure(60 * unit, 0, 1), "");
  EXPECT_NE(precision_failure(70 * unit, 0, 1).find("where the fp32 reference's is 0"), std::string::npos);
  EXPECT_EQ(precision_failure(0, 0, 0), "");
  // A NaN is the comparison's to judge, not this check's.
  EXPECT_EQ(precision_failure(NAN, 1e-5, 1), "");
}

// KernelBench's two evals, each named for its version: the original
// (v0.1, still reachable as `kernelbench`) and the current one (v0.2: 1e-4
// in fp32, 1e-2 in fp16/bf16, L2 flushed before each trial).
TEST(ProtocolTest, KernelBenchVersionsAndTheirAlias) {
  const Protocol original = protocol_by_name("kernelbench"), current = protocol_by_name("kernelbench-v0.2");
  EXPECT_EQ(original.name, "kernelbench-v0.1");
  EXPECT_EQ(canonical_protocol_name("kernelbench"), "kernelbench-v0.1");
  EXPECT_EQ(canonical_protocol_name("strict"), "strict");
  EXPECT_EQ(protocol_by_name("kernelbench-v0.1").to_json(), original.to_json());
  EXPECT_DOUBLE_EQ(original.tolerance.atol, 1e-2);
  EXPECT_FALSE(original.gpu_timing.l2_flush);
  EXPECT_DOUBLE_EQ(current.tolerance.atol, 1e-4);
  EXPECT_DOUBLE_EQ(current.tolerance.rtol, 1e-4);
  EXPECT_TRUE(current.gpu_timing.l2_flush);
  EXPECT_EQ(current.gpu_timing.statistic, "mean");
  EXPECT_EQ(current.gpu_timing.max_samples, 100);
  EXPECT_EQ(current.seeds, 1);
  EXPECT_EQ(current.calls_per_case, 5);
  EXPECT_FALSE(same_measurements(original, current));
  // Per precision, as KernelBench's get_tolerance_for_precision sets it.
  EXPECT_DOUBLE_EQ(at_precision(current, Precision::kFp32).tolerance.atol, 1e-4);
  EXPECT_DOUBLE_EQ(at_precision(current, Precision::kFp16).tolerance.atol, 1e-2);
  EXPECT_DOUBLE_EQ(at_precision(current, Precision::kBf16).tolerance.rtol, 1e-2);
  EXPECT_DOUBLE_EQ(at_precision(original, Precision::kBf16).tolerance.atol, 1e-2);
  // kloop's protocols keep theirs in fp32 and take KernelBench's 1e-2 below it.
  EXPECT_DOUBLE_EQ(at_precision(protocol_by_name("strict"), Precision::kFp32).tolerance.atol, 1e-3);
  const Protocol strict16 = at_precision(protocol_by_name("strict"), Precision::kFp16);
  EXPECT_DOUBLE_EQ(strict16.tolerance.atol, 1e-2);
  EXPECT_DOUBLE_EQ(strict16.tolerance.magnitude, protocol_by_name("strict").tolerance.magnitude);
  EXPECT_EQ(strict16.to_json()["precision"], "fp16");
  EXPECT_FALSE(same_measurements(protocol_by_name("strict"), strict16));
  for (const auto& name : protocol_names()) EXPECT_NO_THROW(protocol_by_name(name)) << name;
  EXPECT_NE(protocol_choices().find("kernelbench-v0.2"), std::string::npos);
}

TEST(ProtocolTest, PrecisionsTurnFloatingPointInputsOnly) {
  EXPECT_EQ(parse_precision("bf16"), Precision::kBf16);
  EXPECT_EQ(parse_precision("float16"), Precision::kFp16);
  EXPECT_EQ(parse_precision("fp8"), std::nullopt);
  ProblemSpec s = two_variant_spec();
  s.inputs.push_back({"x", {"n"}, DType::kFloat32, {}});
  s.inputs.push_back({"labels", {"n"}, DType::kInt64, {}});
  const ProblemSpec half = spec_at_precision(s, Precision::kBf16);
  EXPECT_EQ(half.precision, DType::kBFloat16);
  EXPECT_EQ(half.inputs[0].dtype, DType::kBFloat16);
  EXPECT_EQ(half.inputs[1].dtype, DType::kInt64);  // integer inputs stay integer
  EXPECT_EQ(spec_at_precision(half, Precision::kBf16).inputs[0].dtype, DType::kBFloat16);  // idempotent
  EXPECT_EQ(spec_at_precision(s, Precision::kFp32).inputs[0].dtype, DType::kFloat32);
  // The precision check's floor at fp16 is one fp16 unit of the output's RMS
  // (fp32's is 64 fp32 units): bf16 arithmetic inside an fp16 run exceeds it.
  const double fp16_unit = 1.0 / (1 << 11);
  EXPECT_EQ(precision_failure(0.5 * fp16_unit, 0, 1, Precision::kFp16), "");
  const std::string why = precision_failure(2.3 * fp16_unit, 0, 1, Precision::kFp16);
  EXPECT_NE(why.find("where the fp16 reference's is 0"), std::string::npos) << why;
  EXPECT_NE(why.find("is not fp16"), std::string::npos) << why;
}

// A task degenerate only at a reduced precision (zeros pass at bf16's 1e-2)
// is left out of verified and strict runs at that precision alone; fp32's
// exclusions hold at every precision.
TEST(ProtocolTest, ExclusionsFollowTheRunsPrecision) {
  ProblemSpec s = two_variant_spec();
  s.precisions[DType::kBFloat16].excluded_from = {"verified", "strict"};
  for (const char* p : {"strict", "verified", "strict-libraries"}) {
    EXPECT_TRUE(excluded_by_protocol(s, p, Precision::kBf16)) << p;
    EXPECT_FALSE(excluded_by_protocol(s, p, Precision::kFp16)) << p;
    EXPECT_FALSE(excluded_by_protocol(s, p, Precision::kFp32)) << p;
  }
  EXPECT_FALSE(excluded_by_protocol(s, "kernelbench-v0.2", Precision::kBf16));  // keeps every task, as upstream
  s.excluded_from = {"verified", "strict"};
  EXPECT_TRUE(excluded_by_protocol(s, "strict", Precision::kFp16));
  EXPECT_TRUE(excluded_by_protocol(s, "verified", Precision::kFp32));
}

// strict-libraries is strict with vendor library kernels allowed: the same
// tests, timing and excluded tasks, so only the judging differs.
TEST(ProtocolTest, StrictLibrariesMeasuresWhatStrictDoes) {
  const Protocol strict = protocol_by_name("strict"), libraries = protocol_by_name("strict-libraries");
  EXPECT_FALSE(libraries.require_custom_kernels);
  EXPECT_TRUE(libraries.speed_of_light_floor);
  EXPECT_TRUE(same_measurements(strict, libraries));
  EXPECT_TRUE(same_measurements(libraries, strict));
  EXPECT_FALSE(same_measurements(strict, protocol_by_name("verified")));
  EXPECT_FALSE(same_measurements(protocol_by_name("kernelbench"), protocol_by_name("verified")));
  const ProblemSpec s = two_variant_spec();
  EXPECT_EQ(plan_tests(s, libraries, true, 7).size(), plan_tests(s, strict, true, 7).size());
  ProblemSpec degenerate = s;
  degenerate.excluded_from = {"verified", "strict"};
  EXPECT_TRUE(excluded_by_protocol(degenerate, "strict-libraries", Precision::kFp32));
  EXPECT_FALSE(excluded_by_protocol(degenerate, "kernelbench", Precision::kFp32));
  try {
    protocol_by_name("lenient");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("strict-libraries"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kloop
