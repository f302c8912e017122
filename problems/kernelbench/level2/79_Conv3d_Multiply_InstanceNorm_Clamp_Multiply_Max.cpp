// KernelBench level 2, task 79: Conv3d, per-channel multiply, InstanceNorm3d, clamp, multiply again, max over channels.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv3d conv{nullptr};
  torch::nn::InstanceNorm3d instance_norm{nullptr};
  at::Tensor multiplier;
  double clamp_min, clamp_max;
  explicit Model(const kloop::ModuleInit& init)
      : clamp_min(init.arg_float("clamp_min")), clamp_max(init.arg_float("clamp_max")) {
    const int64_t out_channels = init.arg_int("out_channels");
    conv = register_module(
        "conv", torch::nn::Conv3d(init.arg_int("in_channels"), out_channels, init.arg_int("kernel_size")));
    multiplier = register_parameter("multiplier", torch::randn(init.arg_ints("multiplier_shape")));
    // Default options, as upstream: eps 1e-5, no affine parameters, no running statistics.
    instance_norm = register_module("instance_norm", torch::nn::InstanceNorm3d(out_channels));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv(x) * multiplier;
    y = instance_norm(y);
    y = torch::clamp(y, clamp_min, clamp_max);
    y = y * multiplier;
    return std::get<0>(torch::max(y, /*dim=*/1));
  }
};
KLOOP_REGISTER_REFERENCE(Model)
