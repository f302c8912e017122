// KernelBench level 2, task 69: Conv2d, HardSwish, ReLU.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    conv = register_module("conv", torch::nn::Conv2d(init.arg_int("in_channels"), init.arg_int("out_channels"),
                                                     init.arg_int("kernel_size")));
  }
  at::Tensor forward(const at::Tensor& x) { return torch::relu(torch::hardswish(conv(x))); }
};
KLOOP_REGISTER_REFERENCE(Model)
