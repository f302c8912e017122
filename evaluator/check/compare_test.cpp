#include "evaluator/check/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace kloop {
namespace {

HostTensor floats(std::vector<int64_t> shape, std::vector<float> values) {
  HostTensor t;
  t.name = "output0";
  t.dtype = DType::kFloat32;
  t.shape = std::move(shape);
  t.bytes.resize(values.size() * 4);
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

TEST(CompareTest, AllcloseSemanticsAtTheBoundary) {
  // |a - e| <= atol + rtol * |e|: with atol = rtol = 1e-3 and e = 1, 0.002 is the limit.
  HostTensor e = floats({3}, {1.0f, 0.0f, -2.0f});
  Tolerance tol{1e-3, 1e-3};
  EXPECT_TRUE(compare_tensors(e, floats({3}, {1.0019f, 0.0009f, -2.0029f}), tol).passed);
  auto c = compare_tensors(e, floats({3}, {1.0021f, 0.0f, -2.0f}), tol);
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.mismatches, 1);
}

TEST(CompareTest, SlightlyOffPassesLooseFailsTight) {
  std::vector<float> exp, act;
  for (int i = 0; i < 100; ++i) {
    exp.push_back(0.5f + i * 0.01f);
    act.push_back(exp.back() * 1.005f);
  }
  EXPECT_TRUE(compare_tensors(floats({100}, exp), floats({100}, act), {1e-2, 1e-2}).passed);
  EXPECT_FALSE(compare_tensors(floats({100}, exp), floats({100}, act), {1e-3, 1e-3}).passed);
}

TEST(CompareTest, ReportsWorstErrorsAndFirstMismatchIndices) {
  HostTensor e = floats({2, 3}, {0, 1, 2, 3, 4, 5});
  HostTensor a = floats({2, 3}, {0, 1, 2.5f, 3, 4, 9});
  auto c = compare_tensors(e, a, {1e-3, 1e-3});
  EXPECT_EQ(c.mismatches, 2);
  EXPECT_NEAR(c.max_abs_error, 4.0, 1e-6);
  EXPECT_NEAR(c.max_rel_error, 0.8, 1e-6);
  ASSERT_EQ(c.first_mismatches.size(), 2u);
  EXPECT_EQ(c.first_mismatches[0].index, (std::vector<int64_t>{0, 2}));
  EXPECT_DOUBLE_EQ(c.first_mismatches[0].expected, 2.0);
  EXPECT_DOUBLE_EQ(c.first_mismatches[0].actual, 2.5);
  EXPECT_EQ(c.first_mismatches[1].index, (std::vector<int64_t>{1, 2}));
}

TEST(CompareTest, ShapeAndDtypeMismatchesAreExplained) {
  auto c = compare_tensors(floats({2, 3}, {0, 1, 2, 3, 4, 5}), floats({3, 2}, {0, 1, 2, 3, 4, 5}), {});
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.problem, "shape mismatch: expected [2, 3], got [3, 2]");
  HostTensor d = floats({1}, {1});
  d.dtype = DType::kInt32;
  EXPECT_NE(compare_tensors(floats({1}, {1}), d, {}).problem.find("dtype mismatch: expected float32, got int32"),
            std::string::npos);
}

TEST(CompareTest, NanAndInfHandling) {
  float nan = std::nanf("");
  float inf = INFINITY;
  EXPECT_TRUE(compare_tensors(floats({2}, {nan, inf}), floats({2}, {nan, inf}), {}).passed);
  auto c = compare_tensors(floats({2}, {1, 2}), floats({2}, {nan, inf}), {});
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.non_finite, 2);
  EXPECT_FALSE(compare_tensors(floats({1}, {inf}), floats({1}, {-inf}), {}).passed);
}

TEST(CompareTest, ZerosPassOnlyWhenExpectedIsTiny) {
  // The degenerate-task hazard: an all-zero answer passes when every
  // expected value is below atol.
  EXPECT_TRUE(compare_tensors(floats({2}, {4e-6f, 3e-6f}), floats({2}, {0, 0}), {1e-3, 1e-3}).passed);
  EXPECT_FALSE(compare_tensors(floats({2}, {0.5f, 0.2f}), floats({2}, {0, 0}), {1e-3, 1e-3}).passed);
}

TEST(CompareTest, IdenticalIsBitwise) {
  EXPECT_TRUE(tensors_identical(floats({2}, {1, 2}), floats({2}, {1, 2})));
  EXPECT_FALSE(tensors_identical(floats({2}, {1, 2}), floats({2}, {1, 2.0000002f})));
  EXPECT_FALSE(tensors_identical(floats({2}, {1, 2}), floats({1, 2}, {1, 2})));
}

TEST(CompareTest, UnravelIndex) {
  EXPECT_EQ(unravel_index(7, {2, 3, 4}), (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(unravel_index(23, {2, 3, 4}), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(unravel_index(0, {}), (std::vector<int64_t>{}));
}

}  // namespace
}  // namespace kloop
