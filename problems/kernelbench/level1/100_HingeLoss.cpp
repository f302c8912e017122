// KernelBench level 1, task 100: hinge loss mean(clamp(1 - predictions * labels, 0)) with +-1 labels
// made from a bool input and broadcast along the last dim of predictions.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  explicit Model(const kloop::ModuleInit&) {}
  at::Tensor forward(const at::Tensor& predictions, const at::Tensor& targets) {
    at::Tensor labels = targets.to(predictions.scalar_type()) * 2 - 1;
    return torch::mean(torch::clamp(1 - predictions * labels, 0));
  }
};
KLOOP_REGISTER_REFERENCE(Model)
