// KernelBench level 1, task 39: divide each row by its L2 norm along dim 1.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  explicit Model(const kloop::ModuleInit&) {}
  at::Tensor forward(const at::Tensor& x) {
    // torch.norm(x, p=2, dim=1, keepdim=True) dispatches to linalg.vector_norm.
    return x / at::linalg_vector_norm(x, 2, at::IntArrayRef{1}, /*keepdim=*/true);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
