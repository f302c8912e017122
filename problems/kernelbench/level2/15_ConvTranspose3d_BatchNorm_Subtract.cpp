// KernelBench level 2, task 15: ConvTranspose3d, BatchNorm3d (batch statistics), subtract the
// per-(batch, channel) spatial mean.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose3d conv_transpose{nullptr};
  torch::nn::BatchNorm3d batch_norm{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t out_channels = init.arg_int("out_channels");
    conv_transpose = register_module(
        "conv_transpose",
        torch::nn::ConvTranspose3d(torch::nn::ConvTranspose3dOptions(init.arg_int("in_channels"), out_channels,
                                                                     init.arg_int("kernel_size"))
                                       .stride(init.arg_int("stride"))
                                       .padding(init.arg_int("padding"))
                                       .bias(init.arg_bool("bias"))));
    batch_norm = register_module("batch_norm", torch::nn::BatchNorm3d(out_channels));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv_transpose(x);
    y = batch_norm(y);
    return y - torch::mean(y, {2, 3, 4}, /*keepdim=*/true);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
