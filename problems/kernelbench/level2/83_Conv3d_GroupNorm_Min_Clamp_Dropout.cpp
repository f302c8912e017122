// KernelBench level 2, task 83: Conv3d, GroupNorm, minimum with min_value, clamp, dropout (identity).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv3d conv{nullptr};
  torch::nn::GroupNorm norm{nullptr};
  double min_value, max_value;
  explicit Model(const kloop::ModuleInit& init)
      : min_value(init.arg_float("min_value")), max_value(init.arg_float("max_value")) {
    const int64_t out_channels = init.arg_int("out_channels");
    conv = register_module(
        "conv", torch::nn::Conv3d(init.arg_int("in_channels"), out_channels, init.arg_int("kernel_size")));
    norm = register_module("norm", torch::nn::GroupNorm(init.arg_int("groups"), out_channels));
    // Upstream's nn.Dropout(dropout_p) has no state; it is applied as identity (see the spec's deviations).
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = norm(conv(x));
    y = torch::minimum(y, torch::scalar_tensor(min_value, y.options()));
    return torch::clamp(y, min_value, max_value);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
