// KernelBench level 1, task 93: cumulative sum of x * mask along one dimension (mask is bool).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  int64_t dim;
  explicit Model(const kloop::ModuleInit& init) : dim(init.arg_int("dim")) {}
  at::Tensor forward(const at::Tensor& x, const at::Tensor& mask) { return torch::cumsum(x * mask, dim); }
};
KLOOP_REGISTER_REFERENCE(Model)
