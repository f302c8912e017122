// KernelBench level 2, task 92: Conv2d, GroupNorm, tanh, HardSwish, residual add of the conv output, logsumexp over channels.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv{nullptr};
  torch::nn::GroupNorm group_norm{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t out_channels = init.arg_int("out_channels");
    conv = register_module(
        "conv", torch::nn::Conv2d(init.arg_int("in_channels"), out_channels, init.arg_int("kernel_size")));
    group_norm = register_module(
        "group_norm",
        torch::nn::GroupNorm(torch::nn::GroupNormOptions(init.arg_int("groups"), out_channels).eps(init.arg_float("eps"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor x_conv = conv(x);
    at::Tensor x_norm = group_norm(x_conv);
    at::Tensor x_hard_swish = torch::hardswish(torch::tanh(x_norm));
    at::Tensor x_res = x_conv + x_hard_swish;
    return torch::logsumexp(x_res, /*dim=*/{1}, /*keepdim=*/true);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
