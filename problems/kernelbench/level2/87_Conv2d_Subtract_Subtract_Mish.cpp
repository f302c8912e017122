// KernelBench level 2, task 87: Conv2d, subtract two scalars, Mish.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv{nullptr};
  double subtract_value_1, subtract_value_2;
  explicit Model(const kloop::ModuleInit& init)
      : subtract_value_1(init.arg_float("subtract_value_1")), subtract_value_2(init.arg_float("subtract_value_2")) {
    conv = register_module("conv", torch::nn::Conv2d(init.arg_int("in_channels"), init.arg_int("out_channels"),
                                                     init.arg_int("kernel_size")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv(x);
    y = y - subtract_value_1;
    y = y - subtract_value_2;
    return torch::mish(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
