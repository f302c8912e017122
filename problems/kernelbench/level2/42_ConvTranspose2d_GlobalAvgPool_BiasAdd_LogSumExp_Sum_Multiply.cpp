// KernelBench level 2, task 42: ConvTranspose2d, global average pool, bias add, logsumexp over
// channels, sum over the (1 x 1) spatial dims, then multiply by 10.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose2d conv_transpose{nullptr};
  at::Tensor bias;
  explicit Model(const kloop::ModuleInit& init) {
    conv_transpose = register_module(
        "conv_transpose", torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(
                              init.arg_int("in_channels"), init.arg_int("out_channels"), init.arg_int("kernel_size"))));
    bias = register_parameter("bias", torch::randn(init.arg_ints("bias_shape")));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv_transpose(x);
    y = torch::mean(y, {2, 3}, /*keepdim=*/true);  // global average pooling
    y = y + bias;
    y = torch::logsumexp(y, {1}, /*keepdim=*/true);
    y = torch::sum(y, {2, 3});
    return y * 10.0;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
