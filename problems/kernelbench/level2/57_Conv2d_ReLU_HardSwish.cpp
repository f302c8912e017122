// KernelBench level 2, task 57: Conv2d, ReLU, then x * clamp((x + 3) / 6, 0, 1) (HardSwish).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    conv = register_module("conv", torch::nn::Conv2d(init.arg_int("in_channels"), init.arg_int("out_channels"),
                                                     init.arg_int("kernel_size")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = torch::relu(conv(x));
    return y * torch::clamp((y + 3) / 6, 0, 1);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
