// compare_tensors' two passes over a pair of outputs, each one read of both:
// pass 1 the expected output's scale and whether either side is constant,
// pass 2 the tolerance test and the error figures. Two implementations with
// the same rules: fused loops on the host (compare_passes.cpp) and fused
// kernels on the GPU (tensor_compare_device.h). Either replaces some thirty
// ATen operations over double-precision copies of chunks of the outputs
// where the outputs pass; compare_tensors keeps ATen for listing mismatches.
// Raw pointers and kloop's dtype: no ATen here.
#pragma once

#include <cstdint>

#include "evaluator/runtime/dtype.h"

namespace kloop {

// Pass 1.
struct PassScale {
  double squares = 0;  // of the finite expected values
  int64_t finite = 0;
  double e_min = 0, e_max = 0;  // over finite expected values (when finite > 0)
  bool a_nan = false;
  double a_min = 0, a_max = 0;  // over the actual values (when !a_nan)
};

// Pass 2, under compare_tensors' rules (NaN matches only NaN, an infinity
// only itself, finite values within atol + rtol * |expected|).
struct PassErrors {
  int64_t mismatches = 0;
  int64_t non_finite = 0;  // finite expected, non-finite actual
  double max_abs_error = 0, max_rel_error = 0, max_abs_expected = 0;
};

// Host pointers to numel contiguous elements of `dtype`. False: a dtype they
// do not handle (the caller uses ATen).
bool host_scale(const void* expected, const void* actual, DType dtype, int64_t numel, PassScale& out);
bool host_errors(const void* expected, const void* actual, DType dtype, int64_t numel, double atol, double rtol,
                 PassErrors& out);

}  // namespace kloop
