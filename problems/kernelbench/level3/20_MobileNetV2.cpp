// KernelBench level 3, task 20: MobileNetV2 as upstream writes it (inverted residual blocks whose residual adds are dropped, training-mode batch norm, ReLU6), global average pool and Linear classifier.
#include <kloop/reference_api.h>

#include <array>

// LibTorch's Sequential has a templated forward and cannot sit inside another Sequential;
// this one (same children, same names) can.
struct NestedSequentialImpl : torch::nn::SequentialImpl {
  using torch::nn::SequentialImpl::SequentialImpl;
  torch::Tensor forward(torch::Tensor x) { return torch::nn::SequentialImpl::forward(x); }
};
TORCH_MODULE(NestedSequential);

struct Model : torch::nn::Module {
  torch::nn::Sequential features{nullptr}, classifier{nullptr};

  // Rounds v to a multiple of divisor, not going below 90% of v.
  static int64_t make_divisible(double v, int64_t divisor) {
    int64_t new_v = std::max<int64_t>(divisor, static_cast<int64_t>(v + divisor / 2.0) / divisor * divisor);
    if (new_v < 0.9 * v) new_v += divisor;
    return new_v;
  }

  // [conv1x1-BN-ReLU6 when expand_ratio != 1], depthwise conv3x3(stride)-BN-ReLU6, conv1x1-BN.
  // Upstream computes use_res_connect but discards it, so no block adds its input back.
  static NestedSequential inverted_residual_block(int64_t inp, int64_t oup, int64_t stride, int64_t expand_ratio) {
    using torch::nn::Conv2dOptions;
    const int64_t hidden_dim = inp * expand_ratio;
    NestedSequential layers;
    if (expand_ratio != 1) {
      layers->push_back(torch::nn::Conv2d(Conv2dOptions(inp, hidden_dim, 1).stride(1).padding(0).bias(false)));
      layers->push_back(torch::nn::BatchNorm2d(hidden_dim));
      layers->push_back(torch::nn::ReLU6(torch::nn::ReLU6Options(true)));
    }
    layers->push_back(torch::nn::Conv2d(
        Conv2dOptions(hidden_dim, hidden_dim, 3).stride(stride).padding(1).groups(hidden_dim).bias(false)));
    layers->push_back(torch::nn::BatchNorm2d(hidden_dim));
    layers->push_back(torch::nn::ReLU6(torch::nn::ReLU6Options(true)));
    layers->push_back(torch::nn::Conv2d(Conv2dOptions(hidden_dim, oup, 1).stride(1).padding(0).bias(false)));
    layers->push_back(torch::nn::BatchNorm2d(oup));
    return layers;
  }

  explicit Model(const kloop::ModuleInit& init) {
    int64_t input_channel = 32;
    const int64_t last_channel = 1280;
    // t (expansion), c (channels), n (repeats), s (stride of the first repeat)
    const std::vector<std::array<int64_t, 4>> inverted_residual_setting = {
        {1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2}, {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};

    features = torch::nn::Sequential();
    features->push_back(
        torch::nn::Conv2d(torch::nn::Conv2dOptions(3, input_channel, 3).stride(2).padding(1).bias(false)));
    features->push_back(torch::nn::BatchNorm2d(input_channel));
    features->push_back(torch::nn::ReLU6(torch::nn::ReLU6Options(true)));
    for (const auto& [t, c, n, s] : inverted_residual_setting) {
      const int64_t output_channel = make_divisible(static_cast<double>(c), 8);
      for (int64_t i = 0; i < n; ++i) {
        features->push_back(inverted_residual_block(input_channel, output_channel, i == 0 ? s : 1, t));
        input_channel = output_channel;
      }
    }
    features->push_back(
        torch::nn::Conv2d(torch::nn::Conv2dOptions(input_channel, last_channel, 1).stride(1).padding(0).bias(false)));
    features->push_back(torch::nn::BatchNorm2d(last_channel));
    features->push_back(torch::nn::ReLU6(torch::nn::ReLU6Options(true)));
    features->push_back(torch::nn::AdaptiveAvgPool2d(torch::nn::AdaptiveAvgPool2dOptions({1, 1})));
    register_module("features", features);

    classifier = register_module(
        "classifier",
        torch::nn::Sequential(torch::nn::Dropout(0.0), torch::nn::Linear(last_channel, init.arg_int("num_classes"))));

    // Upstream's weight initialisation, module by module in the same order
    // (KernelBench's seeded construction draws what it draws).
    torch::NoGradGuard no_grad;
    for (const auto& m : modules(/*include_self=*/false)) {
      if (auto* conv = m->as<torch::nn::Conv2d>()) {
        torch::nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut);
        if (conv->bias.defined()) torch::nn::init::zeros_(conv->bias);
      } else if (auto* bn = m->as<torch::nn::BatchNorm2d>()) {
        torch::nn::init::ones_(bn->weight);
        torch::nn::init::zeros_(bn->bias);
      } else if (auto* linear = m->as<torch::nn::Linear>()) {
        torch::nn::init::normal_(linear->weight, 0, 0.01);
        torch::nn::init::zeros_(linear->bias);
      }
    }
  }

  at::Tensor forward(const at::Tensor& input) {
    auto x = features->forward(input);
    x = x.view({x.size(0), -1});
    return classifier->forward(x);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
