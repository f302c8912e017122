// KernelBench level 2, task 32: Conv2d, scale, then the minimum over channels (keepdim).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv{nullptr};
  double scale_factor;
  explicit Model(const kloop::ModuleInit& init) : scale_factor(init.arg_float("scale_factor")) {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(
                                       init.arg_int("in_channels"), init.arg_int("out_channels"),
                                       init.arg_int("kernel_size"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv(x);
    y = y * scale_factor;
    return std::get<0>(torch::min(y, /*dim=*/1, /*keepdim=*/true));
  }
};
KLOOP_REGISTER_REFERENCE(Model)
