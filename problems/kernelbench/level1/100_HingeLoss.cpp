// KernelBench level 1, task 100: hinge loss mean(clamp(1 - predictions * targets, 0)) with float +-1 targets
// broadcast along the last dim of predictions.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  explicit Model(const kloop::ModuleInit&) {}
  at::Tensor forward(const at::Tensor& predictions, const at::Tensor& targets) {
    return torch::mean(torch::clamp(1 - predictions * targets, 0));
  }
};
KLOOP_REGISTER_REFERENCE(Model)
