// KernelBench level 2, task 46: Conv2d, subtract, tanh, subtract, then AvgPool2d.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv{nullptr};
  double subtract1_value, subtract2_value;
  torch::nn::AvgPool2d avgpool{nullptr};
  explicit Model(const kloop::ModuleInit& init)
      : subtract1_value(init.arg_float("subtract1_value")), subtract2_value(init.arg_float("subtract2_value")) {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(
                                       init.arg_int("in_channels"), init.arg_int("out_channels"),
                                       init.arg_int("kernel_size"))));
    // stride defaults to the window, as in nn.AvgPool2d
    avgpool = register_module("avgpool",
                              torch::nn::AvgPool2d(torch::nn::AvgPool2dOptions(init.arg_int("kernel_size_pool"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv(x);
    y = y - subtract1_value;
    y = torch::tanh(y);
    y = y - subtract2_value;
    return avgpool(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
