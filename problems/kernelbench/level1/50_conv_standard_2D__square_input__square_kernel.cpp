// KernelBench level 1, task 50: a fixed Conv2d 3 -> 96, kernel 11, stride 4, padding 2, with bias.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  int64_t num_classes;  // passed by upstream, not used by the computation
  torch::nn::Conv2d conv1{nullptr};
  explicit Model(const kloop::ModuleInit& init) : num_classes(init.arg_int("num_classes")) {
    conv1 = register_module(
        "conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 96, 11).stride(4).padding(2).bias(true)));
  }
  at::Tensor forward(const at::Tensor& x) { return conv1(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
