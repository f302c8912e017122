// KernelBench level 1, task 13: product of two symmetric matrices (symmetrised in forward).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  explicit Model(const kloop::ModuleInit&) {}
  at::Tensor forward(const at::Tensor& A, const at::Tensor& B) {
    // Upstream symmetrises its inputs in get_inputs; here it is part of the computation.
    at::Tensor As = (A + A.t()) / 2;
    at::Tensor Bs = (B + B.t()) / 2;
    return torch::matmul(As, Bs);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
