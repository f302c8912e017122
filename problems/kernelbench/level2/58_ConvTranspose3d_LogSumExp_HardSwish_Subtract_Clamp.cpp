// KernelBench level 2, task 58: ConvTranspose3d, logsumexp over channels, x * sigmoid(x + 3) / 6, minus a learned scalar, clamp to [-1, 1].
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose3d conv_transpose{nullptr};
  at::Tensor bias;
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t k = init.arg_int("kernel_size");
    conv_transpose = register_module(
        "conv_transpose",
        torch::nn::ConvTranspose3d(
            torch::nn::ConvTranspose3dOptions(init.arg_int("in_channels"), init.arg_int("out_channels"), {k, k, k})
                .stride(init.arg_int("stride"))
                .padding(init.arg_int("padding"))));
    // Upstream takes bias_shape but always builds a (1, 1, 1, 1) parameter.
    bias = register_parameter("bias", torch::randn({1, 1, 1, 1}));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv_transpose(x);
    y = torch::logsumexp(y, /*dim=*/1, /*keepdim=*/true);  // (batch, 1, D', H', W')
    y = y * torch::sigmoid(y + 3) / 6;
    y = y - bias;
    return torch::clamp(y, -1, 1);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
