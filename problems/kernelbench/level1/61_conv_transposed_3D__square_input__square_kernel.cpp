// KernelBench level 1, task 61: ConvTranspose3d with a cubic kernel (defaults: stride 1, no
// padding, no output padding, groups 1, no bias).
#include <kloop/reference_api.h>

namespace {
int64_t int_or(const kloop::ModuleInit& init, const char* name, int64_t fallback) {
  return init.has_arg(name) ? init.arg_int(name) : fallback;
}
}  // namespace

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose3d conv_transpose3d{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t k = init.arg_int("kernel_size");
    conv_transpose3d = register_module(
        "conv_transpose3d",
        torch::nn::ConvTranspose3d(torch::nn::ConvTranspose3dOptions(init.arg_int("in_channels"),
                                                                     init.arg_int("out_channels"), {k, k, k})
                                       .stride(int_or(init, "stride", 1))
                                       .padding(int_or(init, "padding", 0))
                                       .output_padding(int_or(init, "output_padding", 0))
                                       .groups(int_or(init, "groups", 1))
                                       .bias(init.has_arg("bias") ? init.arg_bool("bias") : false)));
  }
  at::Tensor forward(const at::Tensor& x) { return conv_transpose3d(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
