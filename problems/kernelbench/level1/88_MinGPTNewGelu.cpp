// KernelBench level 1, task 88: minGPT's tanh-approximation GELU, written out elementwise.
#include <kloop/reference_api.h>

#include <cmath>

struct Model : torch::nn::Module {
  explicit Model(const kloop::ModuleInit&) {}
  at::Tensor forward(const at::Tensor& x) {
    constexpr double kPi = 3.14159265358979323846;
    const double c = std::sqrt(2.0 / kPi);
    return 0.5 * x * (1.0 + torch::tanh(c * (x + 0.044715 * torch::pow(x, 3.0))));
  }
};
KLOOP_REGISTER_REFERENCE(Model)
