// KernelBench level 1, task 64: ConvTranspose1d (defaults: stride 1, no padding, no output
// padding, groups 1, no bias).
#include <kloop/reference_api.h>

namespace {
int64_t int_or(const kloop::ModuleInit& init, const char* name, int64_t fallback) {
  return init.has_arg(name) ? init.arg_int(name) : fallback;
}
}  // namespace

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose1d conv1d_transpose{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    conv1d_transpose = register_module(
        "conv1d_transpose",
        torch::nn::ConvTranspose1d(torch::nn::ConvTranspose1dOptions(init.arg_int("in_channels"),
                                                                     init.arg_int("out_channels"),
                                                                     init.arg_int("kernel_size"))
                                       .stride(int_or(init, "stride", 1))
                                       .padding(int_or(init, "padding", 0))
                                       .output_padding(int_or(init, "output_padding", 0))
                                       .groups(int_or(init, "groups", 1))
                                       .bias(init.has_arg("bias") ? init.arg_bool("bias") : false)));
  }
  at::Tensor forward(const at::Tensor& x) { return conv1d_transpose(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
