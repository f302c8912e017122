// KernelBench level 1, task 52: argmin over one dimension, which is removed; int64 indices.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  int64_t dim;
  explicit Model(const kloop::ModuleInit& init) : dim(init.arg_int("dim")) {}
  at::Tensor forward(const at::Tensor& x) { return torch::argmin(x, dim); }
};
KLOOP_REGISTER_REFERENCE(Model)
