// KernelBench level 3, task 10: ResNet-101 (bottleneck blocks, expansion 4, training-mode batch norm), global average pool and Linear classifier.
#include <kloop/reference_api.h>

// conv1x1-BN-ReLU-conv3x3(stride)-BN-ReLU-conv1x1-BN plus the (optionally projected) input, then ReLU.
struct BottleneckImpl : torch::nn::Module {
  static constexpr int64_t expansion = 4;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  torch::nn::Sequential downsample{nullptr};

  BottleneckImpl(int64_t in_channels, int64_t out_channels, int64_t stride = 1,
                 torch::nn::Sequential downsample_ = nullptr) {
    using torch::nn::Conv2dOptions;
    conv1 = register_module("conv1", torch::nn::Conv2d(Conv2dOptions(in_channels, out_channels, 1).bias(false)));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(out_channels));
    conv2 = register_module(
        "conv2", torch::nn::Conv2d(Conv2dOptions(out_channels, out_channels, 3).stride(stride).padding(1).bias(false)));
    bn2 = register_module("bn2", torch::nn::BatchNorm2d(out_channels));
    conv3 = register_module("conv3",
                            torch::nn::Conv2d(Conv2dOptions(out_channels, out_channels * expansion, 1).bias(false)));
    bn3 = register_module("bn3", torch::nn::BatchNorm2d(out_channels * expansion));
    if (downsample_) downsample = register_module("downsample", downsample_);
  }

  torch::Tensor forward(torch::Tensor x) {
    auto out = torch::relu(bn1(conv1(x)));
    out = torch::relu(bn2(conv2(out)));
    out = bn3(conv3(out));
    out += downsample ? downsample->forward(x) : x;
    return torch::relu(out);
  }
};
TORCH_MODULE(Bottleneck);

struct Model : torch::nn::Module {
  int64_t in_channels = 64;
  torch::nn::Conv2d conv1{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  torch::nn::MaxPool2d maxpool{nullptr};
  torch::nn::Sequential layer1{nullptr}, layer2{nullptr}, layer3{nullptr}, layer4{nullptr};
  torch::nn::Linear fc{nullptr};

  torch::nn::Sequential make_layer(int64_t out_channels, int64_t blocks, int64_t stride) {
    torch::nn::Sequential downsample{nullptr};
    if (stride != 1 || in_channels != out_channels * BottleneckImpl::expansion) {
      downsample = torch::nn::Sequential(
          torch::nn::Conv2d(torch::nn::Conv2dOptions(in_channels, out_channels * BottleneckImpl::expansion, 1)
                                .stride(stride)
                                .bias(false)),
          torch::nn::BatchNorm2d(out_channels * BottleneckImpl::expansion));
    }
    torch::nn::Sequential layers;
    layers->push_back(Bottleneck(in_channels, out_channels, stride, downsample));
    in_channels = out_channels * BottleneckImpl::expansion;
    for (int64_t i = 1; i < blocks; ++i) layers->push_back(Bottleneck(in_channels, out_channels));
    return layers;
  }

  explicit Model(const kloop::ModuleInit& init) {
    const std::vector<int64_t> layers = init.arg_ints("layers");
    conv1 = register_module(
        "conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, in_channels, 7).stride(2).padding(3).bias(false)));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(in_channels));
    maxpool = register_module("maxpool", torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(3).stride(2).padding(1)));
    layer1 = register_module("layer1", make_layer(64, layers.at(0), 1));
    layer2 = register_module("layer2", make_layer(128, layers.at(1), 2));
    layer3 = register_module("layer3", make_layer(256, layers.at(2), 2));
    layer4 = register_module("layer4", make_layer(512, layers.at(3), 2));
    fc = register_module("fc", torch::nn::Linear(512 * BottleneckImpl::expansion, init.arg_int("num_classes")));
  }

  at::Tensor forward(const at::Tensor& input) {
    auto x = maxpool(torch::relu(bn1(conv1(input))));
    x = layer1->forward(x);
    x = layer2->forward(x);
    x = layer3->forward(x);
    x = layer4->forward(x);
    x = torch::adaptive_avg_pool2d(x, {1, 1});
    x = torch::flatten(x, 1);
    return fc(x);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
