// KernelBench level 2, task 11: ConvTranspose2d, BatchNorm2d (batch statistics), tanh, MaxPool2d,
// GroupNorm. The `groups` argument is unused, as upstream.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose2d conv_transpose{nullptr};
  torch::nn::BatchNorm2d batch_norm{nullptr};
  torch::nn::Tanh tanh{nullptr};
  torch::nn::MaxPool2d max_pool{nullptr};
  torch::nn::GroupNorm group_norm{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t out_channels = init.arg_int("out_channels");
    conv_transpose = register_module(
        "conv_transpose",
        torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(init.arg_int("in_channels"), out_channels,
                                                                     init.arg_int("kernel_size"))
                                       .stride(init.arg_int("stride"))
                                       .padding(init.arg_int("padding"))));
    batch_norm = register_module("batch_norm", torch::nn::BatchNorm2d(out_channels));
    tanh = register_module("tanh", torch::nn::Tanh());
    max_pool = register_module("max_pool", torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2).stride(2)));
    group_norm = register_module("group_norm", torch::nn::GroupNorm(torch::nn::GroupNormOptions(
                                                   init.arg_int("num_groups"), out_channels)));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv_transpose(x);
    y = batch_norm(y);
    y = tanh(y);
    y = max_pool(y);
    return group_norm(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
