// KernelBench level 2, task 24: Conv3d, minimum over one dim (depth), softmax over channels.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv3d conv{nullptr};
  int64_t dim;
  explicit Model(const kloop::ModuleInit& init) : dim(init.arg_int("dim")) {
    conv = register_module("conv", torch::nn::Conv3d(torch::nn::Conv3dOptions(
                                       init.arg_int("in_channels"), init.arg_int("out_channels"),
                                       init.arg_int("kernel_size"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv(x);
    y = std::get<0>(torch::min(y, dim));
    return torch::softmax(y, /*dim=*/1);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
