// KernelBench level 2, task 31: Conv2d, min with a constant, add a learned per-channel bias, scale.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv{nullptr};
  double constant_value, scaling_factor;
  at::Tensor bias;
  explicit Model(const kloop::ModuleInit& init)
      : constant_value(init.arg_float("constant_value")), scaling_factor(init.arg_float("scaling_factor")) {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(
                                       init.arg_int("in_channels"), init.arg_int("out_channels"),
                                       init.arg_int("kernel_size"))));
    bias = register_parameter("bias", torch::randn(init.arg_ints("bias_shape")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv(x);
    y = torch::minimum(y, torch::scalar_tensor(constant_value, y.options()));
    y = y + bias;
    return y * scaling_factor;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
