// KernelBench level 1, task 26: elementwise GELU (exact, erf form).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  explicit Model(const kloop::ModuleInit&) {}
  at::Tensor forward(const at::Tensor& x) { return torch::gelu(x); }  // approximate="none"
};
KLOOP_REGISTER_REFERENCE(Model)
