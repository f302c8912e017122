// KernelBench level 2, task 33: Linear, per-feature scale, then BatchNorm1d with batch statistics.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear gemm{nullptr};
  at::Tensor scale;
  torch::nn::BatchNorm1d bn{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t out_features = init.arg_int("out_features");
    gemm = register_module("gemm", torch::nn::Linear(init.arg_int("in_features"), out_features));
    scale = register_parameter("scale", torch::randn(init.arg_ints("scale_shape")));
    bn = register_module("bn", torch::nn::BatchNorm1d(torch::nn::BatchNorm1dOptions(out_features)
                                                          .eps(init.arg_float("eps"))
                                                          .momentum(init.arg_float("momentum"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = gemm(x);
    y = y * scale;
    return bn(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
