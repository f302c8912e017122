// KernelBench level 1, task 36: RMS normalisation over dim 1 (no learned scale).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  int64_t num_features;
  double eps;
  explicit Model(const kloop::ModuleInit& init)
      : num_features(init.arg_int("num_features")),
        eps(init.has_arg("eps") ? init.arg_float("eps") : 1e-5) {}
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor rms = torch::sqrt(torch::mean(x * x, {1}, /*keepdim=*/true) + eps);
    return x / rms;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
