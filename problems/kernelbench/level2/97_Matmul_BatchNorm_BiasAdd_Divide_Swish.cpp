// KernelBench level 2, task 97: Linear, BatchNorm1d (batch statistics), scalar bias add, divide, Swish.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear matmul{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
  at::Tensor bias;
  double divide_value;
  explicit Model(const kloop::ModuleInit& init) : divide_value(init.arg_float("divide_value")) {
    const int64_t out_features = init.arg_int("out_features");
    matmul = register_module("matmul", torch::nn::Linear(init.arg_int("in_features"), out_features));
    bn = register_module("bn", torch::nn::BatchNorm1d(torch::nn::BatchNorm1dOptions(out_features)
                                                          .eps(init.arg_float("bn_eps"))
                                                          .momentum(init.arg_float("bn_momentum"))));
    bias = register_parameter("bias", torch::randn(init.arg_ints("bias_shape")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = bn(matmul(x));
    y = y + bias;
    y = y / divide_value;
    return y * torch::sigmoid(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
