// KernelBench level 2, task 5: ConvTranspose2d, subtract a learned per-channel bias, tanh.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose2d conv_transpose{nullptr};
  at::Tensor bias;
  explicit Model(const kloop::ModuleInit& init) {
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
    y = y - bias;
    return torch::tanh(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
