// compare_tensors' semantics on LibTorch tensors, where they live: the
// reference worker judges a candidate's outputs on the GPU (or on the CPU
// for CPU evaluations), so expected values never leave its process and a
// multi-GB output is never copied to the host. Worker code: links LibTorch.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "evaluator/check/compare.h"

namespace kloop {

// The same fields as compare_tensors (tolerance test, NaN and Inf rules,
// maximum errors, the first mismatches in index order), computed in double
// precision in chunks of `chunk` elements so the extra memory stays small.
TensorComparison compare_tensors(const at::Tensor& expected, const at::Tensor& actual, const std::string& name,
                                 const Tolerance& tol, int max_listed = 5, int64_t chunk = int64_t{1} << 26);

// How far `approx` (the candidate's or the fp32 reference's output) is from
// `exact` (an fp64 reference's): maximum and root-mean-square absolute
// error, and the largest |exact| and the RMS of exact to read them against.
// Shapes must match.
struct ErrorVsExact {
  double max_abs_error = 0;
  double rms_error = 0;
  double max_abs_exact = 0;
  double rms_exact = 0;
};
ErrorVsExact error_against(const at::Tensor& exact, const at::Tensor& approx, int64_t chunk = int64_t{1} << 26);

// compare_tensors against the fp32 reference's `expected`, and, where that
// fails and an fp64 twin's `exact` output is at hand, once more against
// `exact` with the fp32 reference's own largest error added to the atol
// applied: where fp32 itself strays from exact (long reductions of terms of
// both signs), a candidate that rounds on the other side is judged by its
// distance from the true result, never given more room than the tolerance
// plus the reference's error (the room the fp32 comparison gives in the
// worst case). The comparison that decides is returned (against_exact says
// which); a failure reads as the fp32 comparison.
TensorComparison compare_with_exact_allowance(const at::Tensor& expected, const at::Tensor* exact,
                                              const at::Tensor& actual, const std::string& name, const Tolerance& tol,
                                              int max_listed = 5);

// Bitwise equality of dtype, shape and bytes.
bool tensors_identical(const at::Tensor& a, const at::Tensor& b);

}  // namespace kloop
