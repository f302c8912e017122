// KernelBench level 1, task 45: AvgPool2d (stride defaults to the window size).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::AvgPool2d avg_pool{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t k = init.arg_int("kernel_size");
    // Upstream's stride=None means stride = kernel_size.
    const int64_t stride = init.has_arg("stride") ? init.arg_int("stride") : k;
    const int64_t padding = init.has_arg("padding") ? init.arg_int("padding") : 0;
    avg_pool = register_module(
        "avg_pool", torch::nn::AvgPool2d(torch::nn::AvgPool2dOptions(k).stride(stride).padding(padding)));
  }
  at::Tensor forward(const at::Tensor& x) { return avg_pool(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
