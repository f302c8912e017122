// KernelBench level 2, task 9: Linear, subtract a constant, multiply by a constant, ReLU.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear linear{nullptr};
  double subtract_value;
  double multiply_value;
  explicit Model(const kloop::ModuleInit& init)
      : subtract_value(init.arg_float("subtract_value")), multiply_value(init.arg_float("multiply_value")) {
    linear = register_module("linear", torch::nn::Linear(init.arg_int("in_features"), init.arg_int("out_features")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = linear(x);
    y = y - subtract_value;
    y = y * multiply_value;
    return torch::relu(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
