// KernelBench level 3, task 5: AlexNet (five convs with ReLU and three max pools, three Linear layers) on 3x224x224 images.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr}, conv4{nullptr}, conv5{nullptr};
  torch::nn::MaxPool2d maxpool1{nullptr}, maxpool2{nullptr}, maxpool3{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
  torch::nn::Dropout dropout1{nullptr}, dropout2{nullptr};

  explicit Model(const kloop::ModuleInit& init) {
    using torch::nn::Conv2dOptions;
    conv1 = register_module("conv1", torch::nn::Conv2d(Conv2dOptions(3, 96, 11).stride(4).padding(2)));
    maxpool1 = register_module("maxpool1", torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(3).stride(2)));
    conv2 = register_module("conv2", torch::nn::Conv2d(Conv2dOptions(96, 256, 5).padding(2)));
    maxpool2 = register_module("maxpool2", torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(3).stride(2)));
    conv3 = register_module("conv3", torch::nn::Conv2d(Conv2dOptions(256, 384, 3).padding(1)));
    conv4 = register_module("conv4", torch::nn::Conv2d(Conv2dOptions(384, 384, 3).padding(1)));
    conv5 = register_module("conv5", torch::nn::Conv2d(Conv2dOptions(384, 256, 3).padding(1)));
    maxpool3 = register_module("maxpool3", torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(3).stride(2)));
    fc1 = register_module("fc1", torch::nn::Linear(256 * 6 * 6, 4096));
    dropout1 = register_module("dropout1", torch::nn::Dropout(0.0));
    fc2 = register_module("fc2", torch::nn::Linear(4096, 4096));
    dropout2 = register_module("dropout2", torch::nn::Dropout(0.0));
    fc3 = register_module("fc3", torch::nn::Linear(4096, init.arg_int("num_classes")));
  }

  at::Tensor forward(const at::Tensor& input) {
    auto x = maxpool1(torch::relu(conv1(input)));
    x = maxpool2(torch::relu(conv2(x)));
    x = torch::relu(conv3(x));
    x = torch::relu(conv4(x));
    x = maxpool3(torch::relu(conv5(x)));
    x = torch::flatten(x, 1);
    x = dropout1(torch::relu(fc1(x)));
    x = dropout2(torch::relu(fc2(x)));
    return fc3(x);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
