// KernelBench level 2, task 29: Linear, then Mish twice.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear linear{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    linear = register_module("linear", torch::nn::Linear(init.arg_int("in_features"), init.arg_int("out_features")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = linear(x);
    y = torch::mish(y);
    return torch::mish(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
