// KernelBench level 2, task 30: Linear, GroupNorm over feature groups, then Hardtanh.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear gemm{nullptr};
  torch::nn::GroupNorm group_norm{nullptr};
  double hardtanh_min, hardtanh_max;
  explicit Model(const kloop::ModuleInit& init)
      : hardtanh_min(init.arg_float("hardtanh_min")), hardtanh_max(init.arg_float("hardtanh_max")) {
    const int64_t out_features = init.arg_int("out_features");
    gemm = register_module("gemm", torch::nn::Linear(init.arg_int("in_features"), out_features));
    group_norm = register_module(
        "group_norm", torch::nn::GroupNorm(torch::nn::GroupNormOptions(init.arg_int("num_groups"), out_features)));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = gemm(x);
    y = group_norm(y);
    return torch::hardtanh(y, hardtanh_min, hardtanh_max);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
