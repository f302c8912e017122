// KernelBench level 1, task 90: inclusive prefix product along one dimension.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  int64_t dim;
  explicit Model(const kloop::ModuleInit& init) : dim(init.arg_int("dim")) {}
  at::Tensor forward(const at::Tensor& x) { return torch::cumprod(x, dim); }
};
KLOOP_REGISTER_REFERENCE(Model)
