// KernelBench level 2, task 73: Conv2d, BatchNorm2d in training mode, times a scalar.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
  double scaling_factor;
  explicit Model(const kloop::ModuleInit& init) : scaling_factor(init.arg_float("scaling_factor")) {
    const int64_t out_channels = init.arg_int("out_channels");
    conv = register_module("conv", torch::nn::Conv2d(init.arg_int("in_channels"), out_channels,
                                                     init.arg_int("kernel_size")));
    bn = register_module("bn", torch::nn::BatchNorm2d(out_channels));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = bn(conv(x));  // batch statistics (training mode)
    return y * scaling_factor;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
