// KernelBench level 2, task 7: Conv3d, ReLU, LeakyReLU(0.01), GELU (exact), sigmoid, learned bias add.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv3d conv{nullptr};
  at::Tensor bias;
  explicit Model(const kloop::ModuleInit& init) {
    conv = register_module("conv", torch::nn::Conv3d(torch::nn::Conv3dOptions(
                                       init.arg_int("in_channels"), init.arg_int("out_channels"),
                                       init.arg_int("kernel_size"))));
    bias = register_parameter("bias", torch::randn(init.arg_ints("bias_shape")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv(x);
    y = torch::relu(y);
    y = torch::leaky_relu(y, /*negative_slope=*/0.01);
    y = torch::gelu(y);
    y = torch::sigmoid(y);
    return y + bias;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
