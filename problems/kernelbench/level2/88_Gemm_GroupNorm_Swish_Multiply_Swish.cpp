// KernelBench level 2, task 88: Linear, GroupNorm, Swish, per-feature multiply, Swish.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear gemm{nullptr};
  torch::nn::GroupNorm group_norm{nullptr};
  at::Tensor multiply_weight;
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t out_features = init.arg_int("out_features");
    gemm = register_module("gemm", torch::nn::Linear(init.arg_int("in_features"), out_features));
    group_norm = register_module("group_norm", torch::nn::GroupNorm(init.arg_int("num_groups"), out_features));
    multiply_weight = register_parameter("multiply_weight", torch::randn(init.arg_ints("multiply_weight_shape")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = group_norm(gemm(x));
    y = y * torch::sigmoid(y);
    y = y * multiply_weight;
    return y * torch::sigmoid(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
