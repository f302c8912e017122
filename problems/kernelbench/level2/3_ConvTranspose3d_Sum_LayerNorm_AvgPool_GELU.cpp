// KernelBench level 2, task 3: ConvTranspose3d, add a scalar parameter, LayerNorm over the last dim,
// AvgPool3d, GELU (exact erf form).
#include <kloop/reference_api.h>

namespace {
torch::ExpandingArray<3> ints3(const kloop::ModuleInit& init, const char* name) {
  const std::vector<int64_t> v = init.arg_ints(name);
  return torch::ExpandingArray<3>(at::IntArrayRef(v));
}
}  // namespace

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose3d conv_transpose{nullptr};
  at::Tensor sum_weight;
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::AvgPool3d avg_pool{nullptr};
  torch::nn::GELU gelu{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    conv_transpose = register_module(
        "conv_transpose",
        torch::nn::ConvTranspose3d(torch::nn::ConvTranspose3dOptions(init.arg_int("in_channels"),
                                                                     init.arg_int("out_channels"),
                                                                     ints3(init, "kernel_size"))
                                       .stride(ints3(init, "stride"))
                                       .padding(ints3(init, "padding"))
                                       .output_padding(ints3(init, "output_padding"))));
    sum_weight = register_parameter("sum_weight", torch::tensor(init.arg_float("sum_weight"), torch::kFloat32));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions(init.arg_ints("norm_shape"))));
    avg_pool = register_module("avg_pool", torch::nn::AvgPool3d(torch::nn::AvgPool3dOptions(ints3(init, "pool_kernel_size"))));
    gelu = register_module("gelu", torch::nn::GELU());
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv_transpose(x);
    y = y + sum_weight;
    y = norm(y);
    y = avg_pool(y);
    return gelu(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
