// KernelBench level 2, task 63: Linear, ReLU, divide by a constant.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear linear{nullptr};
  double divisor;
  explicit Model(const kloop::ModuleInit& init) : divisor(init.arg_float("divisor")) {
    linear = register_module("linear", torch::nn::Linear(init.arg_int("in_features"), init.arg_int("out_features")));
  }
  at::Tensor forward(const at::Tensor& x) { return torch::relu(linear(x)) / divisor; }
};
KLOOP_REGISTER_REFERENCE(Model)
