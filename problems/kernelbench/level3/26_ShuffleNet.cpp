// KernelBench level 3, task 26: a ShuffleNet (group 1x1 convs, channel shuffle, depthwise 3x3, three stages) classifier.
#include <kloop/reference_api.h>

namespace nn = torch::nn;

namespace {
nn::Conv2dOptions conv(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t padding, int64_t groups) {
  return nn::Conv2dOptions(in, out, k).stride(stride).padding(padding).groups(groups).bias(false);
}

// (B, C, H, W) viewed as (B, groups, C / groups, H, W), the two group dims swapped, flattened back.
at::Tensor shuffle_channels(const at::Tensor& x, int64_t groups) {
  const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  return x.view({B, groups, C / groups, H, W}).transpose(1, 2).contiguous().view({B, -1, H, W});
}
}  // namespace

struct ShuffleNetUnitImpl : nn::Module {
  nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  nn::Sequential shortcut;  // empty (identity) when in_channels == out_channels
  int64_t groups;
  ShuffleNetUnitImpl(int64_t in_channels, int64_t out_channels, int64_t groups_) : groups(groups_) {
    TORCH_CHECK(out_channels % 4 == 0);
    const int64_t mid_channels = out_channels / 4;
    conv1 = register_module("conv1", nn::Conv2d(conv(in_channels, mid_channels, 1, 1, 0, groups)));
    bn1 = register_module("bn1", nn::BatchNorm2d(mid_channels));
    conv2 = register_module("conv2", nn::Conv2d(conv(mid_channels, mid_channels, 3, 1, 1, mid_channels)));
    bn2 = register_module("bn2", nn::BatchNorm2d(mid_channels));
    conv3 = register_module("conv3", nn::Conv2d(conv(mid_channels, out_channels, 1, 1, 0, groups)));
    bn3 = register_module("bn3", nn::BatchNorm2d(out_channels));
    if (in_channels != out_channels) {
      shortcut->push_back(nn::Conv2d(conv(in_channels, out_channels, 1, 1, 0, 1)));
      shortcut->push_back(nn::BatchNorm2d(out_channels));
    }
    register_module("shortcut", shortcut);
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor out = torch::relu(bn1(conv1(x)));
    out = bn2(conv2(out));
    out = shuffle_channels(out, groups);
    out = torch::relu(bn3(conv3(out)));
    return out + (shortcut->is_empty() ? x : shortcut->forward(x));
  }
};
TORCH_MODULE(ShuffleNetUnit);

struct Model : nn::Module {
  nn::Conv2d conv1{nullptr}, conv5{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn5{nullptr};
  nn::MaxPool2d maxpool{nullptr};
  nn::Sequential stage2{nullptr}, stage3{nullptr}, stage4{nullptr};
  nn::Linear fc{nullptr};

  static nn::Sequential make_stage(int64_t in_channels, int64_t out_channels, int64_t repeats, int64_t groups) {
    nn::Sequential layers;
    layers->push_back(ShuffleNetUnit(in_channels, out_channels, groups));
    for (int64_t i = 1; i < repeats; ++i) layers->push_back(ShuffleNetUnit(out_channels, out_channels, groups));
    return layers;
  }

  explicit Model(const kloop::ModuleInit& init) {
    // Upstream's get_init_inputs passes num_classes only; the rest keep their defaults.
    const int64_t groups = 3;
    const std::vector<int64_t> repeats{3, 7, 3}, channels{24, 240, 480, 960};
    conv1 = register_module("conv1", nn::Conv2d(conv(3, channels[0], 3, 2, 1, 1)));
    bn1 = register_module("bn1", nn::BatchNorm2d(channels[0]));
    maxpool = register_module("maxpool", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
    stage2 = register_module("stage2", make_stage(channels[0], channels[1], repeats[0], groups));
    stage3 = register_module("stage3", make_stage(channels[1], channels[2], repeats[1], groups));
    stage4 = register_module("stage4", make_stage(channels[2], channels[3], repeats[2], groups));
    conv5 = register_module("conv5", nn::Conv2d(conv(channels[3], 1024, 1, 1, 0, 1)));
    bn5 = register_module("bn5", nn::BatchNorm2d(1024));
    fc = register_module("fc", nn::Linear(1024, init.arg_int("num_classes")));
  }
  at::Tensor forward(const at::Tensor& img) {
    at::Tensor x = maxpool(torch::relu(bn1(conv1(img))));
    x = stage4->forward(stage3->forward(stage2->forward(x)));
    x = torch::relu(bn5(conv5(x)));
    x = torch::adaptive_avg_pool2d(x, {1, 1});
    return fc(x.view({x.size(0), -1}));
  }
};
KLOOP_REGISTER_REFERENCE(Model)
