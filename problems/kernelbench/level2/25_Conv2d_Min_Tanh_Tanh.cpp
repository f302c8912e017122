// KernelBench level 2, task 25: Conv2d, minimum over channels (keepdim), tanh twice.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(
                                       init.arg_int("in_channels"), init.arg_int("out_channels"),
                                       init.arg_int("kernel_size"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv(x);
    y = std::get<0>(torch::min(y, /*dim=*/1, /*keepdim=*/true));
    y = torch::tanh(y);
    return torch::tanh(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
