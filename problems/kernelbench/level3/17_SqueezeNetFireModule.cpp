// KernelBench level 3, task 17: SqueezeNet Fire module (conv1x1 squeeze+ReLU, then conv1x1 and conv3x3 expands with ReLU, concatenated).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d squeeze{nullptr}, expand1x1{nullptr}, expand3x3{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    using torch::nn::Conv2dOptions;
    const int64_t squeeze_channels = init.arg_int("squeeze_channels");
    squeeze = register_module("squeeze",
                              torch::nn::Conv2d(Conv2dOptions(init.arg_int("in_channels"), squeeze_channels, 1)));
    expand1x1 = register_module(
        "expand1x1", torch::nn::Conv2d(Conv2dOptions(squeeze_channels, init.arg_int("expand1x1_channels"), 1)));
    expand3x3 = register_module(
        "expand3x3",
        torch::nn::Conv2d(Conv2dOptions(squeeze_channels, init.arg_int("expand3x3_channels"), 3).padding(1)));
  }
  at::Tensor forward(const at::Tensor& input) {
    auto x = torch::relu(squeeze(input));
    return torch::cat({torch::relu(expand1x1(x)), torch::relu(expand3x3(x))}, 1);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
