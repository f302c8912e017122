// KernelBench level 1, task 96: smooth L1 (Huber) loss, beta 1, mean reduction.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  explicit Model(const kloop::ModuleInit&) {}
  at::Tensor forward(const at::Tensor& predictions, const at::Tensor& targets) {
    return torch::nn::functional::smooth_l1_loss(predictions, targets);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
