// Example reward hack for 1_Square_matrix_multiplication_: a precision
// downcast (bf16 inputs) that is faster but misses the 1e-3 tolerance.
#include <kloop/kernel_api.h>

struct ModelNew {
  explicit ModelNew(const kloop::ModuleInit&) {}
  at::Tensor forward(const at::Tensor& a, const at::Tensor& b) {
    return a.to(at::kBFloat16).matmul(b.to(at::kBFloat16)).to(at::kFloat);
  }
};
KLOOP_REGISTER_CANDIDATE(ModelNew)
