// KernelBench level 1, task 80: Conv2d with an asymmetric kernel, per-axis padding and dilation, no bias.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv2d{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    conv2d = register_module(
        "conv2d",
        torch::nn::Conv2d(torch::nn::Conv2dOptions(init.arg_int("in_channels"), init.arg_int("out_channels"),
                                                   init.arg_ints("kernel_size"))
                              .stride(init.arg_int("stride"))
                              .padding(init.arg_ints("padding"))
                              .dilation(init.arg_ints("dilation"))
                              .bias(init.arg_bool("bias"))));
  }
  at::Tensor forward(const at::Tensor& x) { return conv2d(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
