// KernelBench level 2, task 52: Conv2d, x * tanh(softplus(x)) (Mish), then BatchNorm2d in training mode.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t out_channels = init.arg_int("out_channels");
    conv = register_module("conv", torch::nn::Conv2d(init.arg_int("in_channels"), out_channels,
                                                     init.arg_int("kernel_size")));
    bn = register_module("bn", torch::nn::BatchNorm2d(torch::nn::BatchNorm2dOptions(out_channels)
                                                          .eps(init.arg_float("eps"))
                                                          .momentum(init.arg_float("momentum"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv(x);
    y = torch::tanh(torch::softplus(y)) * y;  // softplus with beta 1, threshold 20
    return bn(y);                             // batch statistics (training mode)
  }
};
KLOOP_REGISTER_REFERENCE(Model)
