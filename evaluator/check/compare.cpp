// Elementwise comparison in double precision, over any stored dtype.
#include "evaluator/check/compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kloop {

nlohmann::json to_json(const Tolerance& tol) {
  nlohmann::json j = {{"atol", tol.atol}, {"rtol", tol.rtol}};
  if (tol.magnitude > 0) j["magnitude"] = tol.magnitude;
  return j;
}

Tolerance tolerance_from_json(const nlohmann::json& j) {
  Tolerance tol;
  tol.atol = j.at("atol");
  tol.rtol = j.at("rtol");
  tol.magnitude = j.value("magnitude", 0.0);
  return tol;
}

double effective_atol(const Tolerance& tol, double rms_expected) {
  if (tol.magnitude <= 0 || !(rms_expected > 0)) return tol.atol + tol.allowance;
  return std::min(tol.atol, tol.magnitude * rms_expected) + tol.allowance;
}

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
    c.problem_kind = "shape";
    return c;
  }
  if (expected.dtype != actual.dtype) {
    c.problem = std::string("dtype mismatch: expected ") + dtype_name(expected.dtype) + ", got " +
                dtype_name(actual.dtype);
    c.problem_kind = "dtype";
    return c;
  }
  double squares = 0;
  int64_t finite = 0;
  double e_min = INFINITY, e_max = -INFINITY, a_min = INFINITY, a_max = -INFINITY;
  bool a_nan = false;
  for (int64_t i = 0; i < c.numel; ++i) {
    const double e = expected.at(static_cast<std::size_t>(i));
    const double a = actual.at(static_cast<std::size_t>(i));
    if (std::isfinite(e)) {
      squares += e * e;
      ++finite;
      e_min = std::min(e_min, e);
      e_max = std::max(e_max, e);
    }
    a_nan = a_nan || std::isnan(a);
    a_min = std::min(a_min, a);
    a_max = std::max(a_max, a);
  }
  c.rms_expected = finite ? std::sqrt(squares / static_cast<double>(finite)) : 0.0;
  c.atol_used = effective_atol(tol, c.rms_expected);
  const double atol = c.atol_used;
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
      ok = abs_err <= atol + tol.rtol * std::fabs(e);
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
  if (tol.magnitude > 0 && c.numel > 1 && !a_nan && a_min == a_max && e_min < e_max) {
    c.passed = false;
    c.problem = "constant output: every element is " + std::to_string(a_min) + " where the expected values vary";
    c.problem_kind = "constant_output";
  }
  return c;
}

nlohmann::json to_json(const TensorComparison& c) {
  nlohmann::json mism = nlohmann::json::array();
  for (const auto& m : c.first_mismatches) {
    mism.push_back({{"index", m.index}, {"expected", m.expected}, {"actual", m.actual}});
  }
  nlohmann::json j = {{"name", c.name},
                      {"passed", c.passed},
                      {"numel", c.numel},
                      {"mismatches", c.mismatches},
                      {"non_finite", c.non_finite},
                      {"max_abs_error", c.max_abs_error},
                      {"max_rel_error", c.max_rel_error},
                      {"max_abs_expected", c.max_abs_expected},
                      {"rms_expected", c.rms_expected},
                      {"atol_used", c.atol_used},
                      {"first_mismatches", mism}};
  if (!c.problem.empty()) j["problem"] = c.problem;
  if (!c.problem_kind.empty()) j["problem_kind"] = c.problem_kind;
  if (c.against_exact) j["against_exact"] = true;
  return j;
}

TensorComparison comparison_from_json(const nlohmann::json& j) {
  // null: a NaN or an infinity, which JSON cannot hold; the errors are
  // infinite then, a value (expected, actual) is not a number.
  auto number = [](const nlohmann::json& v, double if_null) { return v.is_null() ? if_null : v.get<double>(); };
  TensorComparison c;
  c.name = j.value("name", "");
  c.passed = j.value("passed", false);
  c.problem = j.value("problem", "");
  c.problem_kind = j.value("problem_kind", "");
  c.numel = j.value("numel", int64_t{0});
  c.mismatches = j.value("mismatches", int64_t{0});
  c.non_finite = j.value("non_finite", int64_t{0});
  c.max_abs_error = number(j.value("max_abs_error", nlohmann::json(0.0)), INFINITY);
  c.max_rel_error = number(j.value("max_rel_error", nlohmann::json(0.0)), INFINITY);
  c.max_abs_expected = number(j.value("max_abs_expected", nlohmann::json(0.0)), 0.0);
  c.rms_expected = number(j.value("rms_expected", nlohmann::json(0.0)), 0.0);
  c.atol_used = number(j.value("atol_used", nlohmann::json(0.0)), 0.0);
  c.against_exact = j.value("against_exact", false);
  for (const auto& m : j.value("first_mismatches", nlohmann::json::array())) {
    c.first_mismatches.push_back({m.at("index").get<std::vector<int64_t>>(), number(m.at("expected"), NAN),
                                  number(m.at("actual"), NAN)});
  }
  return c;
}

bool tensors_identical(const HostTensor& a, const HostTensor& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.bytes.size() == b.bytes.size() &&
         (a.bytes.empty() || std::memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size()) == 0);
}

}  // namespace kloop
