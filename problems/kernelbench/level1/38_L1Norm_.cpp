// KernelBench level 1, task 38: divide each row by the mean absolute value along dim 1.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  explicit Model(const kloop::ModuleInit&) {}
  at::Tensor forward(const at::Tensor& x) {
    return x / torch::mean(torch::abs(x), {1}, /*keepdim=*/true);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
