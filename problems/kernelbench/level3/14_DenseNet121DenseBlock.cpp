// KernelBench level 3, task 14: DenseNet dense block (each layer BN-ReLU-conv3x3 on the concatenation of all previous features).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ModuleList layers{nullptr};

  // BatchNorm, ReLU, conv3x3 (no bias) and Dropout(0.0), the identity.
  static torch::nn::Sequential make_layer(int64_t in_features, int64_t growth_rate) {
    return torch::nn::Sequential(
        torch::nn::BatchNorm2d(in_features), torch::nn::ReLU(torch::nn::ReLUOptions(true)),
        torch::nn::Conv2d(torch::nn::Conv2dOptions(in_features, growth_rate, 3).padding(1).bias(false)),
        torch::nn::Dropout(0.0));
  }

  explicit Model(const kloop::ModuleInit& init) {
    const int64_t num_layers = init.arg_int("num_layers");
    const int64_t num_input_features = init.arg_int("num_input_features");
    const int64_t growth_rate = init.arg_int("growth_rate");
    layers = torch::nn::ModuleList();
    for (int64_t i = 0; i < num_layers; ++i) layers->push_back(make_layer(num_input_features + i * growth_rate, growth_rate));
    register_module("layers", layers);
  }

  at::Tensor forward(const at::Tensor& input) {
    std::vector<at::Tensor> features = {input};
    at::Tensor x = input;
    for (const auto& layer : *layers) {
      features.push_back(layer->as<torch::nn::Sequential>()->forward(x));
      x = torch::cat(features, 1);
    }
    return x;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
