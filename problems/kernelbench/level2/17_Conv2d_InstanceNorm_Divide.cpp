// KernelBench level 2, task 17: Conv2d, InstanceNorm2d (no affine, no running stats), divide by a constant.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv{nullptr};
  torch::nn::InstanceNorm2d instance_norm{nullptr};
  double divide_by;
  explicit Model(const kloop::ModuleInit& init) : divide_by(init.arg_float("divide_by")) {
    const int64_t out_channels = init.arg_int("out_channels");
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(
                                       init.arg_int("in_channels"), out_channels, init.arg_int("kernel_size"))));
    instance_norm = register_module("instance_norm", torch::nn::InstanceNorm2d(out_channels));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv(x);
    y = instance_norm(y);
    return y / divide_by;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
