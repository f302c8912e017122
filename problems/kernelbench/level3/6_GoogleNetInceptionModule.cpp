// KernelBench level 3, task 6: GoogLeNet Inception module (1x1, 1x1->3x3, 1x1->5x5 and maxpool->1x1 branches, concatenated on channels).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Conv2d branch1x1{nullptr};
  torch::nn::Sequential branch3x3{nullptr}, branch5x5{nullptr}, branch_pool{nullptr};

  explicit Model(const kloop::ModuleInit& init) {
    using torch::nn::Conv2d;
    using torch::nn::Conv2dOptions;
    const int64_t in_channels = init.arg_int("in_channels");
    const int64_t reduce_3x3 = init.arg_int("reduce_3x3");
    const int64_t reduce_5x5 = init.arg_int("reduce_5x5");
    branch1x1 = register_module("branch1x1", Conv2d(Conv2dOptions(in_channels, init.arg_int("out_1x1"), 1)));
    branch3x3 = register_module(
        "branch3x3", torch::nn::Sequential(Conv2d(Conv2dOptions(in_channels, reduce_3x3, 1)),
                                           Conv2d(Conv2dOptions(reduce_3x3, init.arg_int("out_3x3"), 3).padding(1))));
    branch5x5 = register_module(
        "branch5x5", torch::nn::Sequential(Conv2d(Conv2dOptions(in_channels, reduce_5x5, 1)),
                                           Conv2d(Conv2dOptions(reduce_5x5, init.arg_int("out_5x5"), 5).padding(2))));
    branch_pool = register_module(
        "branch_pool",
        torch::nn::Sequential(torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(3).stride(1).padding(1)),
                              Conv2d(Conv2dOptions(in_channels, init.arg_int("pool_proj"), 1))));
  }

  at::Tensor forward(const at::Tensor& x) {
    return torch::cat({branch1x1(x), branch3x3->forward(x), branch5x5->forward(x), branch_pool->forward(x)}, 1);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
