// KernelBench level 2, task 47: Conv3d, Mish, then tanh.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv3d conv{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    conv = register_module(
        "conv", torch::nn::Conv3d(torch::nn::Conv3dOptions(init.arg_int("in_channels"), init.arg_int("out_channels"),
                                                           init.arg_int("kernel_size"))
                                      .stride(init.arg_int("stride"))
                                      .padding(init.arg_int("padding"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv(x);
    y = torch::mish(y);
    return torch::tanh(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
