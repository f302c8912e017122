// KernelBench level 2, task 84: Linear, BatchNorm1d (batch statistics), scalar scale, softmax over dim 1.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear gemm{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
  at::Tensor scale;
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t out_features = init.arg_int("out_features");
    gemm = register_module("gemm", torch::nn::Linear(init.arg_int("in_features"), out_features));
    bn = register_module("bn", torch::nn::BatchNorm1d(torch::nn::BatchNorm1dOptions(out_features)
                                                          .eps(init.arg_float("bn_eps"))
                                                          .momentum(init.arg_float("bn_momentum"))));
    scale = register_parameter("scale", torch::ones(init.arg_ints("scale_shape")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = bn(gemm(x));
    y = scale * y;
    return torch::softmax(y, /*dim=*/1);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
