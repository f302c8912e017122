// KernelBench level 2, task 43: Conv3d, MaxPool3d(2, 2), logsumexp over channels, then ReLU.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv3d conv{nullptr};
  torch::nn::MaxPool3d max_pool{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    conv = register_module(
        "conv", torch::nn::Conv3d(torch::nn::Conv3dOptions(init.arg_int("in_channels"), init.arg_int("out_channels"),
                                                           init.arg_int("kernel_size"))
                                      .stride(init.arg_int("stride"))
                                      .padding(init.arg_int("padding"))));
    max_pool = register_module("max_pool", torch::nn::MaxPool3d(torch::nn::MaxPool3dOptions(2).stride(2)));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv(x);
    y = max_pool(y);
    y = torch::logsumexp(y, {1}, /*keepdim=*/true);
    return torch::relu(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
