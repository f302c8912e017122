// KernelBench level 1, task 24: log-softmax over one dimension (1) of a 2-D tensor.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  int64_t dim;
  explicit Model(const kloop::ModuleInit& init) : dim(init.arg_int("dim")) {}
  at::Tensor forward(const at::Tensor& x) { return torch::log_softmax(x, dim); }
};
KLOOP_REGISTER_REFERENCE(Model)
