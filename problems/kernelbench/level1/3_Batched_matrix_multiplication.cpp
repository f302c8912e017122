// KernelBench level 1, task 3: batched matrix multiplication (bmm).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  explicit Model(const kloop::ModuleInit&) {}
  at::Tensor forward(const at::Tensor& A, const at::Tensor& B) { return torch::bmm(A, B); }
};
KLOOP_REGISTER_REFERENCE(Model)
