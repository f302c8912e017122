// KernelBench level 2, task 64: Linear, logsumexp over the features, LeakyReLU twice, exact GELU twice.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear linear{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    linear = register_module("linear", torch::nn::Linear(torch::nn::LinearOptions(init.arg_int("in_features"),
                                                                                   init.arg_int("out_features"))
                                                             .bias(init.arg_bool("bias"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = linear(x);
    y = torch::logsumexp(y, /*dim=*/1, /*keepdim=*/true);  // (batch, 1)
    y = torch::leaky_relu(y, 0.01);
    y = torch::leaky_relu(y, 0.01);
    y = torch::gelu(y);
    return torch::gelu(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
