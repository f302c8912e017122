// The candidate ABI's adaptation of user classes: any arity, tensor / tuple
// / vector returns, constructor arguments and weights by name.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <kloop/kernel_api.h>

#include <map>

namespace {

class FakeInit : public kloop::ModuleInit {
 public:
  std::map<std::string, at::Tensor> params;
  std::map<std::string, int64_t> ints;
  bool has_param(const std::string& n) const override { return params.count(n) > 0; }
  at::Tensor param(const std::string& n) const override { return params.at(n); }
  std::vector<std::string> param_names() const override { return {}; }
  bool has_arg(const std::string& n) const override { return ints.count(n) > 0; }
  int64_t arg_int(const std::string& n) const override { return ints.at(n); }
  double arg_float(const std::string&) const override { return 0; }
  bool arg_bool(const std::string&) const override { return false; }
  std::vector<int64_t> arg_ints(const std::string&) const override { return {}; }
  std::string arg_string(const std::string&) const override { return ""; }
  std::string device() const override { return "cpu"; }
};

struct Unary {
  at::Tensor forward(const at::Tensor& x) { return x + 1; }
};
struct Ternary {
  explicit Ternary(const kloop::ModuleInit& init) : w(init.param("fc.weight")), k(init.arg_int("k")) {}
  at::Tensor forward(at::Tensor a, const at::Tensor& b, const at::Tensor& c) const { return a * b + c + w * k; }
  at::Tensor w;
  int64_t k;
};
struct TupleOut {
  std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& x) { return {x, x * 2}; }
};
struct VectorOut {
  std::vector<at::Tensor> forward(const at::Tensor& x, const at::Tensor& y) { return {x, y, x + y}; }
};

TEST(KernelApiTest, UnaryForwardAndDefaultConstructor) {
  FakeInit init;
  kloop::detail::Adapter<Unary> m(init);
  EXPECT_EQ(kloop::detail::Adapter<Unary>::Signature::kArity, 1u);
  auto out = m.forward({at::zeros({2})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].equal(at::ones({2})));
}

TEST(KernelApiTest, ThreeInputsWithWeightsAndArgs) {
  FakeInit init;
  init.params["fc.weight"] = at::full({2}, 0.5);
  init.ints["k"] = 4;
  kloop::detail::Adapter<Ternary> m(init);
  EXPECT_EQ(kloop::detail::Adapter<Ternary>::Signature::kArity, 3u);
  auto out = m.forward({at::full({2}, 2.0), at::full({2}, 3.0), at::full({2}, 1.0)});
  EXPECT_TRUE(out[0].equal(at::full({2}, 9.0)));  // 2*3 + 1 + 0.5*4
}

TEST(KernelApiTest, TupleAndVectorOutputsAreFlattened) {
  FakeInit init;
  kloop::detail::Adapter<TupleOut> t(init);
  EXPECT_EQ(t.forward({at::ones({1})}).size(), 2u);
  kloop::detail::Adapter<VectorOut> v(init);
  auto out = v.forward({at::ones({1}), at::ones({1})});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[2].equal(at::full({1}, 2.0)));
}

TEST(KernelApiTest, WrongInputCountIsAnErrorNotACrash) {
  FakeInit init;
  kloop::detail::Adapter<Unary> m(init);
  try {
    m.forward({at::ones({1}), at::ones({1})});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("forward takes 1 tensor(s) but the problem passes 2"), std::string::npos);
  }
}

TEST(KernelApiTest, MissingWeightPropagatesFromInit) {
  FakeInit init;
  init.ints["k"] = 1;
  EXPECT_THROW(kloop::detail::Adapter<Ternary>{init}, std::out_of_range);
}

}  // namespace
