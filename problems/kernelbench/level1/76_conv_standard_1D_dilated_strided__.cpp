// KernelBench level 1, task 76: Conv1d with stride and dilation, no padding, no bias.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv1d conv1d{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    conv1d = register_module(
        "conv1d",
        torch::nn::Conv1d(torch::nn::Conv1dOptions(init.arg_int("in_channels"), init.arg_int("out_channels"),
                                                   init.arg_int("kernel_size"))
                              .stride(init.arg_int("stride"))
                              .dilation(init.arg_int("dilation"))
                              .bias(init.arg_bool("bias"))));
  }
  at::Tensor forward(const at::Tensor& x) { return conv1d(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
