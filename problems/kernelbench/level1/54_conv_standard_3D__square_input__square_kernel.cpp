// KernelBench level 1, task 54: Conv3d with a cubic kernel (defaults: stride 1, no padding,
// dilation 1, groups 1, no bias).
#include <kloop/reference_api.h>

namespace {
int64_t int_or(const kloop::ModuleInit& init, const char* name, int64_t fallback) {
  return init.has_arg(name) ? init.arg_int(name) : fallback;
}
}  // namespace

struct Model : torch::nn::Module {
  torch::nn::Conv3d conv3d{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t k = init.arg_int("kernel_size");
    conv3d = register_module(
        "conv3d",
        torch::nn::Conv3d(
            torch::nn::Conv3dOptions(init.arg_int("in_channels"), init.arg_int("out_channels"), {k, k, k})
                .stride(int_or(init, "stride", 1))
                .padding(int_or(init, "padding", 0))
                .dilation(int_or(init, "dilation", 1))
                .groups(int_or(init, "groups", 1))
                .bias(init.has_arg("bias") ? init.arg_bool("bias") : false)));
  }
  at::Tensor forward(const at::Tensor& x) { return conv3d(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
