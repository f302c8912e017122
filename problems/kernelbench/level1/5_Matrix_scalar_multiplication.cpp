// KernelBench level 1, task 5: matrix-scalar multiplication C = A * s.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  double s;
  explicit Model(const kloop::ModuleInit& init) : s(init.arg_float("s")) {}
  at::Tensor forward(const at::Tensor& A) { return A * s; }
};
KLOOP_REGISTER_REFERENCE(Model)
