// KernelBench level 2, task 95: Linear, add a per-feature vector, Swish, tanh, exact GELU, Hardtanh [-1, 1].
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear matmul{nullptr};
  at::Tensor add_value;
  explicit Model(const kloop::ModuleInit& init) {
    matmul = register_module("matmul", torch::nn::Linear(init.arg_int("in_features"), init.arg_int("out_features")));
    add_value = register_parameter("add_value", torch::randn(init.arg_ints("add_value_shape")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = matmul(x) + add_value;
    y = torch::sigmoid(y) * y;
    y = torch::tanh(y);
    y = torch::gelu(y);
    return torch::hardtanh(y, /*min_val=*/-1.0, /*max_val=*/1.0);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
