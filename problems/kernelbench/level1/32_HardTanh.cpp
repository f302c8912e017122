// KernelBench level 1, task 32: elementwise hardtanh with min -1 and max 1.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  explicit Model(const kloop::ModuleInit&) {}
  at::Tensor forward(const at::Tensor& x) { return torch::hardtanh(x, /*min_val=*/-1.0, /*max_val=*/1.0); }
};
KLOOP_REGISTER_REFERENCE(Model)
