// KernelBench level 3, task 4: LeNet-5 (two conv+ReLU+maxpool stages, three Linear layers) on 1x32x32 images.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 6, 5).stride(1)));
    conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(6, 16, 5).stride(1)));
    fc1 = register_module("fc1", torch::nn::Linear(16 * 5 * 5, 120));
    fc2 = register_module("fc2", torch::nn::Linear(120, 84));
    fc3 = register_module("fc3", torch::nn::Linear(84, init.arg_int("num_classes")));
  }
  at::Tensor forward(const at::Tensor& input) {
    auto x = torch::relu(conv1(input));
    x = torch::max_pool2d(x, /*kernel_size=*/{2, 2}, /*stride=*/{2, 2});
    x = torch::relu(conv2(x));
    x = torch::max_pool2d(x, {2, 2}, {2, 2});
    x = x.view({-1, 16 * 5 * 5});
    x = torch::relu(fc1(x));
    x = torch::relu(fc2(x));
    return fc3(x);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
