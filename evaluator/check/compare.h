// Correctness of one output tensor against its expected value, with the
// diagnostics a model needs to fix its kernel (worst errors, where they are).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "evaluator/runtime/host_tensor.h"

namespace kloop {

// torch.allclose semantics: |actual - expected| <= atol + rtol * |expected|.
struct Tolerance {
  double atol = 1e-3;
  double rtol = 1e-3;
  // Magnitude-aware judging (strict): when > 0, atol is at most this
  // fraction of the expected output's RMS, so an all-zero or constant answer
  // cannot pass on outputs far below atol; and a constant output where the
  // expected one varies fails as such. 0: plain atol + rtol * |expected|.
  double magnitude = 0;
  // Added to the atol applied, after the magnitude cap: the fp32
  // reference's own error when judging against an fp64 twin
  // (compare_with_exact_allowance). Not sent between processes.
  double allowance = 0;
};

// The form the driver sends to the reference worker: {"atol": .., "rtol": ..}.
nlohmann::json to_json(const Tolerance& tol);
Tolerance tolerance_from_json(const nlohmann::json& j);

struct Mismatch {
  std::vector<int64_t> index;
  double expected = 0;
  double actual = 0;
};

struct TensorComparison {
  std::string name;
  bool passed = false;
  std::string problem;  // set when the tensors cannot be compared (shape, dtype) or an output is degenerate
  // What `problem` is, for reports: "shape", "dtype", "constant_output",
  // "broadcast_output"; "" when there is none.
  std::string problem_kind;
  int64_t numel = 0;
  int64_t mismatches = 0;
  int64_t non_finite = 0;  // NaN/Inf in actual where expected is finite
  double max_abs_error = 0;
  double max_rel_error = 0;
  double max_abs_expected = 0;
  double rms_expected = 0;  // over the expected's finite values
  double atol_used = 0;     // the absolute tolerance applied (see Tolerance::magnitude)
  // Judged against the fp64 twin, the fp32 reference's own error allowed
  // (compare_with_exact_allowance in tensor_compare.h); false: against the
  // fp32 reference.
  bool against_exact = false;
  std::vector<Mismatch> first_mismatches;
};

// The absolute tolerance for an expected output of this RMS.
double effective_atol(const Tolerance& tol, double rms_expected);

TensorComparison compare_tensors(const HostTensor& expected, const HostTensor& actual,
                                 const Tolerance& tol, int max_listed = 5);

// The comparison as the verdict stores it, and back (a worker that compares
// on the device sends it to the driver this way; an infinite error, which
// JSON cannot hold, travels as null).
nlohmann::json to_json(const TensorComparison& c);
TensorComparison comparison_from_json(const nlohmann::json& j);

// Bitwise equality of dtype, shape and bytes (input-mutation and stale-output checks).
bool tensors_identical(const HostTensor& a, const HostTensor& b);

// "[3, 17]" for the flat index of a tensor with this shape.
std::vector<int64_t> unravel_index(int64_t flat, const std::vector<int64_t>& shape);

}  // namespace kloop
