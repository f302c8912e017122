// KernelBench level 2, task 18: Linear, sum over features, then max, mean, logsumexp, logsumexp
// over the resulting size-1 dim.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear linear{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    linear = register_module("linear", torch::nn::Linear(init.arg_int("in_features"), init.arg_int("out_features")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = linear(x);
    y = torch::sum(y, /*dim=*/{1}, /*keepdim=*/true);
    y = std::get<0>(torch::max(y, /*dim=*/1, /*keepdim=*/true));
    y = torch::mean(y, /*dim=*/{1}, /*keepdim=*/true);
    y = torch::logsumexp(y, /*dim=*/{1}, /*keepdim=*/true);
    return torch::logsumexp(y, /*dim=*/{1}, /*keepdim=*/true);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
