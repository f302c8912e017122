// KernelBench level 1, task 20: elementwise LeakyReLU.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  double negative_slope;
  explicit Model(const kloop::ModuleInit& init) : negative_slope(init.arg_float("negative_slope")) {}
  at::Tensor forward(const at::Tensor& x) { return torch::leaky_relu(x, negative_slope); }
};
KLOOP_REGISTER_REFERENCE(Model)
