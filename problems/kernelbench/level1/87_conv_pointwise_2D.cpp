// KernelBench level 1, task 87: pointwise (1x1) Conv2d, no bias. The layer is called conv1d, as upstream.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv1d{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    conv1d = register_module(
        "conv1d",
        torch::nn::Conv2d(torch::nn::Conv2dOptions(init.arg_int("in_channels"), init.arg_int("out_channels"), 1)
                              .stride(1)
                              .padding(0)
                              .bias(init.arg_bool("bias"))));
  }
  at::Tensor forward(const at::Tensor& x) { return conv1d(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
