// KernelBench level 2, task 36: ConvTranspose2d, min over channels, sum over height, exact GELU, add a bias.
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
    y = std::get<0>(torch::min(y, /*dim=*/1, /*keepdim=*/true));
    y = torch::sum(y, {2}, /*keepdim=*/true);
    y = torch::gelu(y);  // exact (erf) GELU
    return y + bias;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
