#include <ATen/ops/empty_like.h>
#include <kloop/kernel_api.h>

struct ModelNew {
  explicit ModelNew(const kloop::ModuleInit&) {}

  at::Tensor forward(const at::Tensor& a, const at::Tensor& b) {
    at::Tensor x = a.contiguous(), y = b.contiguous();
    at::Tensor out = at::empty_like(x);
    const float* px = x.data_ptr<float>();
    const float* py = y.data_ptr<float>();
    float* po = out.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) po[i] = px[i] + py[i];
    return out;
  }
};
KLOOP_REGISTER_CANDIDATE(ModelNew)
