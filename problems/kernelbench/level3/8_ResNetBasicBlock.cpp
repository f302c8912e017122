// KernelBench level 3, task 8: ResNet basic block (conv3x3-BN-ReLU-conv3x3-BN) plus a conv1x1-BN projection shortcut, then ReLU.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  static constexpr int64_t expansion = 1;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Sequential downsample{nullptr};

  explicit Model(const kloop::ModuleInit& init) {
    using torch::nn::Conv2dOptions;
    const int64_t in_channels = init.arg_int("in_channels");
    const int64_t out_channels = init.arg_int("out_channels");
    const int64_t stride = init.arg_int("stride");
    conv1 = register_module(
        "conv1", torch::nn::Conv2d(Conv2dOptions(in_channels, out_channels, 3).stride(stride).padding(1).bias(false)));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(out_channels));
    conv2 = register_module(
        "conv2", torch::nn::Conv2d(Conv2dOptions(out_channels, out_channels, 3).stride(1).padding(1).bias(false)));
    bn2 = register_module("bn2", torch::nn::BatchNorm2d(out_channels));
    // Upstream always builds the projection shortcut, whatever the channel counts and stride.
    downsample = register_module(
        "downsample",
        torch::nn::Sequential(
            torch::nn::Conv2d(Conv2dOptions(in_channels, out_channels * expansion, 1).stride(stride).bias(false)),
            torch::nn::BatchNorm2d(out_channels * expansion)));
  }

  at::Tensor forward(const at::Tensor& x) {
    auto out = torch::relu(bn1(conv1(x)));
    out = bn2(conv2(out));
    out += downsample->forward(x);
    return torch::relu(out);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
