// KernelBench level 1, task 62: Conv2d with a (kh, kw) kernel and scalar stride, padding and
// dilation (defaults: stride 1, no padding, dilation 1, groups 1, no bias).
#include <kloop/reference_api.h>

namespace {
template <size_t D>
torch::ExpandingArray<D> ints_arg(const kloop::ModuleInit& init, const char* name) {
  const std::vector<int64_t> v = init.arg_ints(name);
  return torch::ExpandingArray<D>(at::IntArrayRef(v));
}
int64_t int_or(const kloop::ModuleInit& init, const char* name, int64_t fallback) {
  return init.has_arg(name) ? init.arg_int(name) : fallback;
}
}  // namespace

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv2d{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    conv2d = register_module(
        "conv2d",
        torch::nn::Conv2d(torch::nn::Conv2dOptions(init.arg_int("in_channels"), init.arg_int("out_channels"),
                                                   ints_arg<2>(init, "kernel_size"))
                              .stride(int_or(init, "stride", 1))
                              .padding(int_or(init, "padding", 0))
                              .dilation(int_or(init, "dilation", 1))
                              .groups(int_or(init, "groups", 1))
                              .bias(init.has_arg("bias") ? init.arg_bool("bias") : false)));
  }
  at::Tensor forward(const at::Tensor& x) { return conv2d(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
