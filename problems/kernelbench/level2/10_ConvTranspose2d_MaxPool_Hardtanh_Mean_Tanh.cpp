// KernelBench level 2, task 10: ConvTranspose2d, MaxPool2d, Hardtanh, spatial mean (keepdim), tanh.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose2d conv_transpose{nullptr};
  torch::nn::MaxPool2d maxpool{nullptr};
  torch::nn::Hardtanh hardtanh{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    conv_transpose = register_module(
        "conv_transpose",
        torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(init.arg_int("in_channels"),
                                                                     init.arg_int("out_channels"),
                                                                     init.arg_int("kernel_size"))
                                       .stride(init.arg_int("stride"))
                                       .padding(init.arg_int("padding"))));
    maxpool = register_module("maxpool", torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(
                                             init.arg_int("maxpool_kernel_size"))
                                             .stride(init.arg_int("maxpool_stride"))));
    hardtanh = register_module("hardtanh", torch::nn::Hardtanh(torch::nn::HardtanhOptions()
                                                                   .min_val(init.arg_float("hardtanh_min"))
                                                                   .max_val(init.arg_float("hardtanh_max"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv_transpose(x);
    y = maxpool(y);
    y = hardtanh(y);
    y = torch::mean(y, {2, 3}, /*keepdim=*/true);
    return torch::tanh(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
