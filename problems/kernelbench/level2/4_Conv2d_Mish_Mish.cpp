// KernelBench level 2, task 4: Conv2d followed by Mish twice.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(
                                       init.arg_int("in_channels"), init.arg_int("out_channels"),
                                       init.arg_int("kernel_size"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv(x);
    y = torch::mish(y);
    return torch::mish(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
