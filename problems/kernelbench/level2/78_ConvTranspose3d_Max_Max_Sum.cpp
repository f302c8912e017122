// KernelBench level 2, task 78: ConvTranspose3d, MaxPool3d(2), MaxPool3d(3), sum over channels (keepdim).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose3d conv_transpose{nullptr};
  torch::nn::MaxPool3d max_pool1{nullptr};
  torch::nn::MaxPool3d max_pool2{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    conv_transpose = register_module(
        "conv_transpose",
        torch::nn::ConvTranspose3d(torch::nn::ConvTranspose3dOptions(init.arg_int("in_channels"),
                                                                     init.arg_int("out_channels"),
                                                                     init.arg_int("kernel_size"))
                                       .stride(init.arg_int("stride"))
                                       .padding(init.arg_int("padding"))));
    max_pool1 = register_module("max_pool1", torch::nn::MaxPool3d(torch::nn::MaxPool3dOptions(2)));
    max_pool2 = register_module("max_pool2", torch::nn::MaxPool3d(torch::nn::MaxPool3dOptions(3)));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = max_pool2(max_pool1(conv_transpose(x)));
    return torch::sum(y, /*dim=*/1, /*keepdim=*/true);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
