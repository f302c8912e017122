// KernelBench level 2, task 55: Linear, MaxPool1d over the features, sum over the features, times a scalar.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear matmul{nullptr};
  torch::nn::MaxPool1d max_pool{nullptr};
  double scale_factor;
  explicit Model(const kloop::ModuleInit& init) : scale_factor(init.arg_float("scale_factor")) {
    matmul = register_module("matmul", torch::nn::Linear(init.arg_int("in_features"), init.arg_int("out_features")));
    max_pool = register_module("max_pool", torch::nn::MaxPool1d(init.arg_int("kernel_size")));  // stride = kernel
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = matmul(x);                          // (batch, out_features)
    y = max_pool(y.unsqueeze(1)).squeeze(1);           // (batch, out_features / kernel_size), floor
    y = torch::sum(y, /*dim=*/1);                      // (batch,)
    return y * scale_factor;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
