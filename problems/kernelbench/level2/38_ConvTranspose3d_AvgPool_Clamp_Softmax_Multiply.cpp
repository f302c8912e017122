// KernelBench level 2, task 38: AvgPool3d, ConvTranspose3d, clamp, softmax over the flattened
// spatial dims of each (sample, channel), then a learned per-channel scale.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::AvgPool3d avg_pool{nullptr};
  torch::nn::ConvTranspose3d conv_transpose{nullptr};
  double clamp_min, clamp_max;
  at::Tensor scale;
  explicit Model(const kloop::ModuleInit& init)
      : clamp_min(init.arg_float("clamp_min")), clamp_max(init.arg_float("clamp_max")) {
    const int64_t out_channels = init.arg_int("out_channels");
    // stride defaults to the window, as in nn.AvgPool3d
    avg_pool = register_module("avg_pool",
                               torch::nn::AvgPool3d(torch::nn::AvgPool3dOptions(init.arg_int("pool_kernel_size"))));
    conv_transpose = register_module(
        "conv_transpose",
        torch::nn::ConvTranspose3d(
            torch::nn::ConvTranspose3dOptions(init.arg_int("in_channels"), out_channels, init.arg_int("kernel_size"))
                .stride(init.arg_int("stride"))
                .padding(init.arg_int("padding"))
                .output_padding(init.arg_int("output_padding"))));
    scale = register_parameter("scale", torch::ones({1, out_channels, 1, 1, 1}));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = avg_pool(x);
    y = conv_transpose(y);
    y = torch::clamp(y, clamp_min, clamp_max);
    const auto shape = y.sizes().vec();
    y = y.view({shape[0], shape[1], -1});  // flatten the spatial dims
    y = torch::softmax(y, /*dim=*/2);
    y = y.view(shape);
    return y * scale;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
