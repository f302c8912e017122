// KernelBench level 1, task 18: matrix multiplication with both operands transposed, C = A.T @ B.T.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  explicit Model(const kloop::ModuleInit&) {}
  at::Tensor forward(const at::Tensor& A, const at::Tensor& B) { return torch::matmul(A.t(), B.t()); }
};
KLOOP_REGISTER_REFERENCE(Model)
