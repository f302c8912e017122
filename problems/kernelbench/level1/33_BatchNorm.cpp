// KernelBench level 1, task 33: BatchNorm2d in training mode (batch statistics).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::BatchNorm2d bn{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    bn = register_module("bn", torch::nn::BatchNorm2d(init.arg_int("num_features")));
  }
  at::Tensor forward(const at::Tensor& x) { return bn(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
