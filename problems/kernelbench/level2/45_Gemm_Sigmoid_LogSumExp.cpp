// KernelBench level 2, task 45: Linear, sigmoid, Linear, then logsumexp over features.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear linear1{nullptr}, linear2{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t hidden_size = init.arg_int("hidden_size");
    linear1 = register_module("linear1", torch::nn::Linear(init.arg_int("input_size"), hidden_size));
    linear2 = register_module("linear2", torch::nn::Linear(hidden_size, init.arg_int("output_size")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = linear1(x);
    y = torch::sigmoid(y);
    y = linear2(y);
    return torch::logsumexp(y, {1});
  }
};
KLOOP_REGISTER_REFERENCE(Model)
