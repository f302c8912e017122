// KernelBench level 1, task 92: exclusive cumulative sum along one dimension (output shape = input shape).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  int64_t dim;
  explicit Model(const kloop::ModuleInit& init) : dim(init.arg_int("dim")) {}
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor head = torch::cumsum(x.narrow(dim, 0, x.size(dim) - 1), dim);
    at::Tensor zero = torch::zeros_like(x.select(dim, 0).unsqueeze(dim));
    return torch::cat({zero, head}, dim);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
