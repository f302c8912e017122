// KernelBench level 1, task 35: GroupNorm with affine per-channel weight and bias.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::GroupNorm gn{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    gn = register_module("gn", torch::nn::GroupNorm(torch::nn::GroupNormOptions(
                                   /*num_groups=*/init.arg_int("num_groups"),
                                   /*num_channels=*/init.arg_int("num_features"))));
  }
  at::Tensor forward(const at::Tensor& x) { return gn(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
