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

// Bitwise equality of dtype, shape and bytes.
bool tensors_identical(const at::Tensor& a, const at::Tensor& b);

}  // namespace kloop
