// KernelBench level 2, task 60: ConvTranspose3d, Swish, GroupNorm, HardSwish.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose3d conv_transpose{nullptr};
  torch::nn::GroupNorm group_norm{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t k = init.arg_int("kernel_size");
    const int64_t out_channels = init.arg_int("out_channels");
    conv_transpose = register_module(
        "conv_transpose",
        torch::nn::ConvTranspose3d(torch::nn::ConvTranspose3dOptions(init.arg_int("in_channels"), out_channels, {k, k, k})
                                       .stride(init.arg_int("stride"))
                                       .padding(init.arg_int("padding"))
                                       .bias(init.arg_bool("bias"))));
    group_norm = register_module(
        "group_norm",
        torch::nn::GroupNorm(torch::nn::GroupNormOptions(init.arg_int("groups"), out_channels).eps(init.arg_float("eps"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv_transpose(x);
    y = torch::sigmoid(y) * y;  // Swish
    y = group_norm(y);
    return torch::hardswish(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
