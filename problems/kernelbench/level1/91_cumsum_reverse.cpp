// KernelBench level 1, task 91: reverse (suffix) cumulative sum along one dimension.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  int64_t dim;
  explicit Model(const kloop::ModuleInit& init) : dim(init.arg_int("dim")) {}
  at::Tensor forward(const at::Tensor& x) { return torch::cumsum(x.flip({dim}), dim).flip({dim}); }
};
KLOOP_REGISTER_REFERENCE(Model)
