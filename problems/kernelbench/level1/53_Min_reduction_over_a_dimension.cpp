// KernelBench level 1, task 53: minimum over one dimension (values only), which is removed.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  int64_t dim;
  explicit Model(const kloop::ModuleInit& init) : dim(init.arg_int("dim")) {}
  at::Tensor forward(const at::Tensor& x) { return std::get<0>(torch::min(x, dim)); }
};
KLOOP_REGISTER_REFERENCE(Model)
