// The host's fused passes: one loop each, in double precision, with the
// device kernels' rules (tensor_compare_device.cu) and ATen's rounding of
// atol + rtol * |e| (two roundings, no FMA).
#include "evaluator/check/compare_passes.h"

#include <cmath>

namespace kloop {
namespace {

// The 16-bit floats as their bits; loads widen them exactly (dtype.h).
struct Half16 {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

double load(const Half16* p, int64_t i) { return half_to_float(p[i].bits); }
double load(const BFloat16* p, int64_t i) { return bfloat16_to_float(p[i].bits); }
double load(const bool* p, int64_t i) { return p[i] ? 1.0 : 0.0; }
template <typename T>
double load(const T* p, int64_t i) {
  return static_cast<double>(p[i]);
}

// Calls f(type) with a null pointer of the element type of `dtype`.
template <typename F>
bool with_type(DType dtype, F f) {
  switch (dtype) {
    case DType::kFloat32:
      f(static_cast<const float*>(nullptr));
      return true;
    case DType::kFloat64:
      f(static_cast<const double*>(nullptr));
      return true;
    case DType::kFloat16:
      f(static_cast<const Half16*>(nullptr));
      return true;
    case DType::kBFloat16:
      f(static_cast<const BFloat16*>(nullptr));
      return true;
    case DType::kInt64:
      f(static_cast<const int64_t*>(nullptr));
      return true;
    case DType::kInt32:
      f(static_cast<const int32_t*>(nullptr));
      return true;
    case DType::kInt16:
      f(static_cast<const int16_t*>(nullptr));
      return true;
    case DType::kInt8:
      f(static_cast<const int8_t*>(nullptr));
      return true;
    case DType::kUInt8:
      f(static_cast<const uint8_t*>(nullptr));
      return true;
    case DType::kBool:
      f(static_cast<const bool*>(nullptr));
      return true;
  }
  return false;
}

// Calls f(e, a) with both buffers as pointers to the element type of `dtype`.
template <typename F>
bool with_buffers(DType dtype, const void* expected, const void* actual, F f) {
  return with_type(dtype, [&](auto type) {
    using T = decltype(type);
    f(static_cast<T>(expected), static_cast<T>(actual));
  });
}

// The larger and the smaller of two numbers neither of which is a NaN (every
// use below; an infinity is one): inline, where std::fmax and std::fmin are
// calls into libm that cost more than the rest of a loop's step.
double larger(double a, double b) { return b > a ? b : a; }
double smaller(double a, double b) { return b < a ? b : a; }

}  // namespace

bool host_scale(const void* expected, const void* actual, DType dtype, int64_t numel, PassScale& out) {
  out = PassScale{};
  out.e_min = out.a_min = INFINITY;
  out.e_max = out.a_max = -INFINITY;
  return with_buffers(dtype, expected, actual, [&](auto e, auto a) {
    for (int64_t i = 0; i < numel; ++i) {
      const double x = load(e, i), y = load(a, i);
      if (std::isfinite(x)) {
        out.squares += x * x;
        ++out.finite;
        out.e_min = smaller(out.e_min, x);
        out.e_max = larger(out.e_max, x);
      }
      if (std::isnan(y)) {
        out.a_nan = true;
      } else {
        out.a_min = smaller(out.a_min, y);
        out.a_max = larger(out.a_max, y);
      }
    }
  });
}

bool host_errors(const void* expected, const void* actual, DType dtype, int64_t numel, double atol, double rtol,
                 PassErrors& out) {
  out = PassErrors{};
  return with_buffers(dtype, expected, actual, [&](auto e, auto a) {
    for (int64_t i = 0; i < numel; ++i) {
      const double x = load(e, i), y = load(a, i);
      const bool x_nan = std::isnan(x), y_nan = std::isnan(y), x_fin = std::isfinite(x), y_fin = std::isfinite(y);
      const double diff = std::fabs(y - x);
      volatile double scaled = rtol * std::fabs(x);  // rounded on its own, as ATen does: no contraction to an FMA
      const bool within = diff <= atol + scaled;
      const bool ok = (x_nan || y_nan) ? (x_nan && y_nan) : ((x_fin && y_fin) ? within : x == y);
      const double abs_err = (x_fin && y_fin) ? diff : (ok ? 0.0 : INFINITY);
      out.max_abs_error = larger(out.max_abs_error, abs_err);
      if (x_fin) out.max_abs_expected = larger(out.max_abs_expected, std::fabs(x));
      if (x != 0 && x_fin) out.max_rel_error = larger(out.max_rel_error, abs_err / std::fabs(x));
      out.non_finite += x_fin && !y_fin;
      out.mismatches += !ok;
    }
  });
}

}  // namespace kloop
