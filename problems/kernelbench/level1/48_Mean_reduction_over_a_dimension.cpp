// KernelBench level 1, task 48: mean over one dimension, which is removed.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  int64_t dim;
  explicit Model(const kloop::ModuleInit& init) : dim(init.arg_int("dim")) {}
  at::Tensor forward(const at::Tensor& x) { return torch::mean(x, {dim}, /*keepdim=*/false); }
};
KLOOP_REGISTER_REFERENCE(Model)
