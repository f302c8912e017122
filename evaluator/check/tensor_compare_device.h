// compare_tensors' two passes as two fused kernels (CUDA builds, linked into
// the worker): one read of both outputs per pass instead of some thirty
// ATen kernels over double-precision copies, so judging a call of a 6 GB
// output costs milliseconds. Raw pointers and kloop's dtype: no ATen here.
#pragma once

#include <cstdint>

#include "evaluator/runtime/dtype.h"

namespace kloop {

// Pass 1: the expected output's scale, and whether either side is constant.
struct DeviceScale {
  double squares = 0;  // of the finite expected values
  int64_t finite = 0;
  double e_min = 0, e_max = 0;  // over finite expected values (when finite > 0)
  bool a_nan = false;
  double a_min = 0, a_max = 0;  // over the actual values (when !a_nan)
};

// Pass 2: the tolerance test and the error figures, under compare_tensors'
// rules (NaN matches only NaN, an infinity only itself).
struct DeviceErrors {
  int64_t mismatches = 0;
  int64_t non_finite = 0;  // finite expected, non-finite actual
  double max_abs_error = 0, max_rel_error = 0, max_abs_expected = 0;
};

// Both take device pointers to numel contiguous elements of `dtype` on the
// current device, written by work on any blocking stream, and wait for the
// result. False: a dtype they do not handle (the caller uses ATen).
// Throws std::runtime_error for a CUDA error.
bool device_scale(const void* expected, const void* actual, DType dtype, int64_t numel, DeviceScale& out);
bool device_errors(const void* expected, const void* actual, DType dtype, int64_t numel, double atol, double rtol,
                   DeviceErrors& out);

}  // namespace kloop
