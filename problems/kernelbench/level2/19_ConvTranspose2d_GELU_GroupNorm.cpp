// KernelBench level 2, task 19: ConvTranspose2d, GELU (exact), GroupNorm. The `groups` argument is
// unused, as upstream.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose2d conv_transpose{nullptr};
  torch::nn::GroupNorm group_norm{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t out_channels = init.arg_int("out_channels");
    conv_transpose = register_module(
        "conv_transpose",
        torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(init.arg_int("in_channels"), out_channels,
                                                                     init.arg_int("kernel_size"))
                                       .stride(init.arg_int("stride"))));
    group_norm = register_module("group_norm", torch::nn::GroupNorm(torch::nn::GroupNormOptions(
                                                   init.arg_int("num_groups"), out_channels)));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv_transpose(x);
    y = torch::gelu(y);
    return group_norm(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
