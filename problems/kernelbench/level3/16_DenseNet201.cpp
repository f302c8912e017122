// KernelBench level 3, task 16: DenseNet-201 (dense blocks [6, 12, 48, 32], transition layers, training-mode batch norm), global average pool and Linear classifier.
#include <kloop/reference_api.h>

// Each layer: BN-ReLU-conv3x3 (growth_rate channels) on the concatenation of all previous features.
struct DenseBlockImpl : torch::nn::Module {
  torch::nn::ModuleList layers{nullptr};

  static torch::nn::Sequential make_layer(int64_t in_features, int64_t growth_rate) {
    return torch::nn::Sequential(
        torch::nn::BatchNorm2d(in_features), torch::nn::ReLU(torch::nn::ReLUOptions(true)),
        torch::nn::Conv2d(torch::nn::Conv2dOptions(in_features, growth_rate, 3).padding(1).bias(false)),
        torch::nn::Dropout(0.0));
  }

  DenseBlockImpl(int64_t num_layers, int64_t num_input_features, int64_t growth_rate) {
    layers = torch::nn::ModuleList();
    for (int64_t i = 0; i < num_layers; ++i) layers->push_back(make_layer(num_input_features + i * growth_rate, growth_rate));
    register_module("layers", layers);
  }

  torch::Tensor forward(torch::Tensor x) {
    std::vector<torch::Tensor> features = {x};
    for (const auto& layer : *layers) {
      features.push_back(layer->as<torch::nn::Sequential>()->forward(x));
      x = torch::cat(features, 1);
    }
    return x;
  }
};
TORCH_MODULE(DenseBlock);

// BN-ReLU-conv1x1 (no bias)-avgpool 2x2/2.
struct TransitionLayerImpl : torch::nn::Module {
  torch::nn::Sequential transition{nullptr};
  TransitionLayerImpl(int64_t num_input_features, int64_t num_output_features) {
    transition = register_module(
        "transition",
        torch::nn::Sequential(
            torch::nn::BatchNorm2d(num_input_features), torch::nn::ReLU(torch::nn::ReLUOptions(true)),
            torch::nn::Conv2d(torch::nn::Conv2dOptions(num_input_features, num_output_features, 1).bias(false)),
            torch::nn::AvgPool2d(torch::nn::AvgPool2dOptions(2).stride(2))));
  }
  torch::Tensor forward(torch::Tensor x) { return transition->forward(x); }
};
TORCH_MODULE(TransitionLayer);

struct Model : torch::nn::Module {
  torch::nn::Sequential features{nullptr};
  torch::nn::ModuleList dense_blocks{nullptr}, transition_layers{nullptr};
  torch::nn::BatchNorm2d final_bn{nullptr};
  torch::nn::Linear classifier{nullptr};

  explicit Model(const kloop::ModuleInit& init) {
    const int64_t growth_rate = init.arg_int("growth_rate");
    features = register_module(
        "features",
        torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 64, 7).stride(2).padding(3).bias(false)),
                              torch::nn::BatchNorm2d(64), torch::nn::ReLU(torch::nn::ReLUOptions(true)),
                              torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(3).stride(2).padding(1))));

    int64_t num_features = 64;
    const std::vector<int64_t> block_layers = {6, 12, 48, 32};
    dense_blocks = torch::nn::ModuleList();
    transition_layers = torch::nn::ModuleList();
    for (size_t i = 0; i < block_layers.size(); ++i) {
      dense_blocks->push_back(DenseBlock(block_layers[i], num_features, growth_rate));
      num_features += block_layers[i] * growth_rate;
      if (i != block_layers.size() - 1) {
        transition_layers->push_back(TransitionLayer(num_features, num_features / 2));
        num_features /= 2;
      }
    }
    register_module("dense_blocks", dense_blocks);
    register_module("transition_layers", transition_layers);

    final_bn = register_module("final_bn", torch::nn::BatchNorm2d(num_features));
    classifier = register_module("classifier", torch::nn::Linear(num_features, init.arg_int("num_classes")));
  }

  at::Tensor forward(const at::Tensor& input) {
    auto x = features->forward(input);
    for (size_t i = 0; i < dense_blocks->size(); ++i) {
      x = dense_blocks[i]->as<DenseBlock>()->forward(x);
      if (i != dense_blocks->size() - 1) x = transition_layers[i]->as<TransitionLayer>()->forward(x);
    }
    x = torch::relu(final_bn(x));
    x = torch::adaptive_avg_pool2d(x, {1, 1}).view({x.size(0), -1});
    return classifier(x);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
