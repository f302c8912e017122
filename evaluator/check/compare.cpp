// Elementwise comparison in double precision, over any stored dtype.
#include "evaluator/check/compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kloop {

std::vector<int64_t> unravel_index(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size(), 0);
  for (std::size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 0) break;
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

TensorComparison compare_tensors(const HostTensor& expected, const HostTensor& actual,
                                 const Tolerance& tol, int max_listed) {
  TensorComparison c;
  c.name = expected.name;
  c.numel = expected.numel();
  if (expected.shape != actual.shape) {
    c.problem = "shape mismatch: expected " + expected.shape_string() + ", got " + actual.shape_string();
    return c;
  }
  if (expected.dtype != actual.dtype) {
    c.problem = std::string("dtype mismatch: expected ") + dtype_name(expected.dtype) + ", got " +
                dtype_name(actual.dtype);
    return c;
  }
  for (int64_t i = 0; i < c.numel; ++i) {
    const double e = expected.at(static_cast<std::size_t>(i));
    const double a = actual.at(static_cast<std::size_t>(i));
    c.max_abs_expected = std::max(c.max_abs_expected, std::isfinite(e) ? std::fabs(e) : 0.0);
    bool ok;
    double abs_err;
    if (std::isnan(e) || std::isnan(a)) {
      ok = std::isnan(e) && std::isnan(a);
      abs_err = ok ? 0.0 : INFINITY;
    } else if (std::isinf(e) || std::isinf(a)) {
      ok = (e == a);
      abs_err = ok ? 0.0 : INFINITY;
    } else {
      abs_err = std::fabs(a - e);
      ok = abs_err <= tol.atol + tol.rtol * std::fabs(e);
    }
    if (std::isfinite(e) && !std::isfinite(a)) ++c.non_finite;
    c.max_abs_error = std::max(c.max_abs_error, abs_err);
    if (e != 0 && std::isfinite(e)) c.max_rel_error = std::max(c.max_rel_error, abs_err / std::fabs(e));
    if (!ok) {
      ++c.mismatches;
      if (static_cast<int>(c.first_mismatches.size()) < max_listed) {
        c.first_mismatches.push_back({unravel_index(i, expected.shape), e, a});
      }
    }
  }
  c.passed = (c.mismatches == 0);
  return c;
}

bool tensors_identical(const HostTensor& a, const HostTensor& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.bytes.size() == b.bytes.size() &&
         (a.bytes.empty() || std::memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size()) == 0);
}

}  // namespace kloop
