// KernelBench level 2, task 34: ConvTranspose3d, LayerNorm over the last dim, exact GELU, scale.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose3d conv_transpose{nullptr};
  torch::nn::LayerNorm layer_norm{nullptr};
  double scaling_factor;
  explicit Model(const kloop::ModuleInit& init) : scaling_factor(init.arg_float("scaling_factor")) {
    const int64_t out_channels = init.arg_int("out_channels");
    conv_transpose = register_module(
        "conv_transpose",
        torch::nn::ConvTranspose3d(
            torch::nn::ConvTranspose3dOptions(init.arg_int("in_channels"), out_channels, init.arg_int("kernel_size"))
                .stride(init.arg_int("stride"))
                .padding(init.arg_int("padding"))
                .bias(init.arg_bool("bias"))));
    // Normalises the last dim (the output width), as upstream's nn.LayerNorm(out_channels) does.
    layer_norm = register_module(
        "layer_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({out_channels}).eps(init.arg_float("eps"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv_transpose(x);
    y = layer_norm(y);
    y = torch::gelu(y);  // exact (erf) GELU
    return y * scaling_factor;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
