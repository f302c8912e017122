// KernelBench level 3, task 18: SqueezeNet 1.0 (conv7x7/2, eight Fire modules, ceil-mode max pools, conv1x1 classifier with ReLU and global average pool).
#include <kloop/reference_api.h>

// conv1x1 squeeze+ReLU, then conv1x1 and conv3x3 expands with ReLU, concatenated on channels.
struct FireModuleImpl : torch::nn::Module {
  torch::nn::Conv2d squeeze{nullptr}, expand1x1{nullptr}, expand3x3{nullptr};
  FireModuleImpl(int64_t in_channels, int64_t squeeze_channels, int64_t expand1x1_channels,
                 int64_t expand3x3_channels) {
    using torch::nn::Conv2dOptions;
    squeeze = register_module("squeeze", torch::nn::Conv2d(Conv2dOptions(in_channels, squeeze_channels, 1)));
    expand1x1 =
        register_module("expand1x1", torch::nn::Conv2d(Conv2dOptions(squeeze_channels, expand1x1_channels, 1)));
    expand3x3 = register_module(
        "expand3x3", torch::nn::Conv2d(Conv2dOptions(squeeze_channels, expand3x3_channels, 3).padding(1)));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(squeeze(x));
    return torch::cat({torch::relu(expand1x1(x)), torch::relu(expand3x3(x))}, 1);
  }
};
TORCH_MODULE(FireModule);

struct Model : torch::nn::Module {
  torch::nn::Sequential features{nullptr}, classifier{nullptr};

  static torch::nn::MaxPool2d pool() {
    return torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(3).stride(2).ceil_mode(true));
  }
  static torch::nn::ReLU relu() { return torch::nn::ReLU(torch::nn::ReLUOptions(true)); }

  explicit Model(const kloop::ModuleInit& init) {
    features = register_module(
        "features",
        torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 96, 7).stride(2)), relu(), pool(),
                              FireModule(96, 16, 64, 64), FireModule(128, 16, 64, 64), FireModule(128, 32, 128, 128),
                              pool(), FireModule(256, 32, 128, 128), FireModule(256, 48, 192, 192),
                              FireModule(384, 48, 192, 192), FireModule(384, 64, 256, 256), pool(),
                              FireModule(512, 64, 256, 256)));
    classifier = register_module(
        "classifier",
        torch::nn::Sequential(torch::nn::Dropout(0.0),
                              torch::nn::Conv2d(torch::nn::Conv2dOptions(512, init.arg_int("num_classes"), 1)), relu(),
                              torch::nn::AdaptiveAvgPool2d(torch::nn::AdaptiveAvgPool2dOptions({1, 1}))));
  }

  at::Tensor forward(const at::Tensor& input) {
    auto x = features->forward(input);
    x = classifier->forward(x);
    return torch::flatten(x, 1);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
