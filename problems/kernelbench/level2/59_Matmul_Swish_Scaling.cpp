// KernelBench level 2, task 59: Linear, Swish (x * sigmoid(x)), times a scalar.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear matmul{nullptr};
  double scaling_factor;
  explicit Model(const kloop::ModuleInit& init) : scaling_factor(init.arg_float("scaling_factor")) {
    matmul = register_module("matmul", torch::nn::Linear(init.arg_int("in_features"), init.arg_int("out_features")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = matmul(x);
    y = y * torch::sigmoid(y);
    return y * scaling_factor;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
