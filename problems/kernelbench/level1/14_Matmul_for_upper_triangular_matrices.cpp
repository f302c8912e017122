// KernelBench level 1, task 14: product of two upper-triangular matrices (triangularised in forward).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  explicit Model(const kloop::ModuleInit&) {}
  at::Tensor forward(const at::Tensor& A, const at::Tensor& B) {
    // Upstream makes its inputs upper-triangular in get_inputs; here it is part of the computation.
    return torch::triu(torch::matmul(torch::triu(A), torch::triu(B)));
  }
};
KLOOP_REGISTER_REFERENCE(Model)
