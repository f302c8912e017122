// KernelBench level 2, task 6: Conv3d, softmax over channels, then two MaxPool3d layers.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv3d conv{nullptr};
  torch::nn::MaxPool3d pool1{nullptr};
  torch::nn::MaxPool3d pool2{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    conv = register_module("conv", torch::nn::Conv3d(torch::nn::Conv3dOptions(
                                       init.arg_int("in_channels"), init.arg_int("out_channels"),
                                       init.arg_int("kernel_size"))));
    const int64_t p = init.arg_int("pool_kernel_size");
    pool1 = register_module("pool1", torch::nn::MaxPool3d(torch::nn::MaxPool3dOptions(p)));
    pool2 = register_module("pool2", torch::nn::MaxPool3d(torch::nn::MaxPool3dOptions(p)));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv(x);
    y = torch::softmax(y, /*dim=*/1);
    y = pool1(y);
    return pool2(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
