// KernelBench level 1, task 17: matrix multiplication with B transposed, C = A @ B.T.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  explicit Model(const kloop::ModuleInit&) {}
  at::Tensor forward(const at::Tensor& A, const at::Tensor& B) { return torch::matmul(A, B.t()); }
};
KLOOP_REGISTER_REFERENCE(Model)
