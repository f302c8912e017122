// KernelBench level 2, task 70: Linear, then y + scaling_factor * sigmoid(y).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear gemm{nullptr};
  double scaling_factor;
  explicit Model(const kloop::ModuleInit& init) : scaling_factor(init.arg_float("scaling_factor")) {
    gemm = register_module("gemm", torch::nn::Linear(init.arg_int("input_size"), init.arg_int("hidden_size")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = gemm(x);
    at::Tensor original_x = y;
    y = torch::sigmoid(y) * scaling_factor;
    return y + original_x;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
