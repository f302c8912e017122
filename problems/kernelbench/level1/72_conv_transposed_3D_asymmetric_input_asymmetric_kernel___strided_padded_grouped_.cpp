// KernelBench level 1, task 72: grouped ConvTranspose3d with an asymmetric kernel and per-axis stride,
// padding and output padding.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose3d conv_transpose3d{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    conv_transpose3d = register_module(
        "conv_transpose3d",
        torch::nn::ConvTranspose3d(
            torch::nn::ConvTranspose3dOptions(init.arg_int("in_channels"), init.arg_int("out_channels"),
                                              init.arg_ints("kernel_size"))
                .stride(init.arg_ints("stride"))
                .padding(init.arg_ints("padding"))
                .output_padding(init.arg_ints("output_padding"))
                .groups(init.arg_int("groups"))
                .bias(init.arg_bool("bias"))));
  }
  at::Tensor forward(const at::Tensor& x) { return conv_transpose3d(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
