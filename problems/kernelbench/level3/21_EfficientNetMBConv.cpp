// KernelBench level 3, task 21: EfficientNet MBConv block (conv1x1 expand-BN-ReLU6, depthwise conv-BN-ReLU6, conv1x1 project-BN, residual add when shapes allow).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  bool use_residual = false;
  torch::nn::Sequential expand_conv{nullptr}, depthwise_conv{nullptr}, project_conv{nullptr};

  explicit Model(const kloop::ModuleInit& init) {
    using torch::nn::Conv2dOptions;
    const int64_t in_channels = init.arg_int("in_channels");
    const int64_t out_channels = init.arg_int("out_channels");
    const int64_t kernel_size = init.arg_int("kernel_size");
    const int64_t stride = init.arg_int("stride");
    const int64_t expand_ratio = init.arg_int("expand_ratio");
    use_residual = stride == 1 && in_channels == out_channels;
    const int64_t hidden_dim = in_channels * expand_ratio;
    if (expand_ratio != 1) {
      expand_conv = register_module(
          "expand_conv",
          torch::nn::Sequential(
              torch::nn::Conv2d(Conv2dOptions(in_channels, hidden_dim, 1).stride(1).padding(0).bias(false)),
              torch::nn::BatchNorm2d(hidden_dim), torch::nn::ReLU6(torch::nn::ReLU6Options(true))));
    }
    depthwise_conv = register_module(
        "depthwise_conv",
        torch::nn::Sequential(torch::nn::Conv2d(Conv2dOptions(hidden_dim, hidden_dim, kernel_size)
                                                    .stride(stride)
                                                    .padding((kernel_size - 1) / 2)
                                                    .groups(hidden_dim)
                                                    .bias(false)),
                              torch::nn::BatchNorm2d(hidden_dim), torch::nn::ReLU6(torch::nn::ReLU6Options(true))));
    project_conv = register_module(
        "project_conv",
        torch::nn::Sequential(
            torch::nn::Conv2d(Conv2dOptions(hidden_dim, out_channels, 1).stride(1).padding(0).bias(false)),
            torch::nn::BatchNorm2d(out_channels)));
  }

  at::Tensor forward(const at::Tensor& input) {
    at::Tensor x = input;
    if (expand_conv) x = expand_conv->forward(x);
    x = depthwise_conv->forward(x);
    x = project_conv->forward(x);
    if (use_residual) x += input;
    return x;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
