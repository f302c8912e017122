// KernelBench level 2, task 80: Linear, max over features (keepdim), subtract the mean over dim 1, exact GELU.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear gemm{nullptr};
  int64_t max_dim;
  explicit Model(const kloop::ModuleInit& init) : max_dim(init.arg_int("max_dim")) {
    gemm = register_module("gemm", torch::nn::Linear(init.arg_int("in_features"), init.arg_int("out_features")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = std::get<0>(torch::max(gemm(x), max_dim, /*keepdim=*/true));
    y = y - y.mean(/*dim=*/{1}, /*keepdim=*/true);
    return torch::gelu(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
