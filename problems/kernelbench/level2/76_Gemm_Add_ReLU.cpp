// KernelBench level 2, task 76: Linear without bias, add a learned bias vector, ReLU.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear gemm{nullptr};
  at::Tensor bias;
  explicit Model(const kloop::ModuleInit& init) {
    gemm = register_module(
        "gemm", torch::nn::Linear(
                    torch::nn::LinearOptions(init.arg_int("in_features"), init.arg_int("out_features")).bias(false)));
    bias = register_parameter("bias", torch::randn(init.arg_ints("bias_shape")));
  }
  at::Tensor forward(const at::Tensor& x) { return torch::relu(gemm(x) + bias); }
};
KLOOP_REGISTER_REFERENCE(Model)
