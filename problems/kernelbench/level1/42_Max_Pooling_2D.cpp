// KernelBench level 1, task 42: MaxPool2d with kernel_size, stride, padding and dilation.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::MaxPool2d maxpool{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    maxpool = register_module(
        "maxpool", torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(init.arg_int("kernel_size"))
                                            .stride(init.arg_int("stride"))
                                            .padding(init.arg_int("padding"))
                                            .dilation(init.arg_int("dilation"))));
  }
  at::Tensor forward(const at::Tensor& x) { return maxpool(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
