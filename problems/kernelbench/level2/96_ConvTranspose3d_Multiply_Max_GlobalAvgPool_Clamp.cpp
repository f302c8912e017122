// KernelBench level 2, task 96: ConvTranspose3d, scale, MaxPool3d, global average pool, clamp [0, 1].
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose3d conv_transpose{nullptr};
  torch::nn::MaxPool3d maxpool{nullptr};
  torch::nn::AdaptiveAvgPool3d global_avg_pool{nullptr};
  double scale;
  double clamp_min = 0.0, clamp_max = 1.0;
  explicit Model(const kloop::ModuleInit& init) : scale(init.arg_float("scale")) {
    conv_transpose = register_module(
        "conv_transpose",
        torch::nn::ConvTranspose3d(torch::nn::ConvTranspose3dOptions(init.arg_int("in_channels"),
                                                                     init.arg_int("out_channels"),
                                                                     init.arg_int("kernel_size"))
                                       .stride(init.arg_int("stride"))
                                       .padding(init.arg_int("padding"))));
    maxpool = register_module(
        "maxpool", torch::nn::MaxPool3d(torch::nn::MaxPool3dOptions(init.arg_int("maxpool_kernel_size"))));
    global_avg_pool = register_module(
        "global_avg_pool", torch::nn::AdaptiveAvgPool3d(torch::nn::AdaptiveAvgPool3dOptions({1, 1, 1})));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv_transpose(x) * scale;
    y = maxpool(y);
    y = global_avg_pool(y);
    return torch::clamp(y, clamp_min, clamp_max);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
