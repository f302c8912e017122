// Example candidate for 19_ReLU on CPU: a hand-written loop instead of
// torch::relu. The forward allocates a fresh output and never touches x.
#include <ATen/ops/empty_like.h>
#include <kloop/kernel_api.h>

#include <algorithm>

struct ModelNew {
  explicit ModelNew(const kloop::ModuleInit&) {}

  at::Tensor forward(const at::Tensor& x) {
    at::Tensor in = x.contiguous();
    at::Tensor out = at::empty_like(in);
    const float* src = in.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const int64_t n = in.numel();
    for (int64_t i = 0; i < n; ++i) dst[i] = std::max(src[i], 0.0f);
    return out;
  }
};
KLOOP_REGISTER_CANDIDATE(ModelNew)
