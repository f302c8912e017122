// Example candidate for 24_LogSoftmax on CPU: each row's maximum and
// log-sum-exp (accumulated in double) in two passes, the output in a third.
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
      const float* row = src + r * cols;
      float m = row[0];
      for (int64_t c = 1; c < cols; ++c) m = row[c] > m ? row[c] : m;
      double sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += std::exp(static_cast<double>(row[c] - m));
      const float shift = static_cast<float>(m + std::log(sum));
      for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = row[c] - shift;
    }
    return out;
  }
};
KLOOP_REGISTER_CANDIDATE(ModelNew)
