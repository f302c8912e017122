// KernelBench level 2, task 13: ConvTranspose3d, mean over depth, learned bias add, softmax over
// channels, tanh, scaling.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose3d conv_transpose{nullptr};
  at::Tensor bias;
  double scaling_factor;
  explicit Model(const kloop::ModuleInit& init) : scaling_factor(init.arg_float("scaling_factor")) {
    const int64_t out_channels = init.arg_int("out_channels");
    conv_transpose = register_module(
        "conv_transpose",
        torch::nn::ConvTranspose3d(torch::nn::ConvTranspose3dOptions(init.arg_int("in_channels"), out_channels,
                                                                     init.arg_int("kernel_size"))
                                       .stride(init.arg_int("stride"))
                                       .padding(init.arg_int("padding"))));
    bias = register_parameter("bias", torch::randn({1, out_channels, 1, 1, 1}));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv_transpose(x);
    y = y.mean(/*dim=*/{2}, /*keepdim=*/true);
    y = y + bias;
    y = torch::softmax(y, /*dim=*/1);
    y = torch::tanh(y);
    return y * scaling_factor;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
