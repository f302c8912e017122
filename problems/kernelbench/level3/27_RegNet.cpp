// KernelBench level 3, task 27: a plain "RegNet" of conv-BN-ReLU stages with max pooling, global average pool and Linear.
#include <kloop/reference_api.h>

namespace nn = torch::nn;

struct Model : nn::Module {
  nn::ModuleList feature_extractor;  // upstream's nn.Sequential of stages; the same state_dict keys
  nn::Linear fc{nullptr};

  // Conv3x3-BN-ReLU twice, then a 2x2 max pool.
  static nn::Sequential make_stage(int64_t in_channels, int64_t out_channels) {
    return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(in_channels, out_channels, 3).padding(1)),
                          nn::BatchNorm2d(out_channels), nn::ReLU(),
                          nn::Conv2d(nn::Conv2dOptions(out_channels, out_channels, 3).padding(1)),
                          nn::BatchNorm2d(out_channels), nn::ReLU(),
                          nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(2)));
  }

  explicit Model(const kloop::ModuleInit& init) {
    const int64_t stages = init.arg_int("stages");
    const std::vector<int64_t> block_widths = init.arg_ints("block_widths");
    int64_t current_channels = init.arg_int("input_channels");
    for (int64_t i = 0; i < stages; ++i) {
      feature_extractor->push_back(make_stage(current_channels, block_widths[i]));
      current_channels = block_widths[i];
    }
    register_module("feature_extractor", feature_extractor);
    fc = register_module("fc", nn::Linear(block_widths.back(), init.arg_int("output_classes")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = x;
    for (const auto& stage : *feature_extractor) y = stage->as<nn::SequentialImpl>()->forward(y);
    y = torch::mean(y, {2, 3});  // global average pooling
    return fc(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
