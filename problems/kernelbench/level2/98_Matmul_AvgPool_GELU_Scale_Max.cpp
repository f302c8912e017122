// KernelBench level 2, task 98: Linear, AvgPool1d over features, exact GELU, scale, max over features.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear matmul{nullptr};
  torch::nn::AvgPool1d avg_pool{nullptr};
  double scale_factor;
  explicit Model(const kloop::ModuleInit& init) : scale_factor(init.arg_float("scale_factor")) {
    matmul = register_module("matmul", torch::nn::Linear(init.arg_int("in_features"), init.arg_int("out_features")));
    avg_pool = register_module(
        "avg_pool", torch::nn::AvgPool1d(torch::nn::AvgPool1dOptions(init.arg_int("pool_kernel_size"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = avg_pool(matmul(x).unsqueeze(1)).squeeze(1);
    y = torch::gelu(y);
    y = y * scale_factor;
    return std::get<0>(torch::max(y, /*dim=*/1));
  }
};
KLOOP_REGISTER_REFERENCE(Model)
