// KernelBench level 3, task 23: EfficientNet-B1-style network (conv stem, seven MBConv blocks without residuals or squeeze-excitation, conv1x1 head, training-mode batch norm), global average pool and Linear classifier.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Sequential mbconv1{nullptr}, mbconv2{nullptr}, mbconv3{nullptr}, mbconv4{nullptr}, mbconv5{nullptr},
      mbconv6{nullptr}, mbconv7{nullptr};
  torch::nn::Linear fc{nullptr};

  // conv1x1 expand-BN-ReLU6, depthwise conv3x3(stride)-BN-ReLU6, conv1x1 project-BN.
  static torch::nn::Sequential make_mbconv_block(int64_t in_channels, int64_t out_channels, int64_t stride,
                                                 int64_t expand_ratio) {
    using torch::nn::Conv2dOptions;
    const int64_t hidden_dim = in_channels * expand_ratio;
    return torch::nn::Sequential(
        torch::nn::Conv2d(Conv2dOptions(in_channels, hidden_dim, 1).stride(1).padding(0).bias(false)),
        torch::nn::BatchNorm2d(hidden_dim), torch::nn::ReLU6(torch::nn::ReLU6Options(true)),
        torch::nn::Conv2d(
            Conv2dOptions(hidden_dim, hidden_dim, 3).stride(stride).padding(1).groups(hidden_dim).bias(false)),
        torch::nn::BatchNorm2d(hidden_dim), torch::nn::ReLU6(torch::nn::ReLU6Options(true)),
        torch::nn::Conv2d(Conv2dOptions(hidden_dim, out_channels, 1).stride(1).padding(0).bias(false)),
        torch::nn::BatchNorm2d(out_channels));
  }

  explicit Model(const kloop::ModuleInit& init) {
    using torch::nn::Conv2dOptions;
    conv1 = register_module("conv1", torch::nn::Conv2d(Conv2dOptions(3, 32, 3).stride(2).padding(1).bias(false)));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(32));
    mbconv1 = register_module("mbconv1", make_mbconv_block(32, 16, 1, 1));
    mbconv2 = register_module("mbconv2", make_mbconv_block(16, 24, 2, 6));
    mbconv3 = register_module("mbconv3", make_mbconv_block(24, 40, 2, 6));
    mbconv4 = register_module("mbconv4", make_mbconv_block(40, 80, 2, 6));
    mbconv5 = register_module("mbconv5", make_mbconv_block(80, 112, 1, 6));
    mbconv6 = register_module("mbconv6", make_mbconv_block(112, 192, 2, 6));
    mbconv7 = register_module("mbconv7", make_mbconv_block(192, 320, 1, 6));
    conv2 = register_module("conv2", torch::nn::Conv2d(Conv2dOptions(320, 1280, 1).stride(1).padding(0).bias(false)));
    bn2 = register_module("bn2", torch::nn::BatchNorm2d(1280));
    fc = register_module("fc", torch::nn::Linear(1280, init.arg_int("num_classes")));
  }

  at::Tensor forward(const at::Tensor& input) {
    auto x = torch::relu(bn1(conv1(input)));
    x = mbconv1->forward(x);
    x = mbconv2->forward(x);
    x = mbconv3->forward(x);
    x = mbconv4->forward(x);
    x = mbconv5->forward(x);
    x = mbconv6->forward(x);
    x = mbconv7->forward(x);
    x = torch::relu(bn2(conv2(x)));
    x = torch::adaptive_avg_pool2d(x, {1, 1});
    x = torch::flatten(x, 1);
    return fc(x);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
