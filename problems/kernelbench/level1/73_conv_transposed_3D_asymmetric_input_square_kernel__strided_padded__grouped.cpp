// KernelBench level 1, task 73: ConvTranspose3d with a cubic kernel, stride and padding.
// As upstream runs it, groups stays 1 and output_padding is accepted but never given to the layer.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose3d conv_transpose3d{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t k = init.arg_int("kernel_size");
    // Upstream's constructor takes output_padding but does not forward it to nn.ConvTranspose3d.
    (void)init.arg_int("output_padding");
    conv_transpose3d = register_module(
        "conv_transpose3d",
        torch::nn::ConvTranspose3d(
            torch::nn::ConvTranspose3dOptions(init.arg_int("in_channels"), init.arg_int("out_channels"), {k, k, k})
                .stride(init.arg_int("stride"))
                .padding(init.arg_int("padding"))
                .groups(init.arg_int("groups"))
                .bias(init.arg_bool("bias"))));
  }
  at::Tensor forward(const at::Tensor& x) { return conv_transpose3d(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
