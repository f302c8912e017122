// KernelBench level 2, task 1: Conv2d, ReLU, then a learned (out_channels, 1, 1) bias add.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv{nullptr};
  at::Tensor bias;
  explicit Model(const kloop::ModuleInit& init) {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(
                                       init.arg_int("in_channels"), init.arg_int("out_channels"),
                                       init.arg_int("kernel_size"))));
    bias = register_parameter("bias", torch::randn(init.arg_ints("bias_shape")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv(x);
    y = torch::relu(y);
    return y + bias;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
