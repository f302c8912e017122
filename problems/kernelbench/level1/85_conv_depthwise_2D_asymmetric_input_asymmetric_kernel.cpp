// KernelBench level 1, task 85: depthwise Conv2d (groups = in_channels) with an asymmetric kernel and
// per-axis stride, padding and dilation, no bias.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv2d{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t c = init.arg_int("in_channels");
    // Upstream takes out_channels and groups but builds the layer from in_channels alone.
    (void)init.arg_int("out_channels");
    (void)init.arg_int("groups");
    conv2d = register_module(
        "conv2d",
        torch::nn::Conv2d(
            torch::nn::Conv2dOptions(c, c, {init.arg_int("kernel_size_h"), init.arg_int("kernel_size_w")})
                .stride({init.arg_int("stride_h"), init.arg_int("stride_w")})
                .padding({init.arg_int("padding_h"), init.arg_int("padding_w")})
                .dilation({init.arg_int("dilation_h"), init.arg_int("dilation_w")})
                .groups(c)
                .bias(init.arg_bool("bias"))));
  }
  at::Tensor forward(const at::Tensor& x) { return conv2d(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
