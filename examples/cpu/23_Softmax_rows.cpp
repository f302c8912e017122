// Example candidate for 23_Softmax on CPU: one pass for the row maximum,
// one for the exponentials and their sum, one to normalise.
#include <ATen/ops/empty_like.h>
#include <kloop/kernel_api.h>

#include <cmath>

struct ModelNew {
  explicit ModelNew(const kloop::ModuleInit&) {}

  at::Tensor forward(const at::Tensor& x) {
    at::Tensor in = x.contiguous();
    at::Tensor out = at::empty_like(in);
    const int64_t rows = in.size(0), cols = in.size(1);
    const float* src = in.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
      const float* s = src + r * cols;
      float* d = dst + r * cols;
      float m = -INFINITY;
      for (int64_t c = 0; c < cols; ++c) m = s[c] > m ? s[c] : m;
      double sum = 0;
      for (int64_t c = 0; c < cols; ++c) {
        d[c] = std::exp(s[c] - m);
        sum += d[c];
      }
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t c = 0; c < cols; ++c) d[c] *= inv;
    }
    return out;
  }
};
KLOOP_REGISTER_CANDIDATE(ModelNew)
