// KernelBench level 2, task 77: ConvTranspose3d, scale, BatchNorm3d (batch statistics), global average pool.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose3d conv_transpose{nullptr};
  torch::nn::BatchNorm3d batch_norm{nullptr};
  torch::nn::AdaptiveAvgPool3d global_avg_pool{nullptr};
  double scale_factor;
  explicit Model(const kloop::ModuleInit& init) : scale_factor(init.arg_float("scale_factor")) {
    const int64_t out_channels = init.arg_int("out_channels");
    conv_transpose = register_module(
        "conv_transpose",
        torch::nn::ConvTranspose3d(init.arg_int("in_channels"), out_channels, init.arg_int("kernel_size")));
    batch_norm = register_module(
        "batch_norm", torch::nn::BatchNorm3d(torch::nn::BatchNorm3dOptions(out_channels)
                                                 .eps(init.arg_float("eps"))
                                                 .momentum(init.arg_float("momentum"))));
    global_avg_pool = register_module(
        "global_avg_pool", torch::nn::AdaptiveAvgPool3d(torch::nn::AdaptiveAvgPool3dOptions({1, 1, 1})));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv_transpose(x) * scale_factor;
    y = batch_norm(y);
    return global_avg_pool(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
