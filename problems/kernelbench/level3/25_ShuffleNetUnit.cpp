// KernelBench level 3, task 25: ShuffleNet unit (grouped conv1x1-BN-ReLU, depthwise conv3x3-BN, channel shuffle, grouped conv1x1-BN-ReLU, plus a shortcut).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  int64_t groups;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  torch::nn::Sequential shortcut{nullptr};

  explicit Model(const kloop::ModuleInit& init) : groups(init.arg_int("groups")) {
    using torch::nn::Conv2dOptions;
    const int64_t in_channels = init.arg_int("in_channels");
    const int64_t out_channels = init.arg_int("out_channels");
    TORCH_CHECK(out_channels % 4 == 0, "out_channels must be a multiple of 4");
    const int64_t mid_channels = out_channels / 4;
    conv1 = register_module("conv1", torch::nn::Conv2d(Conv2dOptions(in_channels, mid_channels, 1)
                                                           .stride(1).padding(0).groups(groups).bias(false)));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(mid_channels));
    conv2 = register_module("conv2", torch::nn::Conv2d(Conv2dOptions(mid_channels, mid_channels, 3)
                                                           .stride(1).padding(1).groups(mid_channels).bias(false)));
    bn2 = register_module("bn2", torch::nn::BatchNorm2d(mid_channels));
    conv3 = register_module("conv3", torch::nn::Conv2d(Conv2dOptions(mid_channels, out_channels, 1)
                                                           .stride(1).padding(0).groups(groups).bias(false)));
    bn3 = register_module("bn3", torch::nn::BatchNorm2d(out_channels));
    // Identity (an empty Sequential upstream) when the channel counts match, else a conv1x1-BN projection.
    shortcut = torch::nn::Sequential();
    if (in_channels != out_channels) {
      shortcut->push_back(
          torch::nn::Conv2d(Conv2dOptions(in_channels, out_channels, 1).stride(1).padding(0).bias(false)));
      shortcut->push_back(torch::nn::BatchNorm2d(out_channels));
    }
    register_module("shortcut", shortcut);
  }

  // (B, C, H, W) -> view (B, g, C/g, H, W) -> swap dims 1 and 2 -> (B, C, H, W).
  at::Tensor channel_shuffle(const at::Tensor& x) const {
    const int64_t b = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
    return x.view({b, groups, c / groups, h, w}).transpose(1, 2).contiguous().view({b, -1, h, w});
  }

  at::Tensor forward(const at::Tensor& x) {
    auto out = torch::relu(bn1(conv1(x)));
    out = bn2(conv2(out));
    out = channel_shuffle(out);
    out = torch::relu(bn3(conv3(out)));
    out += shortcut->is_empty() ? x : shortcut->forward(x);
    return out;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
