// KernelBench level 2, task 86: Linear, divide by a scalar, exact GELU.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear linear{nullptr};
  double divisor;
  explicit Model(const kloop::ModuleInit& init) : divisor(init.arg_float("divisor")) {
    linear = register_module("linear", torch::nn::Linear(init.arg_int("input_size"), init.arg_int("output_size")));
  }
  at::Tensor forward(const at::Tensor& x) { return torch::gelu(linear(x) / divisor); }
};
KLOOP_REGISTER_REFERENCE(Model)
