// KernelBench level 3, task 11: VGG-16 (13 conv3x3+ReLU layers in five max-pooled blocks, then Linear 25088-4096-4096-num_classes).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Sequential features{nullptr}, classifier{nullptr};

  explicit Model(const kloop::ModuleInit& init) {
    // Output channels of each block's convolutions; every block ends with a 2x2/2 max pool.
    const std::vector<std::vector<int64_t>> blocks = {
        {64, 64}, {128, 128}, {256, 256, 256}, {512, 512, 512}, {512, 512, 512}};
    features = torch::nn::Sequential();
    int64_t in_channels = 3;
    for (const auto& block : blocks) {
      for (int64_t out_channels : block) {
        features->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(in_channels, out_channels, 3).padding(1)));
        features->push_back(torch::nn::ReLU(torch::nn::ReLUOptions(true)));
        in_channels = out_channels;
      }
      features->push_back(torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2).stride(2)));
    }
    register_module("features", features);
    classifier = register_module(
        "classifier",
        torch::nn::Sequential(torch::nn::Linear(512 * 7 * 7, 4096), torch::nn::ReLU(torch::nn::ReLUOptions(true)),
                              torch::nn::Dropout(0.0), torch::nn::Linear(4096, 4096),
                              torch::nn::ReLU(torch::nn::ReLUOptions(true)), torch::nn::Dropout(0.0),
                              torch::nn::Linear(4096, init.arg_int("num_classes"))));
  }

  at::Tensor forward(const at::Tensor& input) {
    auto x = features->forward(input);
    x = torch::flatten(x, 1);
    return classifier->forward(x);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
