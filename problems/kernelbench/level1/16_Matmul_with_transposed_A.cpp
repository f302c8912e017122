// KernelBench level 1, task 16: matrix multiplication with A transposed, C = A.T @ B.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  explicit Model(const kloop::ModuleInit&) {}
  at::Tensor forward(const at::Tensor& A, const at::Tensor& B) { return torch::matmul(A.t(), B); }
};
KLOOP_REGISTER_REFERENCE(Model)
