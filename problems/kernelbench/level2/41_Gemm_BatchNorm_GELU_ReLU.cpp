// KernelBench level 2, task 41: Linear, BatchNorm1d with batch statistics, exact GELU, then ReLU.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear gemm{nullptr};
  torch::nn::BatchNorm1d batch_norm{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t out_features = init.arg_int("out_features");
    gemm = register_module("gemm", torch::nn::Linear(init.arg_int("in_features"), out_features));
    batch_norm = register_module("batch_norm", torch::nn::BatchNorm1d(out_features));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = gemm(x);
    y = batch_norm(y);
    y = torch::gelu(y);  // exact (erf) GELU
    return torch::relu(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
