// KernelBench level 2, task 20: ConvTranspose3d output c, then ((c + bias) + c) * c + c.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose3d conv_transpose{nullptr};
  at::Tensor bias;
  explicit Model(const kloop::ModuleInit& init) {
    conv_transpose = register_module(
        "conv_transpose",
        torch::nn::ConvTranspose3d(torch::nn::ConvTranspose3dOptions(init.arg_int("in_channels"),
                                                                     init.arg_int("out_channels"),
                                                                     init.arg_int("kernel_size"))
                                       .stride(init.arg_int("stride"))
                                       .padding(init.arg_int("padding"))
                                       .output_padding(init.arg_int("output_padding"))));
    bias = register_parameter("bias", torch::randn(init.arg_ints("bias_shape")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv_transpose(x);
    const at::Tensor original_x = y.clone().detach();
    y = y + bias;
    y = y + original_x;
    y = y * original_x;
    return y + original_x;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
