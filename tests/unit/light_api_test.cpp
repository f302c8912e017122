// The light kernel API end to end in one process: a module built against
// <kloop/light_api.h> by kloop's Builder, loaded and driven through the
// worker's adapter (evaluator/isolation/light_module.cpp). Its views,
// allocations, weights and arguments come back as ATen tensors equal to
// ATen's own.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <map>

#include "evaluator/build/builder.h"
#include "evaluator/isolation/light_module.h"

namespace {

class FakeInit : public kloop::ModuleInit {
 public:
  std::map<std::string, at::Tensor> params;
  bool has_param(const std::string& n) const override { return params.count(n) > 0; }
  at::Tensor param(const std::string& n) const override {
    if (!params.count(n)) throw std::out_of_range("kloop: no weight named '" + n + "'");
    return params.at(n);
  }
  std::vector<std::string> param_names() const override { return {"fc.weight", "fc.bias"}; }
  bool has_arg(const std::string& n) const override { return n == "k"; }
  int64_t arg_int(const std::string& n) const override {
    if (n != "k") throw std::invalid_argument("kloop: no argument '" + n + "'");
    return 7;
  }
  double arg_float(const std::string&) const override { return 0.25; }
  bool arg_bool(const std::string&) const override { return true; }
  std::vector<int64_t> arg_ints(const std::string&) const override { return {3, 5}; }
  std::string arg_string(const std::string&) const override { return "reflect"; }
  std::string device() const override { return "cpu"; }
};

class LightApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    kloop::BuilderConfig config = kloop::BuilderConfig::from_environment();
    config.cache_dir = KLOOP_TEST_CACHE;
    kloop::Builder builder(config);
    kloop::BuildResult b = builder.build(std::string(KLOOP_TEST_FIXTURES) + "/light/views_module.cpp",
                                         kloop::ModuleRole::kCandidate, kloop::BuildTarget::kCpu);
    ASSERT_TRUE(b.ok) << b.log;
    handle_ = dlopen(b.library_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    auto version = reinterpret_cast<int (*)()>(dlsym(handle_, "kloop_candidate_api_version"));
    ASSERT_NE(version, nullptr);
    EXPECT_EQ(version(), KLOOP_LIGHT_API_VERSION);
    EXPECT_EQ(dlsym(handle_, "kloop_candidate_create"), nullptr) << "no version-1 entry point";
    entry_.create = reinterpret_cast<kloop_light_create_fn>(dlsym(handle_, "kloop_candidate_light_create"));
    entry_.forward = reinterpret_cast<kloop_light_forward_fn>(dlsym(handle_, "kloop_candidate_light_forward"));
    entry_.destroy = reinterpret_cast<kloop_light_destroy_fn>(dlsym(handle_, "kloop_candidate_light_destroy"));
    ASSERT_TRUE(entry_.create && entry_.forward && entry_.destroy);
  }

  static void* handle_;
  static kloop::LightEntryPoints entry_;
};
void* LightApiTest::handle_ = nullptr;
kloop::LightEntryPoints LightApiTest::entry_;

TEST_F(LightApiTest, ViewsAllocationsWeightsAndArgumentsMatchAten) {
  FakeInit init;
  init.params["fc.weight"] = at::arange(5, at::kFloat);
  auto module = kloop::make_light_module(entry_, init, "cpu", nullptr);
  const at::Tensor x = at::arange(12, at::kFloat).view({4, 3});
  const std::vector<at::Tensor> out = module->forward({x, at::ones({2})});
  ASSERT_EQ(out.size(), 11u);
  EXPECT_TRUE(out[0].equal(x.t()));
  EXPECT_EQ(out[0].strides(), x.t().strides()) << "t() is a view";
  EXPECT_TRUE(out[1].equal(x.narrow(1, 1, 2)));
  EXPECT_TRUE(out[2].equal(x.select(0, -1)));
  EXPECT_TRUE(out[3].equal(x.permute({1, 0})));
  EXPECT_TRUE(out[4].equal(x.view({-1})));
  EXPECT_TRUE(out[5].equal(x.reshape({2, -1})));
  EXPECT_TRUE(out[6].equal(x.t().contiguous()));
  EXPECT_TRUE(out[6].is_contiguous());
  EXPECT_NE(out[6].data_ptr(), x.data_ptr()) << "contiguous() of a transposed view copies";
  EXPECT_EQ(out[1].data_ptr(), static_cast<float*>(x.data_ptr()) + 1) << "views share the input's memory";
  EXPECT_TRUE(out[7].equal(at::zeros({2, 3}, at::kLong)));
  EXPECT_EQ(out[8].numel(), 0);
  EXPECT_TRUE(out[9].equal(init.params["fc.weight"]));
  EXPECT_TRUE(out[10].equal(at::tensor({7.0, 0.25, 1.0, 35.0, 1.0, 2.5}, at::kDouble)));
}

TEST_F(LightApiTest, ModuleErrorsComeBackAsExceptionsWithTheirText) {
  FakeInit init;
  init.params["fc.weight"] = at::ones({1});
  auto module = kloop::make_light_module(entry_, init, "cpu", nullptr);
  try {
    module->forward({at::ones({2, 2}), at::ones({2}, at::kDouble)});
    FAIL() << "a float64 y read as float must throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("data_ptr<T>() of a float64 tensor"), std::string::npos) << e.what();
  }
  try {
    module->forward({at::ones({2, 2})});
    FAIL() << "one tensor for a forward of two must throw";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("forward takes 2 tensor(s) but the problem passes 1"), std::string::npos);
  }
  FakeInit missing;  // no fc.weight: the constructor's exception, with kloop's text
  try {
    kloop::make_light_module(entry_, missing, "cpu", nullptr);
    FAIL() << "a missing weight must throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no weight named 'fc.weight'"), std::string::npos) << e.what();
  }
}

TEST(LightConversionTest, ForeignAndOutOfBoundsViewsAreRefused) {
  const at::Tensor base = at::zeros({4, 4});
  kloop_tensor t = kloop::light_from_aten(base);
  EXPECT_TRUE(kloop::light_to_aten(t).equal(base));
  kloop_tensor shifted = t;
  shifted.data = static_cast<float*>(t.data) + 1;  // one element on: 16 elements no longer fit
  EXPECT_THROW(kloop::light_to_aten(shifted), std::runtime_error);
  kloop_tensor negative = t;
  negative.strides[0] = -4;
  EXPECT_THROW(kloop::light_to_aten(negative), std::runtime_error);
  kloop_tensor retyped = t;
  retyped.dtype = 4;  // int64 over float memory
  EXPECT_THROW(kloop::light_to_aten(retyped), std::runtime_error);
  kloop_tensor foreign = t;
  foreign.owner = nullptr;
  EXPECT_THROW(kloop::light_to_aten(foreign), std::runtime_error);
  kloop_tensor misaligned = t;
  misaligned.data = static_cast<char*>(t.data) + 2;
  misaligned.sizes[0] = 1;
  EXPECT_THROW(kloop::light_to_aten(misaligned), std::runtime_error);
  kloop::light_release(t);
  EXPECT_THROW(kloop::light_from_aten(at::zeros(std::vector<int64_t>(9, 1))), std::runtime_error) << "9 dimensions";
  EXPECT_THROW(kloop::light_from_aten(at::zeros({2}, at::kComplexFloat)), std::runtime_error);
}

}  // namespace
