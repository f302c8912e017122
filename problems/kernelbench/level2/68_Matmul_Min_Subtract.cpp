// KernelBench level 2, task 68: Linear, elementwise min with a learned scalar, minus that scalar.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear linear{nullptr};
  at::Tensor constant;
  explicit Model(const kloop::ModuleInit& init) {
    linear = register_module("linear", torch::nn::Linear(init.arg_int("in_features"), init.arg_int("out_features")));
    constant = register_parameter("constant", torch::tensor(init.arg_float("constant")));  // 0-dim
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = torch::min(linear(x), constant);  // elementwise minimum
    return y - constant;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
