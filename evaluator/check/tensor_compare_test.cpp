// The worker's ATen comparison must agree, field by field, with the host
// comparison it replaced (compare.cpp), including NaN/Inf rules, relative
// errors, the first mismatches across chunk boundaries, and its messages.
#include "evaluator/check/tensor_compare.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "evaluator/isolation/tensor_bridge.h"
#include "evaluator/isolation/tensor_exchange.h"

namespace kloop {
namespace {

void expect_same(const TensorComparison& host, const TensorComparison& dev) {
  EXPECT_EQ(host.passed, dev.passed);
  EXPECT_EQ(host.problem, dev.problem);
  EXPECT_EQ(host.numel, dev.numel);
  EXPECT_EQ(host.mismatches, dev.mismatches);
  EXPECT_EQ(host.non_finite, dev.non_finite);
  EXPECT_DOUBLE_EQ(host.max_abs_error, dev.max_abs_error);
  EXPECT_DOUBLE_EQ(host.max_rel_error, dev.max_rel_error);
  EXPECT_DOUBLE_EQ(host.max_abs_expected, dev.max_abs_expected);
  EXPECT_NEAR(host.rms_expected, dev.rms_expected, 1e-12 * (1 + host.rms_expected));
  EXPECT_NEAR(host.atol_used, dev.atol_used, 1e-12 * (1 + host.atol_used));  // sums in another order
  ASSERT_EQ(host.first_mismatches.size(), dev.first_mismatches.size());
  for (std::size_t i = 0; i < host.first_mismatches.size(); ++i) {
    EXPECT_EQ(host.first_mismatches[i].index, dev.first_mismatches[i].index);
    const double he = host.first_mismatches[i].expected, de = dev.first_mismatches[i].expected;
    const double ha = host.first_mismatches[i].actual, da = dev.first_mismatches[i].actual;
    EXPECT_TRUE(he == de || (std::isnan(he) && std::isnan(de)));
    EXPECT_TRUE(ha == da || (std::isnan(ha) && std::isnan(da)));
  }
}

// A comparison that lists no mismatch (max_listed 0: the checks that only
// ask whether an output matches) is decided by the fused passes, failing
// or not: every figure but the listing is the listing comparison's.
void expect_same_unlisted(TensorComparison listed, const TensorComparison& unlisted) {
  listed.first_mismatches.clear();
  expect_same(listed, unlisted);
}

TensorComparison on_host(const at::Tensor& e, const at::Tensor& a, const Tolerance& tol) {
  HostTensor he = tensor_to_host(e, "output0"), ha = tensor_to_host(a, "output0");
  return compare_tensors(he, ha, tol);
}

TEST(TensorCompareTest, AgreesWithTheHostComparisonOnEveryRule) {
  at::manual_seed(7);
  at::Tensor e = at::randn({6, 9});
  at::Tensor a = e + 1e-5 * at::randn({6, 9});
  e[0][1] = 0.0;
  a[0][1] = 2e-3;  // beyond atol where expected is 0
  a[1][2] = e[1][2] * 1.01;
  e[2][3] = NAN;
  a[2][3] = NAN;  // NaN matches NaN
  a[2][4] = NAN;  // NaN where a value was expected: non-finite
  e[3][0] = INFINITY;
  a[3][0] = INFINITY;
  e[3][1] = INFINITY;
  a[3][1] = -INFINITY;
  a[5][8] = INFINITY;
  const Tolerance tol{1e-3, 1e-3};
  for (int64_t chunk : {int64_t{1} << 26, int64_t{7}, int64_t{1}}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    TensorComparison dev = compare_tensors(e, a, "output0", tol, 5, chunk);
    expect_same(on_host(e, a, tol), dev);
    EXPECT_FALSE(dev.passed);
    EXPECT_EQ(dev.mismatches, 5);
    EXPECT_EQ(dev.non_finite, 2);
    EXPECT_TRUE(std::isinf(dev.max_abs_error));
  }
  // Within tolerance everywhere: passes, with the same maximum errors.
  at::Tensor close = at::randn({1000});
  expect_same(on_host(close, close * (1 + 1e-6), tol), compare_tensors(close, close * (1 + 1e-6), "output0", tol));
  EXPECT_TRUE(compare_tensors(close, close * (1 + 1e-6), "output0", tol).passed);
}

// On the host, passing outputs are judged by fused loops (compare_passes.h),
// failing ones by ATen: both must give the host comparison's figures for
// every dtype, including halves' subnormals, NaN and infinities on both
// sides, and strict's constant-output rule.
TEST(TensorCompareTest, FusedHostPassesAgreeWithTheHostComparisonForEveryDtype) {
  at::manual_seed(11);
  Tolerance strict{1e-3, 1e-3};
  strict.magnitude = 1e-2;
  const Tolerance plain{1e-3, 1e-3};
  const at::Tensor e = at::randn({4099});
  at::Tensor nan_inf = e.clone();
  nan_inf[17] = NAN;
  nan_inf[99] = -INFINITY;
  const at::Tensor tiny = 3e-6 * at::rand({512});  // subnormal in half precision
  struct Pair {
    const char* what;
    at::Tensor expected, actual;
    bool passes;
  };
  const std::vector<Pair> pairs = {
      {"float", e, e + 1e-5 * at::randn({4099}), true},
      {"double", e.to(at::kDouble), (e + 1e-5 * at::randn({4099})).to(at::kDouble), true},
      {"half", e.to(at::kHalf), (e + 1e-4 * at::randn({4099})).to(at::kHalf), true},
      {"half subnormals", tiny.to(at::kHalf), tiny.to(at::kHalf).clone(), true},
      {"bfloat16", e.to(at::kBFloat16), e.to(at::kBFloat16), true},
      {"int64", at::arange(-50, 50, at::kLong), at::arange(-50, 50, at::kLong), true},
      {"uint8", at::arange(0, 200).to(at::kByte), at::arange(0, 200).to(at::kByte), true},
      {"bool", e.gt(0), e.gt(0), true},
      {"nan and inf on both sides", nan_inf, nan_inf.clone(), true},
      {"one value off", e, e.clone().index_fill_(0, at::tensor({int64_t{7}}), 9.0), false},
      {"int off by one", at::arange(0, 64, at::kInt), at::arange(1, 65, at::kInt), false},
  };
  for (const Pair& p : pairs) {
    for (const Tolerance& tol : {plain, strict}) {
      SCOPED_TRACE(std::string(p.what) + (tol.magnitude > 0 ? ", strict" : ", plain"));
      const TensorComparison fused = compare_tensors(p.expected, p.actual, "output0", tol);
      expect_same(on_host(p.expected, p.actual, tol), fused);
      EXPECT_EQ(fused.passed, p.passes);
      expect_same_unlisted(fused, compare_tensors(p.expected, p.actual, "output0", tol, 0));
    }
  }
  // A constant answer on outputs that vary: within plain tolerance, but not strict's.
  const at::Tensor level = 5 + 1e-6 * at::randn({4096});
  const at::Tensor flat = at::full({4096}, 5.0f);
  EXPECT_TRUE(compare_tensors(level, flat, "output0", plain).passed);
  const TensorComparison c = compare_tensors(level, flat, "output0", strict);
  expect_same(on_host(level, flat, strict), c);
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.problem_kind, "constant_output");
  expect_same_unlisted(c, compare_tensors(level, flat, "output0", strict, 0));
  // Far off and constant: the same problem named, listed or not.
  const at::Tensor far = at::full({4096}, 7.0f);
  expect_same_unlisted(compare_tensors(level, far, "output0", strict), compare_tensors(level, far, "output0", strict, 0));
  EXPECT_EQ(compare_tensors(level, far, "output0", strict, 0).problem_kind, "constant_output");
}

TEST(TensorCompareTest, ListsOnlyTheFirstMismatchesInIndexOrder) {
  at::Tensor e = at::zeros({4, 50});
  at::Tensor a = e.clone();
  a.view({-1}).narrow(0, 13, 120).fill_(1.0);  // 120 mismatches from flat index 13
  const Tolerance tol{1e-3, 1e-3};
  TensorComparison dev = compare_tensors(e, a, "output0", tol, 5, 16);
  expect_same(on_host(e, a, tol), dev);
  ASSERT_EQ(dev.first_mismatches.size(), 5u);
  EXPECT_EQ(dev.first_mismatches[0].index, (std::vector<int64_t>{0, 13}));
  EXPECT_EQ(dev.first_mismatches[4].index, (std::vector<int64_t>{0, 17}));
  EXPECT_EQ(dev.mismatches, 120);
}

TEST(TensorCompareTest, IntegerBoolAndScalarOutputs) {
  const Tolerance tol{0, 0};
  at::Tensor ei = at::arange(100, at::kLong), ai = ei.clone();
  ai[42] = 7;
  expect_same(on_host(ei, ai, tol), compare_tensors(ei, ai, "output0", tol));
  at::Tensor eb = at::arange(10).gt(4), ab = eb.logical_not();
  expect_same(on_host(eb, ab, tol), compare_tensors(eb, ab, "output0", tol));
  at::Tensor es = at::scalar_tensor(2.5), as = at::scalar_tensor(2.5 + 1e-2);
  expect_same(on_host(es, as, Tolerance{}), compare_tensors(es, as, "output0", Tolerance{}));
}

TEST(TensorCompareTest, ShapeAndDtypeMismatchesReadAsOnTheHost) {
  at::Tensor e = at::zeros({2, 3});
  expect_same(on_host(e, at::zeros({3, 2}), Tolerance{}), compare_tensors(e, at::zeros({3, 2}), "output0", Tolerance{}));
  expect_same(on_host(e, at::zeros({2, 3}, at::kDouble), Tolerance{}),
              compare_tensors(e, at::zeros({2, 3}, at::kDouble), "output0", Tolerance{}));
  EXPECT_EQ(compare_tensors(e, at::zeros({3, 2}), "output0", Tolerance{}).problem,
            "shape mismatch: expected [2, 3], got [3, 2]");
}

TEST(TensorCompareTest, ErrorAgainstExactGivesMaxAndRmsAcrossChunks) {
  at::Tensor exact = at::tensor({1.0, -4.0, 2.0, 0.5}, at::kDouble);
  at::Tensor approx = at::tensor({1.0f, -4.5f, 2.25f, 0.5f});
  for (int64_t chunk : {int64_t{1}, int64_t{3}, int64_t{1} << 26}) {
    ErrorVsExact e = error_against(exact, approx, chunk);
    EXPECT_DOUBLE_EQ(e.max_abs_error, 0.5);
    EXPECT_DOUBLE_EQ(e.rms_error, std::sqrt((0.25 + 0.0625) / 4));
    EXPECT_DOUBLE_EQ(e.max_abs_exact, 4.0);
  }
  approx[2] = NAN;  // a NaN anywhere is the answer, whatever chunk it is in
  EXPECT_TRUE(std::isnan(error_against(exact, approx, 1).max_abs_error));
  EXPECT_TRUE(std::isnan(error_against(exact, approx).max_abs_error));
  EXPECT_THROW(error_against(exact, at::zeros({3})), std::invalid_argument);
}

TEST(TensorCompareTest, IdenticalIsBitwise) {
  at::Tensor a = at::tensor({0.0, 1.0, NAN});
  at::Tensor b = at::tensor({-0.0, 1.0, NAN});
  EXPECT_TRUE(tensors_identical(a, a.clone()));  // the same NaN bits
  EXPECT_FALSE(tensors_identical(a, b));         // -0.0 is another bit pattern
  EXPECT_FALSE(tensors_identical(a, a.to(at::kFloat)));
  EXPECT_FALSE(tensors_identical(a, a.view({3, 1})));
  EXPECT_TRUE(tensors_identical(at::arange(6).view({2, 3}).t(), at::arange(6).view({2, 3}).t().contiguous()));
}

TEST(TensorExchangeTest, FileTransportCarriesOutputsAndInputsBothWays) {
  const std::string stem =
      (std::filesystem::temp_directory_path() / ("kloop-exchange-" + std::to_string(::getpid()))).string();
  at::Tensor out = at::randn({3, 5}), in0 = at::arange(4, at::kInt), in1 = at::randn({2}).to(at::kDouble);
  ExchangeExport ex;
  const auto desc = ex.publish({out.t()}, {in0, in1}, "file", stem);  // a non-contiguous output
  EXPECT_EQ(desc.at("transport"), "file");
  ExchangeImport got(desc, "cpu");
  ASSERT_EQ(got.outputs().size(), 1u);
  ASSERT_EQ(got.inputs().size(), 2u);
  EXPECT_TRUE(tensors_identical(got.outputs()[0], out.t().contiguous()));
  EXPECT_TRUE(tensors_identical(got.inputs()[0], in0));
  EXPECT_TRUE(tensors_identical(got.inputs()[1], in1));
  std::filesystem::remove(stem + ".outputs.safetensors");
  std::filesystem::remove(stem + ".inputs.safetensors");
}

TEST(TensorExchangeTest, UnknownTransportIsAnError) {
  ExchangeExport ex;
  EXPECT_THROW(ex.publish({at::zeros({1})}, {}, "pigeon", "/tmp/x"), std::invalid_argument);
  // CUDA IPC carries device memory only (the evaluator falls back to files).
  try {
    ex.publish({at::zeros({1})}, {}, "cuda_ipc", "/tmp/x");
    ADD_FAILURE() << "cuda_ipc of a CPU tensor must throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA tensors only"), std::string::npos) << e.what();
  }
}

// Outputs far below atol (a softmax over long rows, values near 1/N): plain
// atol passes zeros and a constant 1/N; the magnitude-aware tolerance
// (strict) fails both, on the host and on the device alike, and still passes
// an answer off by fp32 rounding.
TEST(TensorCompareTest, MagnitudeAwareToleranceFailsZerosAndConstantsOnTinyOutputs) {
  at::manual_seed(3);
  const int64_t n = 4096;
  at::Tensor e = at::softmax(at::rand({4, n}, at::kDouble), 1).to(at::kFloat);  // as 23_Softmax's U(0,1) rows
  at::Tensor zeros = at::zeros_like(e);
  at::Tensor constant = at::full_like(e, 1.0 / static_cast<double>(n));
  at::Tensor rounded = (e.to(at::kDouble) * (1 + 1e-6)).to(at::kFloat);
  const Tolerance plain{1e-3, 1e-3};
  Tolerance strict = plain;
  strict.magnitude = 1e-2;
  EXPECT_TRUE(compare_tensors(e, zeros, "output0", plain).passed);
  EXPECT_TRUE(compare_tensors(e, constant, "output0", plain).passed);
  for (int64_t chunk : {int64_t{1} << 26, int64_t{1000}}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    const TensorComparison z = compare_tensors(e, zeros, "output0", strict, 5, chunk);
    EXPECT_FALSE(z.passed);
    EXPECT_GT(z.mismatches, z.numel / 2);
    EXPECT_LT(z.atol_used, 1e-5);
    expect_same(on_host(e, zeros, strict), z);
    const TensorComparison c = compare_tensors(e, constant, "output0", strict, 5, chunk);
    EXPECT_FALSE(c.passed);
    EXPECT_NE(c.problem.find("constant output"), std::string::npos) << c.problem;
    EXPECT_EQ(c.problem_kind, "constant_output");
    EXPECT_EQ(comparison_from_json(to_json(c)).problem_kind, "constant_output") << "the kind travels with the comparison";
    expect_same(on_host(e, constant, strict), c);
    const TensorComparison r = compare_tensors(e, rounded, "output0", strict, 5, chunk);
    EXPECT_TRUE(r.passed) << r.max_abs_error << " vs atol " << r.atol_used;
    expect_same(on_host(e, rounded, strict), r);
  }
  // Outputs of ordinary size keep the plain atol; an all-zero expected one too.
  at::Tensor big = 0.3 * at::randn({64});  // RMS about 0.3: outputs not far below atol keep it
  EXPECT_DOUBLE_EQ(compare_tensors(big, big, "output0", strict).atol_used, 1e-3);
  EXPECT_TRUE(compare_tensors(at::zeros({8}), at::full({8}, 1e-4), "output0", strict).passed);
  // A constant expected output may be answered by a constant.
  EXPECT_TRUE(compare_tensors(at::full({8}, 0.5), at::full({8}, 0.5), "output0", strict).passed);
}

// Where the fp32 reference strays from exact, an answer on the other side
// of the exact value passes against the fp64 twin with the reference's own
// error allowed, and is said to; one farther from exact than the tolerance
// plus that error fails, reported against the fp32 reference; without a
// twin (or under a tolerance where the fp32 comparison passes) nothing
// changes; and a constant answer still fails as one.
TEST(TensorCompareTest, AnAnswerOnTheExactSideOfAStrayReferencePassesAgainstTheTwin) {
  at::manual_seed(5);
  const at::Tensor exact = at::randn({256}, at::kDouble) * 10;
  const double stray = 8e-4;  // the fp32 reference's error, most of atol
  const at::Tensor reference = (exact + stray).to(at::kFloat);
  const at::Tensor other_side = (exact - 6e-4).to(at::kFloat);  // 1.4e-3 from the reference, 6e-4 from exact
  const at::Tensor too_far = (exact - 2.5e-3).to(at::kFloat);  // beyond atol + stray of exact
  Tolerance tol{1e-3, 0};
  tol.magnitude = 1e-2;
  EXPECT_FALSE(compare_tensors(reference, other_side, "output0", tol).passed);
  const TensorComparison ok = compare_with_exact_allowance(reference, &exact, other_side, "output0", tol);
  EXPECT_TRUE(ok.passed) << ok.max_abs_error << " vs atol " << ok.atol_used;
  EXPECT_TRUE(ok.against_exact);
  EXPECT_NEAR(ok.atol_used, 1e-3 + stray, 1e-6);
  EXPECT_TRUE(comparison_from_json(to_json(ok)).against_exact);
  const TensorComparison far = compare_with_exact_allowance(reference, &exact, too_far, "output0", tol);
  EXPECT_FALSE(far.passed);
  EXPECT_FALSE(far.against_exact);
  EXPECT_DOUBLE_EQ(far.atol_used, 1e-3);
  EXPECT_FALSE(compare_with_exact_allowance(reference, nullptr, other_side, "output0", tol).passed);
  const TensorComparison near = compare_with_exact_allowance(reference, &exact, reference, "output0", tol);
  EXPECT_TRUE(near.passed);
  EXPECT_FALSE(near.against_exact);
  // Tiny outputs: the allowance is the reference's error, not atol's.
  const at::Tensor tiny = at::rand({256}, at::kDouble) * 1e-4;
  const at::Tensor tiny_ref = (tiny * (1 + 1e-7)).to(at::kFloat);
  const TensorComparison zeros =
      compare_with_exact_allowance(tiny_ref, &tiny, at::zeros({256}), "output0", tol);
  EXPECT_FALSE(zeros.passed);
  const TensorComparison constant =
      compare_with_exact_allowance(tiny_ref, &tiny, at::full({256}, 5e-5), "output0", tol);
  EXPECT_FALSE(constant.passed);
}

// An output repeated along a dimension (a broadcast, an expand()ed view, a
// value computed once) where the expected output varies along it by less
// than the tolerance: plain atol passes it; strict does not, on the host and
// the device alike. An honest answer, and a repeated one where the expected
// output repeats too, pass.
TEST(TensorCompareTest, StrictFailsAnOutputRepeatedAlongADimensionWhereTheExpectedVaries) {
  at::manual_seed(5);
  const at::Tensor row = at::rand({1, 64});
  // Rows differ from the first by up to 7.5e-4, inside atol 1e-3 alone.
  const at::Tensor e = row + 5e-5 * at::arange(16, at::kFloat).unsqueeze(1);
  const at::Tensor repeated = row.expand({16, 64});
  const Tolerance plain{1e-3, 1e-3};
  Tolerance strict = plain;
  strict.magnitude = 1e-2;
  EXPECT_TRUE(compare_tensors(e, repeated, "output0", plain).passed);
  for (int64_t chunk : {int64_t{1} << 26, int64_t{100}}) {
    const TensorComparison b = compare_tensors(e, repeated, "output0", strict, 5, chunk);
    EXPECT_FALSE(b.passed);
    EXPECT_EQ(b.problem_kind, "broadcast_output");
    EXPECT_NE(b.problem.find("broadcast output: every slice along dim 0 (size 16) is the same"), std::string::npos)
        << b.problem;
    EXPECT_TRUE(compare_tensors(e, e.clone(), "output0", strict, 5, chunk).passed);
    const at::Tensor both = row.expand({16, 64}).contiguous();
    EXPECT_TRUE(compare_tensors(both, both.clone(), "output0", strict, 5, chunk).passed);
  }
  // Repeated and beyond the tolerance: failing, whether its mismatches are
  // listed or not (no broadcast check turns a failing output into a pass).
  const at::Tensor far = row + 1e-1 * at::arange(16, at::kFloat).unsqueeze(1);
  for (int listed : {5, 0}) {
    const TensorComparison f = compare_tensors(far, repeated, "output0", strict, listed);
    EXPECT_FALSE(f.passed) << listed;
    EXPECT_GT(f.mismatches, 0) << listed;
  }
}

#ifdef KLOOP_WITH_CUDA
// The fused kernels that judge passing outputs on a GPU give the ATen
// path's figures: the same tensors compared on the device and on the host
// (passing pairs in float and half, NaN and infinities where both have
// them, a constant output within tolerance, and failing pairs, which the
// device hands to ATen for the listing). Run by scripts/gpu-check.
TEST(TensorCompareTest, DeviceKernelsAgreeWithAtenOnTheDevice) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  at::manual_seed(5);
  Tolerance strict{1e-3, 1e-3};
  strict.magnitude = 1e-2;
  const at::Tensor e = at::randn({1000003});
  at::Tensor nan_inf = e.clone();
  nan_inf[17] = NAN;
  nan_inf[99] = INFINITY;
  at::Tensor one_inf = e.clone();
  one_inf[12345] = INFINITY;
  const at::Tensor level = 5 + 1e-6 * at::randn({4096});
  struct Pair {
    const char* what;
    at::Tensor expected, actual;
  };
  const std::vector<Pair> pairs = {
      {"close", e, e + 1e-5 * at::randn({1000003})},
      {"half", e.to(at::kHalf), (e + 1e-4 * at::randn({1000003})).to(at::kHalf)},
      {"nan and inf on both sides", nan_inf, nan_inf.clone()},
      {"constant within tolerance", level, at::full({4096}, 5.0f)},
      {"an infinity where a value is expected", e, one_inf},
      {"far off", e, e + 0.1},
      {"small outputs, zeros", 1e-4 * e, at::zeros_like(e)},
  };
  for (const Pair& p : pairs) {
    const TensorComparison host = compare_tensors(p.expected, p.actual, "output0", strict);
    const TensorComparison dev = compare_tensors(p.expected.cuda(), p.actual.cuda(), "output0", strict);
    SCOPED_TRACE(p.what);
    expect_same(host, dev);
    expect_same_unlisted(host, compare_tensors(p.expected.cuda(), p.actual.cuda(), "output0", strict, 0));
  }
}
#endif

}  // namespace
}  // namespace kloop
