// KernelBench level 2, task 21: Conv2d, learned bias add, learned scale, sigmoid, GroupNorm.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv{nullptr};
  at::Tensor bias;
  at::Tensor scale;
  torch::nn::GroupNorm group_norm{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t out_channels = init.arg_int("out_channels");
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(
                                       init.arg_int("in_channels"), out_channels, init.arg_int("kernel_size"))));
    bias = register_parameter("bias", torch::randn(init.arg_ints("bias_shape")));
    scale = register_parameter("scale", torch::randn(init.arg_ints("scale_shape")));
    group_norm = register_module("group_norm", torch::nn::GroupNorm(torch::nn::GroupNormOptions(
                                                   init.arg_int("num_groups"), out_channels)));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv(x);
    y = y + bias;
    y = y * scale;
    y = torch::sigmoid(y);
    return group_norm(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
