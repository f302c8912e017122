// KernelBench level 1, task 74: ConvTranspose1d with stride, padding and dilation, no bias.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose1d conv1d_transpose{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    conv1d_transpose = register_module(
        "conv1d_transpose",
        torch::nn::ConvTranspose1d(
            torch::nn::ConvTranspose1dOptions(init.arg_int("in_channels"), init.arg_int("out_channels"),
                                              init.arg_int("kernel_size"))
                .stride(init.arg_int("stride"))
                .padding(init.arg_int("padding"))
                .dilation(init.arg_int("dilation"))
                .bias(init.arg_bool("bias"))));
  }
  at::Tensor forward(const at::Tensor& x) { return conv1d_transpose(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
