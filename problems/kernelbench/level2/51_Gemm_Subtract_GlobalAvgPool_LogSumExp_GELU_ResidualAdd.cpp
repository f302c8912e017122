// KernelBench level 2, task 51: Linear, minus a learned vector, mean over features, logsumexp over the size-1 dim, GELU, plus the input.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear gemm{nullptr};
  at::Tensor subtract;
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t out_features = init.arg_int("out_features");
    gemm = register_module("gemm", torch::nn::Linear(torch::nn::LinearOptions(init.arg_int("in_features"), out_features)
                                                         .bias(init.arg_bool("bias"))));
    subtract = register_parameter("subtract", torch::randn({out_features}));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor original_x = x.clone();
    at::Tensor y = gemm(x) - subtract;
    y = torch::mean(y, /*dim=*/1, /*keepdim=*/true);         // (batch, 1)
    y = torch::logsumexp(y, /*dim=*/1, /*keepdim=*/true);    // over a dim of size 1: identity
    y = torch::gelu(y);                                      // exact (erf) GELU
    return y + original_x;                                   // broadcast to (batch, in_features)
  }
};
KLOOP_REGISTER_REFERENCE(Model)
