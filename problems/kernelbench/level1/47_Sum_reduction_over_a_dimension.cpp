// KernelBench level 1, task 47: sum over one dimension, keeping it with size 1.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  int64_t dim;
  explicit Model(const kloop::ModuleInit& init) : dim(init.arg_int("dim")) {}
  at::Tensor forward(const at::Tensor& x) { return torch::sum(x, {dim}, /*keepdim=*/true); }
};
KLOOP_REGISTER_REFERENCE(Model)
