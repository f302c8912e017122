// KernelBench level 2, task 14: x W^T (bias-free), divide by 2, sum over the hidden dim, scaling.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  at::Tensor weight;
  double scaling_factor;
  explicit Model(const kloop::ModuleInit& init) : scaling_factor(init.arg_float("scaling_factor")) {
    weight = register_parameter("weight", torch::randn({init.arg_int("hidden_size"), init.arg_int("input_size")}));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = torch::matmul(x, weight.t());
    y = y / 2;
    y = torch::sum(y, /*dim=*/{1}, /*keepdim=*/true);
    return y * scaling_factor;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
