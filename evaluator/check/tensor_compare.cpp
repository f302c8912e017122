// Elementwise comparison: two fused passes where the outputs are (host loops
// or device kernels, compare_passes.h) when they pass, chunked ATen
// operations where they do not (for the listing of the first mismatches)
// or where the fused passes do not apply.
#include "evaluator/check/tensor_compare.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "evaluator/check/compare_passes.h"
#include "evaluator/isolation/tensor_bridge.h"
#ifdef KLOOP_WITH_CUDA
#include "evaluator/check/tensor_compare_device.h"
#endif

namespace kloop {
namespace {

std::string shape_text(const at::Tensor& t) { return shape_string(t.sizes().vec()); }

// Under a magnitude-aware tolerance (strict): a floating-point output that is
// exactly the same along a dimension (a broadcast, a stride-0 view, a value
// computed once and repeated) where the expected output varies along it by
// more than a tenth of the atol applied. Such an output can pass the
// tolerance where the variation is small, and no honest computation of a
// varying result repeats itself bit for bit. Cheap where the output is not
// repeated: the second slice is compared with the first before anything else.
std::string broadcast_problem(const at::Tensor& expected, const at::Tensor& actual, double atol) {
  if (!actual.is_floating_point() || actual.sizes() != expected.sizes()) return "";
  for (int64_t d = 0; d < actual.dim(); ++d) {
    const int64_t n = actual.size(d);
    if (n < 2 || !at::equal(actual.narrow(d, 1, 1), actual.narrow(d, 0, 1))) continue;
    if (!actual.eq(actual.narrow(d, 0, 1)).all().item<bool>()) continue;
    const double spread = expected.sub(expected.narrow(d, 0, 1)).abs().max().item<double>();
    if (!std::isfinite(spread) || spread <= 0.1 * atol) continue;
    const std::string text = fmt::format(
        "broadcast output: every slice along dim {} (size {}) is the same, where the expected values "
        "vary along it by up to {:.3g}",
        static_cast<long long>(d), static_cast<long long>(n), spread);
    return text;
  }
  return "";
}

// Under a magnitude-aware tolerance, the output's form once its elements
// are counted (c.passed: all within the tolerance; the ranges over the
// finite expected values and over the actual ones, which hold no NaN unless
// a_nan): a constant answer where the expected values vary fails; a passing
// one repeated along a dimension where they vary fails too.
void judge_form(TensorComparison& c, const at::Tensor& expected, const at::Tensor& actual, const Tolerance& tol,
                bool a_nan, double a_min, double a_max, double e_min, double e_max) {
  if (tol.magnitude <= 0) return;
  if (c.numel > 1 && !a_nan && a_min == a_max && e_min < e_max) {
    c.passed = false;
    c.problem = "constant output: every element is " + std::to_string(a_min) + " where the expected values vary";
    c.problem_kind = "constant_output";
  } else if (c.passed) {
    c.problem = broadcast_problem(expected, actual, c.atol_used);
    if (!c.problem.empty()) c.problem_kind = "broadcast_output";
    c.passed = c.problem.empty();
  }
}

// The fused passes where the tensors live; false where none applies.
bool scale_pass(const at::Tensor& e, const at::Tensor& a, int64_t n, PassScale& s) {
  if (e.is_cpu()) return host_scale(e.data_ptr(), a.data_ptr(), dtype_of(e), n, s);
#ifdef KLOOP_WITH_CUDA
  if (e.is_cuda()) return device_scale(e.data_ptr(), a.data_ptr(), dtype_of(e), n, s);
#endif
  return false;
}
bool error_pass(const at::Tensor& e, const at::Tensor& a, int64_t n, double atol, double rtol, PassErrors& r) {
  if (e.is_cpu()) return host_errors(e.data_ptr(), a.data_ptr(), dtype_of(e), n, atol, rtol, r);
#ifdef KLOOP_WITH_CUDA
  if (e.is_cuda()) return device_errors(e.data_ptr(), a.data_ptr(), dtype_of(e), n, atol, rtol, r);
#endif
  return false;
}

}  // namespace

TensorComparison compare_tensors(const at::Tensor& expected, const at::Tensor& actual, const std::string& name,
                                 const Tolerance& tol, int max_listed, int64_t chunk) {
  TensorComparison c;
  c.name = name;
  c.numel = expected.numel();
  if (expected.sizes() != actual.sizes()) {
    c.problem = "shape mismatch: expected " + shape_text(expected) + ", got " + shape_text(actual);
    c.problem_kind = "shape";
    return c;
  }
  if (expected.scalar_type() != actual.scalar_type()) {
    c.problem = std::string("dtype mismatch: expected ") + dtype_name(dtype_of(expected)) + ", got " +
                dtype_name(dtype_of(actual));
    c.problem_kind = "dtype";
    return c;
  }
  const at::Tensor e_all = expected.contiguous().view({-1});
  const at::Tensor a_all = actual.contiguous().view({-1});
  const std::vector<int64_t> shape = expected.sizes().vec();
  // The fused passes where the outputs live (host loops or device kernels):
  // they decide when nothing mismatches, or when no mismatch is to be
  // listed (the checks that only ask whether an output matches: a result
  // kept from the previous call, zeros, the audit's pairs); otherwise ATen
  // below lists the first mismatches. (Asked of a kept result, every call's
  // output mismatches the previous call's expected one, and ATen's chunked
  // double-precision path over it cost more than all else a call does.)
  PassScale s;
  if (c.numel > 0 && a_all.device() == e_all.device() && scale_pass(e_all, a_all, c.numel, s)) {
    c.rms_expected = s.finite ? std::sqrt(s.squares / static_cast<double>(s.finite)) : 0.0;
    c.atol_used = effective_atol(tol, c.rms_expected);
    PassErrors r;
    const bool counted = error_pass(e_all, a_all, c.numel, c.atol_used, tol.rtol, r);
    if (counted && (r.mismatches == 0 || max_listed <= 0)) {
      c.mismatches = r.mismatches;
      c.non_finite = r.non_finite;
      c.max_abs_error = r.max_abs_error;
      c.max_rel_error = r.max_rel_error;
      c.max_abs_expected = r.max_abs_expected;
      c.passed = r.mismatches == 0;
      judge_form(c, expected, actual, tol, s.a_nan, s.a_min, s.a_max, s.e_min, s.e_max);
      return c;
    }
    c.rms_expected = 0;  // recomputed below, with the mismatches listed
    c.atol_used = 0;
  }
  // First pass: the expected's scale (for a magnitude-aware atol) and
  // whether either side is constant.
  double squares = 0;
  int64_t finite = 0;
  double e_min = INFINITY, e_max = -INFINITY, a_min = INFINITY, a_max = -INFINITY;
  bool a_nan = false;
  for (int64_t begin = 0; begin < c.numel; begin += chunk) {
    const int64_t len = std::min(chunk, c.numel - begin);
    const at::Tensor e = e_all.narrow(0, begin, len).to(at::kDouble);
    const at::Tensor a = a_all.narrow(0, begin, len).to(at::kDouble);
    const at::Tensor e_fin = e.isfinite();
    const at::Tensor ef = at::where(e_fin, e, at::zeros_like(e));
    squares += (ef * ef).sum().item<double>();
    const int64_t n_fin = e_fin.sum().item<int64_t>();
    finite += n_fin;
    if (n_fin > 0) {
      e_min = std::min(e_min, at::where(e_fin, e, at::full_like(e, INFINITY)).min().item<double>());
      e_max = std::max(e_max, at::where(e_fin, e, at::full_like(e, -INFINITY)).max().item<double>());
    }
    a_nan = a_nan || a.isnan().any().item<bool>();
    if (!a_nan) {
      a_min = std::min(a_min, a.min().item<double>());
      a_max = std::max(a_max, a.max().item<double>());
    }
  }
  c.rms_expected = finite ? std::sqrt(squares / static_cast<double>(finite)) : 0.0;
  c.atol_used = effective_atol(tol, c.rms_expected);
  const double atol = c.atol_used;
  for (int64_t begin = 0; begin < c.numel; begin += chunk) {
    const int64_t len = std::min(chunk, c.numel - begin);
    const at::Tensor e = e_all.narrow(0, begin, len).to(at::kDouble);
    const at::Tensor a = a_all.narrow(0, begin, len).to(at::kDouble);
    const at::Tensor e_nan = e.isnan(), a_nan = a.isnan();
    const at::Tensor e_fin = e.isfinite(), a_fin = a.isfinite();
    const at::Tensor either_nan = e_nan.logical_or(a_nan);
    const at::Tensor both_finite = e_fin.logical_and(a_fin);
    const at::Tensor diff = (a - e).abs();
    const at::Tensor within = diff.le(atol + tol.rtol * e.abs());
    // NaN matches only NaN; an infinity only the same infinity; finite
    // values within atol + rtol * |expected|.
    const at::Tensor ok = at::where(either_nan, e_nan.logical_and(a_nan), at::where(both_finite, within, e.eq(a)));
    const at::Tensor abs_err =
        at::where(both_finite, diff, at::where(ok, at::zeros_like(diff), at::full_like(diff, INFINITY)));
    c.max_abs_expected =
        std::max(c.max_abs_expected, at::where(e_fin, e.abs(), at::zeros_like(e)).max().item<double>());
    c.non_finite += e_fin.logical_and(a_fin.logical_not()).sum().item<int64_t>();
    c.max_abs_error = std::max(c.max_abs_error, abs_err.max().item<double>());
    const at::Tensor has_rel = e.ne(0).logical_and(e_fin);
    c.max_rel_error = std::max(
        c.max_rel_error, at::where(has_rel, abs_err / at::where(has_rel, e.abs(), at::ones_like(e)), at::zeros_like(e))
                             .max()
                             .item<double>());
    const at::Tensor bad = ok.logical_not();
    const int64_t n_bad = bad.sum().item<int64_t>();
    c.mismatches += n_bad;
    // The first few mismatches, in index order, without listing them all
    // (nonzero() of a wrong 6 GB output would be larger than the output).
    int64_t from = 0;
    while (n_bad > 0 && static_cast<int>(c.first_mismatches.size()) < max_listed && from < len) {
      const at::Tensor rest = bad.narrow(0, from, len - from);
      if (!rest.any().item<bool>()) break;
      const int64_t at_rest = rest.to(at::kByte).argmax().item<int64_t>();
      const int64_t i = from + at_rest;
      c.first_mismatches.push_back({unravel_index(begin + i, shape), e[i].item<double>(), a[i].item<double>()});
      from = i + 1;
    }
  }
  c.passed = c.mismatches == 0;
  judge_form(c, expected, actual, tol, a_nan, a_min, a_max, e_min, e_max);
  return c;
}

TensorComparison compare_with_exact_allowance(const at::Tensor& expected, const at::Tensor* exact,
                                              const at::Tensor& actual, const std::string& name, const Tolerance& tol,
                                              int max_listed) {
  TensorComparison c = compare_tensors(expected, actual, name, tol, max_listed);
  if (c.passed || !c.problem.empty() || !exact || !actual.is_floating_point() || exact->sizes() != actual.sizes() ||
      exact->sizes() != expected.sizes() || c.non_finite > 0) {
    return c;
  }
  const ErrorVsExact reference = error_against(*exact, expected);
  if (!std::isfinite(reference.max_abs_error)) return c;
  Tolerance widened = tol;
  widened.allowance += reference.max_abs_error;
  TensorComparison e = compare_tensors(exact->to(actual.scalar_type()), actual, name, widened, max_listed);
  if (!e.passed) return c;
  e.against_exact = true;
  return e;
}

ErrorVsExact error_against(const at::Tensor& exact, const at::Tensor& approx, int64_t chunk) {
  if (exact.sizes() != approx.sizes()) {
    throw std::invalid_argument("error analysis: shapes " + shape_text(exact) + " and " + shape_text(approx) +
                                " differ");
  }
  ErrorVsExact r;
  const int64_t n = exact.numel();
  if (n == 0) return r;
  const at::Tensor x_all = exact.contiguous().view({-1}), y_all = approx.contiguous().view({-1});
  double sum_sq = 0, exact_sq = 0;
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t len = std::min(chunk, n - begin);
    const at::Tensor x = x_all.narrow(0, begin, len).to(at::kDouble);
    const at::Tensor d = (y_all.narrow(0, begin, len).to(at::kDouble) - x).abs();
    const double m = d.max().item<double>();  // a NaN stays: the output holds one
    if (!std::isnan(r.max_abs_error) && (std::isnan(m) || m > r.max_abs_error)) r.max_abs_error = m;
    sum_sq += d.square().sum().item<double>();
    exact_sq += x.square().sum().item<double>();
    r.max_abs_exact = std::max(r.max_abs_exact, x.abs().max().item<double>());
  }
  r.rms_error = std::sqrt(sum_sq / static_cast<double>(n));
  r.rms_exact = std::sqrt(exact_sq / static_cast<double>(n));
  return r;
}

bool tensors_identical(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes() || a.device() != b.device()) return false;
  if (a.numel() == 0) return true;
  const at::Tensor ab = a.contiguous().view({-1}).view(at::kByte);
  const at::Tensor bb = b.contiguous().view({-1}).view(at::kByte);
  return at::equal(ab, bb);
}

}  // namespace kloop
