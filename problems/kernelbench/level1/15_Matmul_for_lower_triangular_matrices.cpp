// KernelBench level 1, task 15: product of two lower-triangular matrices (triangularised in forward).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  explicit Model(const kloop::ModuleInit&) {}
  at::Tensor forward(const at::Tensor& A, const at::Tensor& B) {
    // Upstream makes its inputs lower-triangular in get_inputs; here it is part of the computation.
    return torch::tril(torch::matmul(torch::tril(A), torch::tril(B)));
  }
};
KLOOP_REGISTER_REFERENCE(Model)
