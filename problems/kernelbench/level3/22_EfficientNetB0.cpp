// KernelBench level 3, task 22: EfficientNet-B0-style network (conv stem, 13 MBConv blocks without squeeze-excitation, conv1x1 head, training-mode batch norm), global average pool and Linear classifier.
#include <kloop/reference_api.h>

// conv1x1 expand-BN-ReLU6 (when expand_ratio != 1), depthwise conv-BN-ReLU6, conv1x1 project-BN, residual add when shapes allow.
struct MBConvImpl : torch::nn::Module {
  bool use_residual = false;
  torch::nn::Sequential expand_conv{nullptr}, depthwise_conv{nullptr}, project_conv{nullptr};

  MBConvImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride, int64_t expand_ratio) {
    using torch::nn::Conv2dOptions;
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

  torch::Tensor forward(torch::Tensor input) {
    torch::Tensor x = input;
    if (expand_conv) x = expand_conv->forward(x);
    x = depthwise_conv->forward(x);
    x = project_conv->forward(x);
    if (use_residual) x += input;
    return x;
  }
};
TORCH_MODULE(MBConv);

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Sequential blocks{nullptr};
  torch::nn::Linear fc{nullptr};

  explicit Model(const kloop::ModuleInit& init) {
    using torch::nn::Conv2dOptions;
    conv1 = register_module("conv1", torch::nn::Conv2d(Conv2dOptions(3, 32, 3).stride(2).padding(1).bias(false)));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(32));
    // MBConv(in_channels, out_channels, kernel_size, stride, expand_ratio)
    blocks = register_module(
        "blocks", torch::nn::Sequential(MBConv(32, 16, 3, 1, 1), MBConv(16, 24, 3, 2, 6), MBConv(24, 24, 3, 1, 6),
                                        MBConv(24, 40, 5, 2, 6), MBConv(40, 40, 5, 1, 6), MBConv(40, 80, 3, 2, 6),
                                        MBConv(80, 80, 3, 1, 6), MBConv(80, 112, 5, 1, 6), MBConv(112, 112, 5, 1, 6),
                                        MBConv(112, 192, 5, 2, 6), MBConv(192, 192, 5, 1, 6), MBConv(192, 192, 5, 1, 6),
                                        MBConv(192, 320, 3, 1, 6)));
    conv2 = register_module("conv2", torch::nn::Conv2d(Conv2dOptions(320, 1280, 1).stride(1).padding(0).bias(false)));
    bn2 = register_module("bn2", torch::nn::BatchNorm2d(1280));
    fc = register_module("fc", torch::nn::Linear(1280, init.arg_int("num_classes")));
  }

  at::Tensor forward(const at::Tensor& input) {
    auto x = torch::relu(bn1(conv1(input)));
    x = blocks->forward(x);
    x = torch::relu(bn2(conv2(x)));
    x = torch::adaptive_avg_pool2d(x, {1, 1});
    x = x.view({x.size(0), -1});
    return fc(x);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
