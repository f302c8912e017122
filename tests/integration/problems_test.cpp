// Every shipped problem: the spec parses, the reference builds and runs at
// its cpu dims, returns the declared number of finite outputs, and the same
// seed gives bitwise-identical outputs.
#include <gtest/gtest.h>

#include "evaluator/evaluate.h"
#include "evaluator/problem/registry.h"

namespace kloop {
namespace {

std::vector<std::string> all_problems() {
  std::vector<std::string> names;
  for (const auto& e : ProblemRegistry(ProblemRegistry::default_root()).list()) {
    names.push_back(e.suite + "/level" + std::to_string(e.level) + "/" + e.name);
  }
  return names;
}

class ReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceTest, RunsAtCpuDims) {
  ProblemRegistry reg(ProblemRegistry::default_root());
  ProblemSpec spec = reg.load(GetParam());
  // Level 3 networks are expensive to vary; the level-3 issue asks for one.
  const std::size_t min_variants = spec.level >= 3 ? 1 : 2;
  EXPECT_GE(spec.variants.size(), min_variants) << "too few hidden shape variants";
  for (const auto& v : spec.variants) EXPECT_TRUE(v.cpu.has_value()) << v.name << " needs cpu dims";
  ASSERT_TRUE(spec.cpu_dims.has_value());
  EXPECT_GT(spec.flop_count(spec.resolve_dims(false)), 0);
  EXPECT_GT(spec.byte_count(spec.resolve_dims(false)), 0);

  Builder builder(BuilderConfig::from_environment());
  EvalOptions opts;
  opts.worker_path = KLOOP_TEST_WORKER;
  opts.measure_time = false;
  opts.threads = 2;
  Evaluator ev(builder, opts);
  ReferenceReport r = ev.check_reference(spec);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.outputs, spec.outputs);
  EXPECT_TRUE(r.finite);
  EXPECT_TRUE(r.deterministic);
  EXPECT_EQ(r.variants_checked, static_cast<int>(spec.variants.size())) << "every variant runs at its cpu dims";
}

INSTANTIATE_TEST_SUITE_P(Shipped, ReferenceTest, ::testing::ValuesIn(all_problems()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           // "kernelbench/level2/1_Conv2D_ReLU_BiasAdd" -> "level2_1_Conv2D_ReLU_BiasAdd"
                           std::string n = info.param.substr(info.param.find('/') + 1);
                           for (char& c : n) {
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace kloop
