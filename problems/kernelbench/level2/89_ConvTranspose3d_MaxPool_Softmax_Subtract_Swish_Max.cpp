// KernelBench level 2, task 89: ConvTranspose3d, MaxPool3d, softmax over channels, subtract, Swish, max over channels.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::ConvTranspose3d conv_transpose{nullptr};
  torch::nn::MaxPool3d max_pool{nullptr};
  at::Tensor subtract;
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t out_channels = init.arg_int("out_channels");
    conv_transpose = register_module(
        "conv_transpose",
        torch::nn::ConvTranspose3d(
            torch::nn::ConvTranspose3dOptions(init.arg_int("in_channels"), out_channels, init.arg_int("kernel_size"))
                .stride(init.arg_int("stride"))
                .padding(init.arg_int("padding"))
                .output_padding(init.arg_int("output_padding"))));
    max_pool = register_module("max_pool",
                               torch::nn::MaxPool3d(torch::nn::MaxPool3dOptions(init.arg_int("pool_kernel_size"))
                                                        .stride(init.arg_int("pool_stride"))
                                                        .padding(init.arg_int("pool_padding"))));
    subtract = register_parameter("subtract", torch::randn({out_channels}));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = max_pool(conv_transpose(x));
    y = torch::softmax(y, /*dim=*/1);
    y = y - subtract.view({1, -1, 1, 1, 1});
    y = torch::sigmoid(y) * y;
    return std::get<0>(torch::max(y, /*dim=*/1));
  }
};
KLOOP_REGISTER_REFERENCE(Model)
