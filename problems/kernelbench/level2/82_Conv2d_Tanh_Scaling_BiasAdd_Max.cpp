// KernelBench level 2, task 82: Conv2d, tanh, scale, per-channel bias add, MaxPool2d.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv{nullptr};
  torch::nn::MaxPool2d max_pool{nullptr};
  at::Tensor bias;
  double scaling_factor;
  explicit Model(const kloop::ModuleInit& init) : scaling_factor(init.arg_float("scaling_factor")) {
    conv = register_module("conv", torch::nn::Conv2d(init.arg_int("in_channels"), init.arg_int("out_channels"),
                                                     init.arg_int("kernel_size")));
    bias = register_parameter("bias", torch::randn(init.arg_ints("bias_shape")));
    max_pool = register_module("max_pool",
                               torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(init.arg_int("pool_kernel_size"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = torch::tanh(conv(x));
    y = y * scaling_factor;
    y = y + bias;
    return max_pool(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
