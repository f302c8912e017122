// KernelBench level 1, task 84: depthwise Conv2d (groups = in_channels) with a square kernel, no bias.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv2d{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t in_channels = init.arg_int("in_channels");
    const int64_t k = init.arg_int("kernel_size");
    conv2d = register_module(
        "conv2d",
        torch::nn::Conv2d(torch::nn::Conv2dOptions(in_channels, init.arg_int("out_channels"), {k, k})
                              .stride(init.arg_int("stride"))
                              .padding(init.arg_int("padding"))
                              .groups(in_channels)
                              .bias(init.arg_bool("bias"))));
  }
  at::Tensor forward(const at::Tensor& x) { return conv2d(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
