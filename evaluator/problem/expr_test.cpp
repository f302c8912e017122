#include "evaluator/problem/expr.h"

#include <gtest/gtest.h>

namespace kloop {
namespace {

TEST(ExprTest, EvaluatesArithmeticWithDims) {
  DimValues d = {{"N", 4096}, {"k", 3}, {"h", 32}};
  EXPECT_DOUBLE_EQ(eval_expr("2 * N * N * N", d), 2.0 * 4096.0 * 4096.0 * 4096.0);
  EXPECT_DOUBLE_EQ(eval_expr("(h - k) / 1 + 1", d), 30);
  EXPECT_DOUBLE_EQ(eval_expr("2^10", d), 1024);
  EXPECT_DOUBLE_EQ(eval_expr("2**3**2", d), 512);  // right-associative
  EXPECT_DOUBLE_EQ(eval_expr("-k + 10 % 4", d), -1);
  EXPECT_DOUBLE_EQ(eval_expr("floor((h + 2*1 - 1*(k-1) - 1)/2) + 1", d), 16);
  EXPECT_DOUBLE_EQ(eval_expr("max(k, h) * min(2, 3) + sqrt(16)", d), 68);
}

TEST(ExprTest, IntegerResultsAreChecked) {
  DimValues d = {{"N", 10}};
  EXPECT_EQ(eval_int_expr("N / 2", d), 5);
  EXPECT_THROW(eval_int_expr("N / 4", d), std::invalid_argument);
}

TEST(ExprTest, ErrorsNameTheProblem) {
  DimValues d = {{"batch_size", 1}};
  try {
    eval_expr("batch * 2", d);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown dim 'batch'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("batch_size"), std::string::npos) << e.what();
  }
  EXPECT_THROW(eval_expr("(1 + 2", d), std::invalid_argument);
  EXPECT_THROW(eval_expr("1 / 0", d), std::invalid_argument);
  EXPECT_THROW(eval_expr("foo(1)", d), std::invalid_argument);
  EXPECT_THROW(eval_expr("1 2", d), std::invalid_argument);
}

}  // namespace
}  // namespace kloop
