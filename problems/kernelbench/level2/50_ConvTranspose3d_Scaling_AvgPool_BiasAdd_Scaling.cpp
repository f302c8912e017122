// KernelBench level 2, task 50: ConvTranspose3d, learned scalar scale, AvgPool3d(2), learned
// per-channel bias add, learned scalar scale.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose3d conv_transpose{nullptr};
  at::Tensor scale1;
  torch::nn::AvgPool3d avg_pool{nullptr};
  at::Tensor bias, scale2;
  explicit Model(const kloop::ModuleInit& init) {
    conv_transpose = register_module(
        "conv_transpose",
        torch::nn::ConvTranspose3d(torch::nn::ConvTranspose3dOptions(init.arg_int("in_channels"),
                                                                     init.arg_int("out_channels"),
                                                                     init.arg_int("kernel_size"))
                                       .stride(init.arg_int("stride"))
                                       .padding(init.arg_int("padding"))));
    scale1 = register_parameter("scale1", torch::full({}, init.arg_float("scale1"), torch::kFloat));
    avg_pool = register_module("avg_pool", torch::nn::AvgPool3d(torch::nn::AvgPool3dOptions(2)));
    bias = register_parameter("bias", torch::randn(init.arg_ints("bias_shape")));
    scale2 = register_parameter("scale2", torch::full({}, init.arg_float("scale2"), torch::kFloat));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = conv_transpose(x);
    y = y * scale1;
    y = avg_pool(y);
    y = y + bias;
    return y * scale2;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
