// KernelBench level 2, task 74: ConvTranspose3d, LeakyReLU(0.2), times a learned per-channel multiplier, LeakyReLU(0.2), MaxPool3d(2).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose3d conv_transpose{nullptr};
  at::Tensor multiplier;
  torch::nn::MaxPool3d max_pool{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t k = init.arg_int("kernel_size");
    conv_transpose = register_module(
        "conv_transpose",
        torch::nn::ConvTranspose3d(
            torch::nn::ConvTranspose3dOptions(init.arg_int("in_channels"), init.arg_int("out_channels"), {k, k, k})
                .stride(init.arg_int("stride"))
                .padding(init.arg_int("padding"))
                .output_padding(init.arg_int("output_padding"))));
    multiplier = register_parameter("multiplier", torch::randn(init.arg_ints("multiplier_shape")));
    max_pool = register_module("max_pool", torch::nn::MaxPool3d(2));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = torch::leaky_relu(conv_transpose(x), 0.2);
    y = y * multiplier;  // multiplier (out_channels, 1, 1, 1)
    y = torch::leaky_relu(y, 0.2);
    return max_pool(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
