// KernelBench level 1, task 68: ConvTranspose3d with a three-extent kernel and per-axis stride,
// padding and output padding (defaults: stride (1, 1, 1), no padding, no output padding,
// groups 1, no bias).
#include <kloop/reference_api.h>

namespace {
template <size_t D>
torch::ExpandingArray<D> ints_arg(const kloop::ModuleInit& init, const char* name) {
  const std::vector<int64_t> v = init.arg_ints(name);
  return torch::ExpandingArray<D>(at::IntArrayRef(v));
}
template <size_t D>
torch::ExpandingArray<D> ints_or(const kloop::ModuleInit& init, const char* name, int64_t fallback) {
  return init.has_arg(name) ? ints_arg<D>(init, name) : torch::ExpandingArray<D>(fallback);
}
int64_t int_or(const kloop::ModuleInit& init, const char* name, int64_t fallback) {
  return init.has_arg(name) ? init.arg_int(name) : fallback;
}
}  // namespace

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose3d conv_transpose3d{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    conv_transpose3d = register_module(
        "conv_transpose3d",
        torch::nn::ConvTranspose3d(torch::nn::ConvTranspose3dOptions(init.arg_int("in_channels"),
                                                                     init.arg_int("out_channels"),
                                                                     ints_arg<3>(init, "kernel_size"))
                                       .stride(ints_or<3>(init, "stride", 1))
                                       .padding(ints_or<3>(init, "padding", 0))
                                       .output_padding(ints_or<3>(init, "output_padding", 0))
                                       .groups(int_or(init, "groups", 1))
                                       .bias(init.has_arg("bias") ? init.arg_bool("bias") : false)));
  }
  at::Tensor forward(const at::Tensor& x) { return conv_transpose3d(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
