// Example mistake for 33_BatchNorm: normalises with the running statistics
// (eval-mode BatchNorm) where KernelBench runs the module in training mode,
// which uses the batch's own mean and variance. kloop reports it incorrect.
#include <ATen/ops/rsqrt.h>
#include <kloop/kernel_api.h>

struct ModelNew {
  explicit ModelNew(const kloop::ModuleInit& init)
      : weight_(init.param("bn.weight")),
        bias_(init.param("bn.bias")),
        mean_(init.param("bn.running_mean")),
        var_(init.param("bn.running_var")) {}

  at::Tensor forward(const at::Tensor& x) {
    auto shape = std::vector<int64_t>{1, x.size(1), 1, 1};
    at::Tensor scale = weight_.mul(var_.add(1e-5).rsqrt()).view(shape);
    at::Tensor shift = bias_.view(shape).sub(mean_.view(shape).mul(scale));
    return x.mul(scale).add(shift);
  }

  at::Tensor weight_, bias_, mean_, var_;
};
KLOOP_REGISTER_CANDIDATE(ModelNew)
