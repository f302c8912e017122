// KernelBench level 3, task 24: EfficientNet-B2-style network as upstream writes it (five MBConv blocks whose in-line squeeze-excitation pools the maps to 1x1, training-mode batch norm), Linear classifier.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv1{nullptr}, conv_final{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn_final{nullptr};
  torch::nn::Sequential mbconv1{nullptr}, mbconv2{nullptr}, mbconv3{nullptr}, mbconv4{nullptr}, mbconv5{nullptr};
  torch::nn::Linear fc{nullptr};

  // [conv1x1-BN-ReLU when expand_ratio != 1], depthwise conv3x3(stride)-BN-ReLU, then in sequence (not as a gate):
  // global average pool, conv1x1 (C -> C/4)-ReLU, conv1x1 (C/4 -> C)-Sigmoid, conv1x1 project-BN.
  static torch::nn::Sequential make_mbconv_block(int64_t in_channels, int64_t out_channels, int64_t stride,
                                                 int64_t expand_ratio) {
    using torch::nn::Conv2d;
    using torch::nn::Conv2dOptions;
    const int64_t expanded_channels = in_channels * expand_ratio;
    torch::nn::Sequential layers;
    if (expand_ratio != 1) {
      layers->push_back(Conv2d(Conv2dOptions(in_channels, expanded_channels, 1).stride(1).padding(0).bias(false)));
      layers->push_back(torch::nn::BatchNorm2d(expanded_channels));
      layers->push_back(torch::nn::ReLU(torch::nn::ReLUOptions(true)));
    }
    layers->push_back(Conv2d(Conv2dOptions(expanded_channels, expanded_channels, 3)
                                 .stride(stride)
                                 .padding(1)
                                 .groups(expanded_channels)
                                 .bias(false)));
    layers->push_back(torch::nn::BatchNorm2d(expanded_channels));
    layers->push_back(torch::nn::ReLU(torch::nn::ReLUOptions(true)));
    layers->push_back(torch::nn::AdaptiveAvgPool2d(torch::nn::AdaptiveAvgPool2dOptions({1, 1})));
    layers->push_back(
        Conv2d(Conv2dOptions(expanded_channels, expanded_channels / 4, 1).stride(1).padding(0).bias(false)));
    layers->push_back(torch::nn::ReLU(torch::nn::ReLUOptions(true)));
    layers->push_back(
        Conv2d(Conv2dOptions(expanded_channels / 4, expanded_channels, 1).stride(1).padding(0).bias(false)));
    layers->push_back(torch::nn::Sigmoid());
    layers->push_back(Conv2d(Conv2dOptions(expanded_channels, out_channels, 1).stride(1).padding(0).bias(false)));
    layers->push_back(torch::nn::BatchNorm2d(out_channels));
    return layers;
  }

  explicit Model(const kloop::ModuleInit& init) {
    using torch::nn::Conv2dOptions;
    conv1 = register_module("conv1", torch::nn::Conv2d(Conv2dOptions(3, 32, 3).stride(2).padding(1).bias(false)));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(32));
    mbconv1 = register_module("mbconv1", make_mbconv_block(32, 96, 1, 3));
    mbconv2 = register_module("mbconv2", make_mbconv_block(96, 144, 2, 6));
    mbconv3 = register_module("mbconv3", make_mbconv_block(144, 192, 2, 6));
    mbconv4 = register_module("mbconv4", make_mbconv_block(192, 288, 2, 6));
    mbconv5 = register_module("mbconv5", make_mbconv_block(288, 384, 1, 6));
    conv_final = register_module("conv_final",
                                 torch::nn::Conv2d(Conv2dOptions(384, 1408, 1).stride(1).padding(0).bias(false)));
    bn_final = register_module("bn_final", torch::nn::BatchNorm2d(1408));
    fc = register_module("fc", torch::nn::Linear(1408, init.arg_int("num_classes")));
  }

  at::Tensor forward(const at::Tensor& input) {
    auto x = torch::relu(bn1(conv1(input)));
    x = mbconv1->forward(x);
    x = mbconv2->forward(x);
    x = mbconv3->forward(x);
    x = mbconv4->forward(x);
    x = mbconv5->forward(x);
    x = torch::relu(bn_final(conv_final(x)));
    x = torch::adaptive_avg_pool2d(x, {1, 1});
    x = torch::flatten(x, 1);
    return fc(x);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
