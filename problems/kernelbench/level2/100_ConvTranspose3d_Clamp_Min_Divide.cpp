// KernelBench level 2, task 100: ConvTranspose3d, clamp from below, divide by a scalar.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose3d conv_transpose{nullptr};
  double min_value, divisor;
  explicit Model(const kloop::ModuleInit& init)
      : min_value(init.arg_float("min_value")), divisor(init.arg_float("divisor")) {
    conv_transpose = register_module(
        "conv_transpose",
        torch::nn::ConvTranspose3d(torch::nn::ConvTranspose3dOptions(init.arg_int("in_channels"),
                                                                     init.arg_int("out_channels"),
                                                                     init.arg_int("kernel_size"))
                                       .stride(init.arg_int("stride"))
                                       .padding(init.arg_int("padding"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = torch::clamp_min(conv_transpose(x), min_value);
    return y / divisor;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
