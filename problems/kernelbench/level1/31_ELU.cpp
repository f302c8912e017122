// KernelBench level 1, task 31: elementwise ELU with a constructor-given alpha.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  double alpha;
  explicit Model(const kloop::ModuleInit& init) : alpha(init.arg_float("alpha")) {}
  at::Tensor forward(const at::Tensor& x) { return torch::elu(x, alpha); }
};
KLOOP_REGISTER_REFERENCE(Model)
