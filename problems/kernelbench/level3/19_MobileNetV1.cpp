// KernelBench level 3, task 19: MobileNetV1 (conv3x3 stem, 13 depthwise-separable blocks, training-mode batch norm, 7x7 average pool, Linear classifier).
#include <kloop/reference_api.h>

// LibTorch's Sequential has a templated forward and cannot sit inside another Sequential;
// this one (same children, same names) can.
struct NestedSequentialImpl : torch::nn::SequentialImpl {
  using torch::nn::SequentialImpl::SequentialImpl;
  torch::Tensor forward(torch::Tensor x) { return torch::nn::SequentialImpl::forward(x); }
};
TORCH_MODULE(NestedSequential);

struct Model : torch::nn::Module {
  torch::nn::Sequential model{nullptr};
  torch::nn::Linear fc{nullptr};

  // conv3x3(stride)-BN-ReLU.
  static NestedSequential conv_bn(int64_t inp, int64_t oup, int64_t stride) {
    return NestedSequential(
        torch::nn::Conv2d(torch::nn::Conv2dOptions(inp, oup, 3).stride(stride).padding(1).bias(false)),
        torch::nn::BatchNorm2d(oup), torch::nn::ReLU(torch::nn::ReLUOptions(true)));
  }
  // Depthwise conv3x3(stride)-BN-ReLU, then pointwise conv1x1-BN-ReLU.
  static NestedSequential conv_dw(int64_t inp, int64_t oup, int64_t stride) {
    return NestedSequential(
        torch::nn::Conv2d(torch::nn::Conv2dOptions(inp, inp, 3).stride(stride).padding(1).groups(inp).bias(false)),
        torch::nn::BatchNorm2d(inp), torch::nn::ReLU(torch::nn::ReLUOptions(true)),
        torch::nn::Conv2d(torch::nn::Conv2dOptions(inp, oup, 1).stride(1).padding(0).bias(false)),
        torch::nn::BatchNorm2d(oup), torch::nn::ReLU(torch::nn::ReLUOptions(true)));
  }

  explicit Model(const kloop::ModuleInit& init) {
    const double alpha = init.arg_float("alpha");
    // Python's int(c * alpha): truncation toward zero.
    auto w = [alpha](int64_t c) { return static_cast<int64_t>(static_cast<double>(c) * alpha); };
    model = register_module(
        "model",
        torch::nn::Sequential(
            conv_bn(init.arg_int("input_channels"), w(32), 2), conv_dw(w(32), w(64), 1), conv_dw(w(64), w(128), 2),
            conv_dw(w(128), w(128), 1), conv_dw(w(128), w(256), 2), conv_dw(w(256), w(256), 1),
            conv_dw(w(256), w(512), 2), conv_dw(w(512), w(512), 1), conv_dw(w(512), w(512), 1),
            conv_dw(w(512), w(512), 1), conv_dw(w(512), w(512), 1), conv_dw(w(512), w(512), 1),
            conv_dw(w(512), w(1024), 2), conv_dw(w(1024), w(1024), 1),
            torch::nn::AvgPool2d(torch::nn::AvgPool2dOptions(7))));
    fc = register_module("fc", torch::nn::Linear(w(1024), init.arg_int("num_classes")));
  }

  at::Tensor forward(const at::Tensor& input) {
    auto x = model->forward(input);
    x = x.view({x.size(0), -1});
    return fc(x);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
