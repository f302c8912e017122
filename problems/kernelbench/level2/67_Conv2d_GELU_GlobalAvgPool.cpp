// KernelBench level 2, task 67: Conv2d, exact GELU, global average pooling to (batch, out_channels).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    conv = register_module("conv", torch::nn::Conv2d(init.arg_int("in_channels"), init.arg_int("out_channels"),
                                                     init.arg_int("kernel_size")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = torch::gelu(conv(x));                 // exact (erf) GELU
    y = torch::adaptive_avg_pool2d(y, {1, 1});
    return y.squeeze(-1).squeeze(-1);                    // (batch, out_channels)
  }
};
KLOOP_REGISTER_REFERENCE(Model)
