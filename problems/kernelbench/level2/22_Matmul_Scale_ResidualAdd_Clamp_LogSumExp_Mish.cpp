// KernelBench level 2, task 22: Linear, scale, add to itself, clamp, logsumexp over features,
// then y * mish(y).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear matmul{nullptr};
  double scale_factor;
  double clamp_min;
  double clamp_max;
  explicit Model(const kloop::ModuleInit& init)
      : scale_factor(init.arg_float("scale_factor")),
        clamp_min(init.arg_float("clamp_min")),
        clamp_max(init.arg_float("clamp_max")) {
    matmul = register_module("matmul", torch::nn::Linear(init.arg_int("input_size"), init.arg_int("hidden_size")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = matmul(x);
    y = y * scale_factor;
    y = y + y;
    y = torch::clamp(y, clamp_min, clamp_max);
    y = torch::logsumexp(y, /*dim=*/{1}, /*keepdim=*/true);
    return y * torch::mish(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
