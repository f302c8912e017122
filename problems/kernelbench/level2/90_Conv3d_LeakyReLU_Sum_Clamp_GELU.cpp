// KernelBench level 2, task 90: Conv3d, LeakyReLU(0.2), add a per-channel tensor, clamp [-1, 1], exact GELU.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv3d conv{nullptr};
  at::Tensor sum_tensor;
  explicit Model(const kloop::ModuleInit& init) {
    conv = register_module("conv", torch::nn::Conv3d(init.arg_int("in_channels"), init.arg_int("out_channels"),
                                                     init.arg_int("kernel_size")));
    sum_tensor = register_parameter("sum_tensor", torch::randn(init.arg_ints("sum_tensor_shape")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = torch::leaky_relu(conv(x), /*negative_slope=*/0.2);
    y = y + sum_tensor;
    y = torch::clamp(y, -1.0, 1.0);
    return torch::gelu(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
