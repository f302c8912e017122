// KernelBench level 2, task 85: Conv2d, GroupNorm, per-channel scale, MaxPool2d, clamp.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv{nullptr};
  torch::nn::GroupNorm group_norm{nullptr};
  torch::nn::MaxPool2d maxpool{nullptr};
  at::Tensor scale;
  double clamp_min, clamp_max;
  explicit Model(const kloop::ModuleInit& init)
      : clamp_min(init.arg_float("clamp_min")), clamp_max(init.arg_float("clamp_max")) {
    const int64_t out_channels = init.arg_int("out_channels");
    conv = register_module(
        "conv", torch::nn::Conv2d(init.arg_int("in_channels"), out_channels, init.arg_int("kernel_size")));
    group_norm = register_module("group_norm", torch::nn::GroupNorm(init.arg_int("num_groups"), out_channels));
    scale = register_parameter("scale", torch::ones(init.arg_ints("scale_shape")));
    maxpool = register_module(
        "maxpool", torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(init.arg_int("maxpool_kernel_size"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = group_norm(conv(x));
    y = y * scale;
    y = maxpool(y);
    return torch::clamp(y, clamp_min, clamp_max);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
