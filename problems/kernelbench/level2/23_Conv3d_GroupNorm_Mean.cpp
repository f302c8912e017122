// KernelBench level 2, task 23: Conv3d, GroupNorm, mean over all non-batch dims.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv3d conv{nullptr};
  torch::nn::GroupNorm group_norm{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t out_channels = init.arg_int("out_channels");
    conv = register_module("conv", torch::nn::Conv3d(torch::nn::Conv3dOptions(
                                       init.arg_int("in_channels"), out_channels, init.arg_int("kernel_size"))));
    group_norm = register_module("group_norm", torch::nn::GroupNorm(torch::nn::GroupNormOptions(
                                                   init.arg_int("num_groups"), out_channels)));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv(x);
    y = group_norm(y);
    return y.mean({1, 2, 3, 4});
  }
};
KLOOP_REGISTER_REFERENCE(Model)
