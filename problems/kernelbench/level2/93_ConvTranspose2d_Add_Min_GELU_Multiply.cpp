// KernelBench level 2, task 93: ConvTranspose2d, add a scalar, minimum with 0, exact GELU, multiply by a scalar.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose2d conv_transpose{nullptr};
  double add_value, multiply_value;
  explicit Model(const kloop::ModuleInit& init)
      : add_value(init.arg_float("add_value")), multiply_value(init.arg_float("multiply_value")) {
    conv_transpose = register_module(
        "conv_transpose",
        torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(init.arg_int("in_channels"),
                                                                     init.arg_int("out_channels"),
                                                                     init.arg_int("kernel_size"))
                                       .stride(init.arg_int("stride"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv_transpose(x) + add_value;
    y = torch::minimum(y, torch::scalar_tensor(0.0, y.options()));
    y = torch::gelu(y);
    return y * multiply_value;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
