// compare_tensors' two passes (compare_passes.h) as two fused kernels (CUDA
// builds, linked into the worker), so judging a call of a 6 GB output costs
// milliseconds. Raw pointers and kloop's dtype: no ATen here.
#pragma once

#include <cstdint>

#include "evaluator/check/compare_passes.h"

namespace kloop {

// Both take device pointers to numel contiguous elements of `dtype` on the
// current device, written by work on any blocking stream, and wait for the
// result. False: a dtype they do not handle (the caller uses ATen).
// Throws std::runtime_error for a CUDA error.
bool device_scale(const void* expected, const void* actual, DType dtype, int64_t numel, PassScale& out);
bool device_errors(const void* expected, const void* actual, DType dtype, int64_t numel, double atol, double rtol,
                   PassErrors& out);

}  // namespace kloop
