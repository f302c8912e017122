// KernelBench level 1, task 5: matrix-scalar multiplication C = A * s (s a 0-d tensor).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  explicit Model(const kloop::ModuleInit&) {}
  at::Tensor forward(const at::Tensor& A, const at::Tensor& s) { return A * s; }
};
KLOOP_REGISTER_REFERENCE(Model)
