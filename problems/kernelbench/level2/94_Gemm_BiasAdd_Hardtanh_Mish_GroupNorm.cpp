// KernelBench level 2, task 94: Linear, bias add, Hardtanh [-1, 1], Mish, GroupNorm.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear gemm{nullptr};
  torch::nn::Hardtanh hardtanh{nullptr};
  torch::nn::Mish mish{nullptr};
  torch::nn::GroupNorm groupnorm{nullptr};
  at::Tensor bias;
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t out_features = init.arg_int("out_features");
    gemm = register_module("gemm", torch::nn::Linear(init.arg_int("in_features"), out_features));
    bias = register_parameter("bias", torch::randn(init.arg_ints("bias_shape")));
    hardtanh = register_module("hardtanh", torch::nn::Hardtanh());  // min -1, max 1
    mish = register_module("mish", torch::nn::Mish());
    groupnorm = register_module("groupnorm", torch::nn::GroupNorm(init.arg_int("num_groups"), out_features));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = gemm(x) + bias;
    y = hardtanh(y);
    y = mish(y);
    return groupnorm(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
