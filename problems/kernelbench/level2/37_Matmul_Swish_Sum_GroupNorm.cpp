// KernelBench level 2, task 37: Linear, Swish, add a learned per-feature bias, then GroupNorm.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear matmul{nullptr};
  at::Tensor bias;
  torch::nn::GroupNorm group_norm{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t out_features = init.arg_int("out_features");
    matmul = register_module("matmul", torch::nn::Linear(init.arg_int("in_features"), out_features));
    bias = register_parameter("bias", torch::randn(init.arg_ints("bias_shape")));
    group_norm = register_module(
        "group_norm", torch::nn::GroupNorm(torch::nn::GroupNormOptions(init.arg_int("num_groups"), out_features)));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = matmul(x);
    y = torch::sigmoid(y) * y;  // Swish
    y = y + bias;
    return group_norm(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
