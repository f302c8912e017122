// KernelBench level 1, task 70: ConvTranspose3d with a cubic kernel (defaults: stride 1, no padding,
// no output padding, dilation 1, groups 1, no bias).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose3d conv_transpose3d{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t k = init.arg_int("kernel_size");
    conv_transpose3d = register_module(
        "conv_transpose3d",
        torch::nn::ConvTranspose3d(
            torch::nn::ConvTranspose3dOptions(init.arg_int("in_channels"), init.arg_int("out_channels"), {k, k, k})
                .stride(init.arg_int("stride"))
                .padding(init.arg_int("padding"))
                .output_padding(init.arg_int("output_padding"))
                .dilation(init.arg_int("dilation"))
                .groups(init.arg_int("groups"))
                .bias(init.arg_bool("bias"))));
  }
  at::Tensor forward(const at::Tensor& x) { return conv_transpose3d(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
