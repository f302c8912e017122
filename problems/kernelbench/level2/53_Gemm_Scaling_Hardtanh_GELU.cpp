// KernelBench level 2, task 53: Linear, times a scalar, hardtanh(min, max), exact GELU.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear gemm{nullptr};
  double scaling_factor, hardtanh_min, hardtanh_max;
  explicit Model(const kloop::ModuleInit& init)
      : scaling_factor(init.arg_float("scaling_factor")),
        hardtanh_min(init.arg_float("hardtanh_min")),
        hardtanh_max(init.arg_float("hardtanh_max")) {
    gemm = register_module("gemm", torch::nn::Linear(init.arg_int("in_features"), init.arg_int("out_features")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = gemm(x) * scaling_factor;
    y = torch::hardtanh(y, hardtanh_min, hardtanh_max);
    return torch::gelu(y);  // exact (erf) GELU
  }
};
KLOOP_REGISTER_REFERENCE(Model)
