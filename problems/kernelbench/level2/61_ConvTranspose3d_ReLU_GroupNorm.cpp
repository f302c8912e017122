// KernelBench level 2, task 61: ConvTranspose3d (stride 1, no padding), ReLU, GroupNorm.
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
                                       .bias(init.arg_bool("bias"))));
    group_norm = register_module("group_norm",
                                 torch::nn::GroupNorm(torch::nn::GroupNormOptions(init.arg_int("groups"), out_channels)));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = torch::relu(conv_transpose(x));
    return group_norm(y);  // eps 1e-5
  }
};
KLOOP_REGISTER_REFERENCE(Model)
