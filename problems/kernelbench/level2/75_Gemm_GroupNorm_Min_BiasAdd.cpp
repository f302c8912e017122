// KernelBench level 2, task 75: Linear, GroupNorm, min over the features, plus a (1, C, 1, 1) bias (broadcast to (1, C, batch, 1)).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear gemm{nullptr};
  torch::nn::GroupNorm group_norm{nullptr};
  at::Tensor bias;
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t out_features = init.arg_int("out_features");
    gemm = register_module("gemm", torch::nn::Linear(init.arg_int("in_features"), out_features));
    group_norm = register_module("group_norm",
                                 torch::nn::GroupNorm(torch::nn::GroupNormOptions(init.arg_int("num_groups"), out_features)));
    bias = register_parameter("bias", torch::randn(init.arg_ints("bias_shape")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = group_norm(gemm(x));                 // (batch, out_features), eps 1e-5
    y = std::get<0>(torch::min(y, /*dim=*/1, /*keepdim=*/true));  // (batch, 1)
    return y + bias;  // (batch, 1) + (1, out_features, 1, 1) -> (1, out_features, batch, 1)
  }
};
KLOOP_REGISTER_REFERENCE(Model)
