// Grid-stride loops in double precision, one partial per block reduced in
// shared memory, the blocks' partials combined on the host (a fixed grid:
// the same sum order every time).
#include "evaluator/check/tensor_compare_device.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/cuda_check.h"

namespace kloop {
namespace {

constexpr int kThreads = 256;

template <typename T>
__device__ double load(const T* p, int64_t i) {
  return static_cast<double>(p[i]);
}
template <>
__device__ double load<__half>(const __half* p, int64_t i) {
  return static_cast<double>(__half2float(p[i]));
}
template <>
__device__ double load<__nv_bfloat16>(const __nv_bfloat16* p, int64_t i) {
  return static_cast<double>(__bfloat162float(p[i]));
}
template <>
__device__ double load<bool>(const bool* p, int64_t i) {
  return p[i] ? 1.0 : 0.0;
}

struct Scale {
  double squares, e_min, e_max, a_min, a_max;
  long long finite;
  int a_nan;
};
__device__ Scale combine(Scale x, const Scale& y) {
  x.squares += y.squares;
  x.finite += y.finite;
  x.e_min = fmin(x.e_min, y.e_min);
  x.e_max = fmax(x.e_max, y.e_max);
  x.a_min = fmin(x.a_min, y.a_min);
  x.a_max = fmax(x.a_max, y.a_max);
  x.a_nan |= y.a_nan;
  return x;
}

struct Errors {
  double max_abs, max_rel, max_expected;
  long long mismatches, non_finite;
};
__device__ Errors combine(Errors x, const Errors& y) {
  x.max_abs = fmax(x.max_abs, y.max_abs);
  x.max_rel = fmax(x.max_rel, y.max_rel);
  x.max_expected = fmax(x.max_expected, y.max_expected);
  x.mismatches += y.mismatches;
  x.non_finite += y.non_finite;
  return x;
}

template <typename P>
__device__ void block_reduce(P mine, P* out) {
  __shared__ P part[kThreads];
  part[threadIdx.x] = mine;
  __syncthreads();
  for (int step = kThreads / 2; step > 0; step /= 2) {
    if (static_cast<int>(threadIdx.x) < step) part[threadIdx.x] = combine(part[threadIdx.x], part[threadIdx.x + step]);
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}

template <typename T>
__global__ void scale_kernel(const T* e, const T* a, int64_t n, Scale* out) {
  Scale s{0, INFINITY, -INFINITY, INFINITY, -INFINITY, 0, 0};
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double x = load(e, i), y = load(a, i);
    if (isfinite(x)) {
      s.squares = __dadd_rn(s.squares, __dmul_rn(x, x));
      ++s.finite;
      s.e_min = fmin(s.e_min, x);
      s.e_max = fmax(s.e_max, x);
    }
    if (isnan(y)) {
      s.a_nan = 1;
    } else {
      s.a_min = fmin(s.a_min, y);
      s.a_max = fmax(s.a_max, y);
    }
  }
  block_reduce(s, out);
}

template <typename T>
__global__ void errors_kernel(const T* e, const T* a, int64_t n, double atol, double rtol, Errors* out) {
  Errors r{0, 0, 0, 0, 0};
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double x = load(e, i), y = load(a, i);
    const bool x_nan = isnan(x), y_nan = isnan(y), x_fin = isfinite(x), y_fin = isfinite(y);
    const double diff = fabs(__dsub_rn(y, x));
    // As ATen computes atol + rtol * |e|: two roundings, no FMA.
    const bool within = diff <= __dadd_rn(atol, __dmul_rn(rtol, fabs(x)));
    const bool ok = (x_nan || y_nan) ? (x_nan && y_nan) : ((x_fin && y_fin) ? within : x == y);
    const double abs_err = (x_fin && y_fin) ? diff : (ok ? 0.0 : INFINITY);
    r.max_abs = fmax(r.max_abs, abs_err);
    if (x_fin) r.max_expected = fmax(r.max_expected, fabs(x));
    if (x != 0 && x_fin) r.max_rel = fmax(r.max_rel, __ddiv_rn(abs_err, fabs(x)));
    r.non_finite += x_fin && !y_fin;
    r.mismatches += !ok;
  }
  block_reduce(r, out);
}

int grid_for(int64_t n) {
  int device = 0, sms = 0;
  KLOOP_CUDA_CHECK(cudaGetDevice(&device), "comparing on the device: cudaGetDevice");
  KLOOP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
                   "comparing on the device: cudaDeviceGetAttribute");
  const int64_t wanted = (n + kThreads - 1) / kThreads;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(wanted, static_cast<int64_t>(std::max(sms, 1)) * 8)));
}

// Runs launch(grid, partials) and returns the blocks' partials.
template <typename P, typename Launch>
std::vector<P> partials(int64_t n, Launch launch) {
  const int grid = grid_for(n);
  P* dev = nullptr;
  KLOOP_CUDA_CHECK(cudaMalloc(&dev, sizeof(P) * grid), "comparing on the device: cudaMalloc");
  const std::unique_ptr<P, decltype(&cudaFree)> freed_on_exit(dev, &cudaFree);
  launch(grid, dev);
  KLOOP_CUDA_CHECK(cudaGetLastError(), "comparing on the device: the kernel");
  KLOOP_CUDA_CHECK(cudaStreamSynchronize(nullptr), "comparing on the device: the kernel");
  std::vector<P> host(static_cast<std::size_t>(grid));
  KLOOP_CUDA_CHECK(cudaMemcpy(host.data(), dev, sizeof(P) * grid, cudaMemcpyDeviceToHost),
                   "comparing on the device: the kernel");
  return host;
}

// Calls f with the element type of `dtype` (a null pointer of it); false
// for a dtype without one here.
template <typename F>
bool with_type(DType dtype, F f) {
  switch (dtype) {
    case DType::kFloat32: f(static_cast<const float*>(nullptr)); return true;
    case DType::kFloat64: f(static_cast<const double*>(nullptr)); return true;
    case DType::kFloat16: f(static_cast<const __half*>(nullptr)); return true;
    case DType::kBFloat16: f(static_cast<const __nv_bfloat16*>(nullptr)); return true;
    case DType::kInt64: f(static_cast<const long long*>(nullptr)); return true;
    case DType::kInt32: f(static_cast<const int*>(nullptr)); return true;
    case DType::kInt16: f(static_cast<const short*>(nullptr)); return true;
    case DType::kInt8: f(static_cast<const signed char*>(nullptr)); return true;
    case DType::kUInt8: f(static_cast<const unsigned char*>(nullptr)); return true;
    case DType::kBool: f(static_cast<const bool*>(nullptr)); return true;
  }
  return false;
}

}  // namespace

bool device_scale(const void* expected, const void* actual, DType dtype, int64_t numel, PassScale& out) {
  out = PassScale{};
  if (numel <= 0) return true;
  return with_type(dtype, [&](auto type) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(type)>>;
    const auto parts = partials<Scale>(numel, [&](int grid, Scale* dev) {
      scale_kernel<T><<<grid, kThreads>>>(static_cast<const T*>(expected), static_cast<const T*>(actual), numel, dev);
    });
    out.e_min = out.a_min = INFINITY;
    out.e_max = out.a_max = -INFINITY;
    for (const Scale& p : parts) {
      out.squares += p.squares;
      out.finite += p.finite;
      out.e_min = std::min(out.e_min, p.e_min);
      out.e_max = std::max(out.e_max, p.e_max);
      out.a_min = std::min(out.a_min, p.a_min);
      out.a_max = std::max(out.a_max, p.a_max);
      out.a_nan = out.a_nan || p.a_nan;
    }
  });
}

bool device_errors(const void* expected, const void* actual, DType dtype, int64_t numel, double atol, double rtol,
                   PassErrors& out) {
  out = PassErrors{};
  if (numel <= 0) return true;
  return with_type(dtype, [&](auto type) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(type)>>;
    const auto parts = partials<Errors>(numel, [&](int grid, Errors* dev) {
      errors_kernel<T><<<grid, kThreads>>>(static_cast<const T*>(expected), static_cast<const T*>(actual), numel, atol,
                                           rtol, dev);
    });
    for (const Errors& p : parts) {
      out.mismatches += p.mismatches;
      out.non_finite += p.non_finite;
      out.max_abs_error = std::max(out.max_abs_error, p.max_abs);
      out.max_rel_error = std::max(out.max_rel_error, p.max_rel);
      out.max_abs_expected = std::max(out.max_abs_expected, p.max_expected);
    }
  });
}

}  // namespace kloop
