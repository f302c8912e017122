// KernelBench level 2, task 2: ConvTranspose2d, bias add, clamp [0, 1], scale, clamp [0, 1], divide by the scale.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose2d conv_transpose{nullptr};
  at::Tensor bias;
  double scaling_factor;
  explicit Model(const kloop::ModuleInit& init) : scaling_factor(init.arg_float("scaling_factor")) {
    conv_transpose = register_module(
        "conv_transpose",
        torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(init.arg_int("in_channels"),
                                                                     init.arg_int("out_channels"),
                                                                     init.arg_int("kernel_size"))
                                       .stride(init.arg_int("stride"))
                                       .padding(init.arg_int("padding"))
                                       .output_padding(init.arg_int("output_padding"))));
    bias = register_parameter("bias", torch::randn(init.arg_ints("bias_shape")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv_transpose(x);
    y = y + bias;
    y = torch::clamp(y, 0.0, 1.0);
    y = y * scaling_factor;
    y = torch::clamp(y, 0.0, 1.0);
    return y / scaling_factor;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
