// KernelBench level 2, task 54: Conv2d, times a learned per-channel multiplier, LeakyReLU(0.01), exact GELU.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv{nullptr};
  at::Tensor multiplier;
  explicit Model(const kloop::ModuleInit& init) {
    conv = register_module("conv", torch::nn::Conv2d(init.arg_int("in_channels"), init.arg_int("out_channels"),
                                                     init.arg_int("kernel_size")));
    multiplier = register_parameter("multiplier", torch::randn(init.arg_ints("multiplier_shape")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv(x) * multiplier;     // multiplier (out_channels, 1, 1)
    y = torch::leaky_relu(y, /*negative_slope=*/0.01);
    return torch::gelu(y);                   // exact (erf) GELU
  }
};
KLOOP_REGISTER_REFERENCE(Model)
