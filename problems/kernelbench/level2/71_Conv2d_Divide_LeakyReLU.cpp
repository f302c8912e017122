// KernelBench level 2, task 71: Conv2d, divide by a constant, LeakyReLU(0.01).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv{nullptr};
  double divisor;
  explicit Model(const kloop::ModuleInit& init) : divisor(init.arg_float("divisor")) {
    conv = register_module("conv", torch::nn::Conv2d(init.arg_int("in_channels"), init.arg_int("out_channels"),
                                                     init.arg_int("kernel_size")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv(x) / divisor;
    return torch::leaky_relu(y, /*negative_slope=*/0.01);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
