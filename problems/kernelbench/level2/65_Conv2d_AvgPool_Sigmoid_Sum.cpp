// KernelBench level 2, task 65: Conv2d, AvgPool2d, sigmoid, sum over channels and pixels.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv{nullptr};
  torch::nn::AvgPool2d avg_pool{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    conv = register_module("conv", torch::nn::Conv2d(init.arg_int("in_channels"), init.arg_int("out_channels"),
                                                     init.arg_int("kernel_size")));
    avg_pool = register_module("avg_pool", torch::nn::AvgPool2d(init.arg_int("pool_kernel_size")));  // stride = kernel
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = torch::sigmoid(avg_pool(conv(x)));
    return torch::sum(y, /*dim=*/{1, 2, 3});  // (batch,)
  }
};
KLOOP_REGISTER_REFERENCE(Model)
