// KernelBench level 1, task 86: depthwise-separable Conv2d (depthwise then 1x1 pointwise), no biases.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d depthwise{nullptr};
  torch::nn::Conv2d pointwise{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t c = init.arg_int("in_channels");
    const bool bias = init.arg_bool("bias");
    depthwise = register_module(
        "depthwise",
        torch::nn::Conv2d(torch::nn::Conv2dOptions(c, c, init.arg_int("kernel_size"))
                              .stride(init.arg_int("stride"))
                              .padding(init.arg_int("padding"))
                              .dilation(init.arg_int("dilation"))
                              .groups(c)
                              .bias(bias)));
    pointwise = register_module(
        "pointwise",
        torch::nn::Conv2d(torch::nn::Conv2dOptions(c, init.arg_int("out_channels"), 1).bias(bias)));
  }
  at::Tensor forward(const at::Tensor& x) { return pointwise(depthwise(x)); }
};
KLOOP_REGISTER_REFERENCE(Model)
