// KernelBench level 1, task 44: AvgPool1d with kernel_size, stride and padding.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::AvgPool1d avg_pool{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    avg_pool = register_module(
        "avg_pool", torch::nn::AvgPool1d(torch::nn::AvgPool1dOptions(init.arg_int("kernel_size"))
                                             .stride(init.arg_int("stride"))
                                             .padding(init.arg_int("padding"))));
  }
  at::Tensor forward(const at::Tensor& x) { return avg_pool(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
