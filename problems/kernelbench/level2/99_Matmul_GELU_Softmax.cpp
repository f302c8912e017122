// KernelBench level 2, task 99: Linear, exact GELU, softmax over dim 1.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear linear{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    linear = register_module("linear", torch::nn::Linear(init.arg_int("in_features"), init.arg_int("out_features")));
  }
  at::Tensor forward(const at::Tensor& x) { return torch::softmax(torch::gelu(linear(x)), /*dim=*/1); }
};
KLOOP_REGISTER_REFERENCE(Model)
