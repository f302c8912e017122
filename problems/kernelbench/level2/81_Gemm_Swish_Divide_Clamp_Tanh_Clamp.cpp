// KernelBench level 2, task 81: Linear, Swish, divide by 2, clamp [-1, 1], tanh, clamp [-1, 1].
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear gemm{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    gemm = register_module(
        "gemm", torch::nn::Linear(torch::nn::LinearOptions(init.arg_int("in_features"), init.arg_int("out_features"))
                                      .bias(init.arg_bool("bias"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = gemm(x);
    y = y * torch::sigmoid(y);
    y = y / 2.0;
    y = torch::clamp(y, -1.0, 1.0);
    y = torch::tanh(y);
    return torch::clamp(y, -1.0, 1.0);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
