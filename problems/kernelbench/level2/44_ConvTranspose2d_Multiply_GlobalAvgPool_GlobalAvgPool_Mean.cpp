// KernelBench level 2, task 44: ConvTranspose2d, multiply by a scalar, then the spatial mean twice.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose2d conv_transpose{nullptr};
  double multiplier;
  explicit Model(const kloop::ModuleInit& init) : multiplier(init.arg_float("multiplier")) {
    conv_transpose = register_module(
        "conv_transpose",
        torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(init.arg_int("in_channels"),
                                                                     init.arg_int("out_channels"),
                                                                     init.arg_int("kernel_size"))
                                       .stride(init.arg_int("stride"))
                                       .padding(init.arg_int("padding"))
                                       .output_padding(init.arg_int("output_padding"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv_transpose(x);
    y = y * multiplier;
    y = torch::mean(y, {2, 3}, /*keepdim=*/true);  // first global average pooling
    return torch::mean(y, {2, 3}, /*keepdim=*/true);  // second, over the 1 x 1 map
  }
};
KLOOP_REGISTER_REFERENCE(Model)
