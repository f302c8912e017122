// KernelBench level 2, task 40: Linear y, then y * scaling_factor + y.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear matmul{nullptr};
  double scaling_factor;
  explicit Model(const kloop::ModuleInit& init) : scaling_factor(init.arg_float("scaling_factor")) {
    matmul = register_module("matmul", torch::nn::Linear(init.arg_int("in_features"), init.arg_int("out_features")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = matmul(x);
    at::Tensor original = y.clone();
    y = y * scaling_factor;
    return y + original;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
