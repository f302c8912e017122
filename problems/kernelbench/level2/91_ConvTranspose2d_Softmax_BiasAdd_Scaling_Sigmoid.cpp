// KernelBench level 2, task 91: ConvTranspose2d, softmax over channels, per-channel bias add, scale, sigmoid.
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
    at::Tensor y = torch::softmax(conv_transpose(x), /*dim=*/1);
    y = y + bias;
    y = y * scaling_factor;
    return torch::sigmoid(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
