// KernelBench level 1, task 71: ConvTranspose2d with a square kernel (defaults: stride 1, no padding,
// no output padding, groups 1, no bias).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose2d conv_transpose2d{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    conv_transpose2d = register_module(
        "conv_transpose2d",
        torch::nn::ConvTranspose2d(
            torch::nn::ConvTranspose2dOptions(init.arg_int("in_channels"), init.arg_int("out_channels"),
                                              init.arg_int("kernel_size"))
                .stride(init.arg_int("stride"))
                .padding(init.arg_int("padding"))
                .output_padding(init.arg_int("output_padding"))
                .groups(init.arg_int("groups"))
                .bias(init.arg_bool("bias"))));
  }
  at::Tensor forward(const at::Tensor& x) { return conv_transpose2d(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
