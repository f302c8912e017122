// KernelBench level 2, task 12: Linear, multiply by a constant, LeakyReLU.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear gemm{nullptr};
  double multiplier;
  torch::nn::LeakyReLU leaky_relu{nullptr};
  explicit Model(const kloop::ModuleInit& init) : multiplier(init.arg_float("multiplier")) {
    gemm = register_module("gemm", torch::nn::Linear(init.arg_int("in_features"), init.arg_int("out_features")));
    leaky_relu = register_module(
        "leaky_relu", torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(init.arg_float("negative_slope"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = gemm(x);
    y = y * multiplier;
    return leaky_relu(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
