// KernelBench level 2, task 28: Linear, InstanceNorm2d over each row (viewed as 1x1xN), then (z + y) * y.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear bmm{nullptr};
  torch::nn::InstanceNorm2d instance_norm{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t out_features = init.arg_int("out_features");
    bmm = register_module("bmm", torch::nn::Linear(init.arg_int("in_features"), out_features));
    instance_norm = register_module(
        "instance_norm", torch::nn::InstanceNorm2d(torch::nn::InstanceNorm2dOptions(out_features)
                                                       .eps(init.arg_float("eps"))
                                                       .momentum(init.arg_float("momentum"))));
  }
  at::Tensor forward(const at::Tensor& x, const at::Tensor& y) {
    at::Tensor z = bmm(x);
    // (batch, out) -> (batch, 1, 1, out): one channel whose 1 x out plane is normalised per sample
    z = instance_norm(z.unsqueeze(1).unsqueeze(1)).squeeze(1).squeeze(1);
    z = z + y;
    return z * y;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
