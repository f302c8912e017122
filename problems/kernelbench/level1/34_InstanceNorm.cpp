// KernelBench level 1, task 34: InstanceNorm2d (no affine parameters, no running statistics).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::InstanceNorm2d inorm{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    inorm = register_module("inorm", torch::nn::InstanceNorm2d(init.arg_int("num_features")));
  }
  at::Tensor forward(const at::Tensor& x) { return inorm(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
