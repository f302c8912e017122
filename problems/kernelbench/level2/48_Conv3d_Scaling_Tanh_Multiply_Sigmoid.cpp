// KernelBench level 2, task 48: Conv3d, learned per-channel scale, tanh, learned per-channel
// multiplier (named bias), then sigmoid.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv3d conv{nullptr};
  at::Tensor scaling_factor, bias;
  explicit Model(const kloop::ModuleInit& init) {
    conv = register_module("conv", torch::nn::Conv3d(torch::nn::Conv3dOptions(
                                       init.arg_int("in_channels"), init.arg_int("out_channels"),
                                       init.arg_int("kernel_size"))));
    // The integer argument scaling_factor is unused, as upstream; the parameter replaces it.
    const std::vector<int64_t> bias_shape = init.arg_ints("bias_shape");
    scaling_factor = register_parameter("scaling_factor", torch::randn(bias_shape));
    bias = register_parameter("bias", torch::randn(bias_shape));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv(x);
    y = y * scaling_factor;
    y = torch::tanh(y);
    y = y * bias;
    return torch::sigmoid(y);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
