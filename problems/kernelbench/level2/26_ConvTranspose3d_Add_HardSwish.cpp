// KernelBench level 2, task 26: ConvTranspose3d, add a second input, then y * hardswish(y).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose3d conv_transpose{nullptr};
  at::Tensor bias;  // registered as upstream does, but unused in forward (as upstream)
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
  at::Tensor forward(const at::Tensor& x, const at::Tensor& add_input) {
    at::Tensor y = conv_transpose(x);
    y = y + add_input;
    return y * torch::hardswish(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
