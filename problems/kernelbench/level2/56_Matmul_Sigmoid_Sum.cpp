// KernelBench level 2, task 56: Linear, sigmoid, sum over the features (keepdim).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear linear{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    linear = register_module("linear", torch::nn::Linear(init.arg_int("input_size"), init.arg_int("hidden_size")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = torch::sigmoid(linear(x));
    return torch::sum(y, /*dim=*/1, /*keepdim=*/true);  // (batch, 1)
  }
};
KLOOP_REGISTER_REFERENCE(Model)
