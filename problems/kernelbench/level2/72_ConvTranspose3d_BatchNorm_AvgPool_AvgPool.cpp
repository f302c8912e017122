// KernelBench level 2, task 72: ConvTranspose3d, BatchNorm3d in training mode, AvgPool3d(2) twice.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose3d conv_transpose{nullptr};
  torch::nn::BatchNorm3d batch_norm{nullptr};
  torch::nn::AvgPool3d avg_pool1{nullptr}, avg_pool2{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t k = init.arg_int("kernel_size");
    const int64_t out_channels = init.arg_int("out_channels");
    conv_transpose = register_module(
        "conv_transpose",
        torch::nn::ConvTranspose3d(torch::nn::ConvTranspose3dOptions(init.arg_int("in_channels"), out_channels, {k, k, k})
                                       .stride(init.arg_int("stride"))
                                       .padding(init.arg_int("padding"))));
    batch_norm = register_module("batch_norm", torch::nn::BatchNorm3d(out_channels));
    // Upstream takes bias_shape but creates no parameter from it.
    avg_pool1 = register_module("avg_pool1", torch::nn::AvgPool3d(2));
    avg_pool2 = register_module("avg_pool2", torch::nn::AvgPool3d(2));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = batch_norm(conv_transpose(x));  // batch statistics (training mode)
    return avg_pool2(avg_pool1(y));
  }
};
KLOOP_REGISTER_REFERENCE(Model)
