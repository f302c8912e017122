// KernelBench level 3, task 7: GoogLeNet (Inception v1) without batch norm or auxiliary heads, global average pool and Linear classifier.
#include <kloop/reference_api.h>

// Four branches (1x1; 1x1->3x3; 1x1->5x5; maxpool->1x1) concatenated on channels.
struct InceptionModuleImpl : torch::nn::Module {
  torch::nn::Conv2d branch1x1{nullptr};
  torch::nn::Sequential branch3x3{nullptr}, branch5x5{nullptr}, branch_pool{nullptr};

  InceptionModuleImpl(int64_t in_channels, int64_t out_1x1, int64_t reduce_3x3, int64_t out_3x3, int64_t reduce_5x5,
                      int64_t out_5x5, int64_t pool_proj) {
    using torch::nn::Conv2d;
    using torch::nn::Conv2dOptions;
    branch1x1 = register_module("branch1x1", Conv2d(Conv2dOptions(in_channels, out_1x1, 1)));
    branch3x3 = register_module("branch3x3", torch::nn::Sequential(Conv2d(Conv2dOptions(in_channels, reduce_3x3, 1)),
                                                                   Conv2d(Conv2dOptions(reduce_3x3, out_3x3, 3).padding(1))));
    branch5x5 = register_module("branch5x5", torch::nn::Sequential(Conv2d(Conv2dOptions(in_channels, reduce_5x5, 1)),
                                                                   Conv2d(Conv2dOptions(reduce_5x5, out_5x5, 5).padding(2))));
    branch_pool = register_module(
        "branch_pool", torch::nn::Sequential(torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(3).stride(1).padding(1)),
                                             Conv2d(Conv2dOptions(in_channels, pool_proj, 1))));
  }

  torch::Tensor forward(torch::Tensor x) {
    return torch::cat({branch1x1(x), branch3x3->forward(x), branch5x5->forward(x), branch_pool->forward(x)}, 1);
  }
};
TORCH_MODULE(InceptionModule);

struct Model : torch::nn::Module {
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  torch::nn::MaxPool2d maxpool1{nullptr}, maxpool2{nullptr}, maxpool3{nullptr}, maxpool4{nullptr};
  InceptionModule inception3a{nullptr}, inception3b{nullptr};
  InceptionModule inception4a{nullptr}, inception4b{nullptr}, inception4c{nullptr}, inception4d{nullptr},
      inception4e{nullptr};
  InceptionModule inception5a{nullptr}, inception5b{nullptr};
  torch::nn::Dropout dropout{nullptr};
  torch::nn::Linear fc{nullptr};

  static torch::nn::MaxPool2d pool() {
    return torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(3).stride(2).padding(1));
  }

  explicit Model(const kloop::ModuleInit& init) {
    using torch::nn::Conv2dOptions;
    conv1 = register_module("conv1", torch::nn::Conv2d(Conv2dOptions(3, 64, 7).stride(2).padding(3)));
    maxpool1 = register_module("maxpool1", pool());
    conv2 = register_module("conv2", torch::nn::Conv2d(Conv2dOptions(64, 64, 1)));
    conv3 = register_module("conv3", torch::nn::Conv2d(Conv2dOptions(64, 192, 3).padding(1)));
    maxpool2 = register_module("maxpool2", pool());

    inception3a = register_module("inception3a", InceptionModule(192, 64, 96, 128, 16, 32, 32));
    inception3b = register_module("inception3b", InceptionModule(256, 128, 128, 192, 32, 96, 64));
    maxpool3 = register_module("maxpool3", pool());

    inception4a = register_module("inception4a", InceptionModule(480, 192, 96, 208, 16, 48, 64));
    inception4b = register_module("inception4b", InceptionModule(512, 160, 112, 224, 24, 64, 64));
    inception4c = register_module("inception4c", InceptionModule(512, 128, 128, 256, 24, 64, 64));
    inception4d = register_module("inception4d", InceptionModule(512, 112, 144, 288, 32, 64, 64));
    inception4e = register_module("inception4e", InceptionModule(528, 256, 160, 320, 32, 128, 128));
    maxpool4 = register_module("maxpool4", pool());

    inception5a = register_module("inception5a", InceptionModule(832, 256, 160, 320, 32, 128, 128));
    inception5b = register_module("inception5b", InceptionModule(832, 384, 192, 384, 48, 128, 128));

    dropout = register_module("dropout", torch::nn::Dropout(0.0));
    fc = register_module("fc", torch::nn::Linear(1024, init.arg_int("num_classes")));
  }

  at::Tensor forward(const at::Tensor& input) {
    auto x = maxpool1(torch::relu(conv1(input)));
    x = torch::relu(conv2(x));
    x = maxpool2(torch::relu(conv3(x)));

    x = inception3a(x);
    x = inception3b(x);
    x = maxpool3(x);

    x = inception4a(x);
    x = inception4b(x);
    x = inception4c(x);
    x = inception4d(x);
    x = inception4e(x);
    x = maxpool4(x);

    x = inception5a(x);
    x = inception5b(x);

    x = torch::adaptive_avg_pool2d(x, {1, 1});
    x = torch::flatten(x, 1);
    x = dropout(x);
    return fc(x);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
