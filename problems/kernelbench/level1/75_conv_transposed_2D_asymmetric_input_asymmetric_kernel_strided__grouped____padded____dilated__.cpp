// KernelBench level 1, task 75: grouped ConvTranspose2d with an asymmetric kernel and per-axis stride,
// padding and dilation, no bias.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose2d conv_transpose2d{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    conv_transpose2d = register_module(
        "conv_transpose2d",
        torch::nn::ConvTranspose2d(
            torch::nn::ConvTranspose2dOptions(init.arg_int("in_channels"), init.arg_int("out_channels"),
                                              init.arg_ints("kernel_size"))
                .stride(init.arg_ints("stride"))
                .padding(init.arg_ints("padding"))
                .dilation(init.arg_ints("dilation"))
                .groups(init.arg_int("groups"))
                .bias(init.arg_bool("bias"))));
  }
  at::Tensor forward(const at::Tensor& x) { return conv_transpose2d(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
