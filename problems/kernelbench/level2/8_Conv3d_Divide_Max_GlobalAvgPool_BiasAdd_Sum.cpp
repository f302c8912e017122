// KernelBench level 2, task 8: Conv3d, divide, MaxPool3d, global average pool, learned bias add,
// sum over channels.
#include <kloop/reference_api.h>

namespace {
torch::ExpandingArray<3> ints3(const kloop::ModuleInit& init, const char* name) {
  const std::vector<int64_t> v = init.arg_ints(name);
  return torch::ExpandingArray<3>(at::IntArrayRef(v));
}
}  // namespace

struct Model : torch::nn::Module {
  torch::nn::Conv3d conv{nullptr};
  torch::nn::MaxPool3d max_pool{nullptr};
  torch::nn::AdaptiveAvgPool3d global_avg_pool{nullptr};
  at::Tensor bias;
  double divisor;
  int64_t sum_dim;
  explicit Model(const kloop::ModuleInit& init)
      : divisor(init.arg_float("divisor")), sum_dim(init.arg_int("sum_dim")) {
    conv = register_module("conv", torch::nn::Conv3d(torch::nn::Conv3dOptions(
                                       init.arg_int("in_channels"), init.arg_int("out_channels"),
                                       ints3(init, "kernel_size"))));
    max_pool = register_module("max_pool", torch::nn::MaxPool3d(torch::nn::MaxPool3dOptions(ints3(init, "pool_size"))));
    global_avg_pool = register_module(
        "global_avg_pool", torch::nn::AdaptiveAvgPool3d(torch::nn::AdaptiveAvgPool3dOptions({1, 1, 1})));
    bias = register_parameter("bias", torch::randn(init.arg_ints("bias_shape")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv(x);
    y = y / divisor;
    y = max_pool(y);
    y = global_avg_pool(y);
    y = y + bias;
    return torch::sum(y, sum_dim);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
