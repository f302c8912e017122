// KernelBench level 1, task 82: depthwise Conv2d (groups = in_channels) with a square kernel, no bias.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv2d{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t c = init.arg_int("in_channels");
    conv2d = register_module(
        "conv2d",
        torch::nn::Conv2d(torch::nn::Conv2dOptions(c, c, init.arg_int("kernel_size"))
                              .stride(init.arg_int("stride"))
                              .padding(init.arg_int("padding"))
                              .groups(c)
                              .bias(init.arg_bool("bias"))));
  }
  at::Tensor forward(const at::Tensor& x) { return conv2d(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
