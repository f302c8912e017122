// KernelBench level 2, task 35: Conv2d, subtract a constant, HardSwish, MaxPool2d, then Mish.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv{nullptr};
  torch::nn::MaxPool2d pool{nullptr};
  double subtract_value;
  explicit Model(const kloop::ModuleInit& init) : subtract_value(init.arg_float("subtract_value")) {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(
                                       init.arg_int("in_channels"), init.arg_int("out_channels"),
                                       init.arg_int("kernel_size"))));
    // stride defaults to the window, as in nn.MaxPool2d
    pool = register_module("pool", torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(init.arg_int("pool_kernel_size"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv(x);
    y = y - subtract_value;
    y = torch::hardswish(y);
    y = pool(y);
    return torch::mish(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
