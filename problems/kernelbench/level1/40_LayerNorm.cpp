// KernelBench level 1, task 40: LayerNorm over the last three dims (features, dim1, dim2).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::LayerNorm ln{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    ln = register_module(
        "ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions(init.arg_ints("normalized_shape"))));
  }
  at::Tensor forward(const at::Tensor& x) { return ln(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
