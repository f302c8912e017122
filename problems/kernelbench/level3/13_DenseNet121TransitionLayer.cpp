// KernelBench level 3, task 13: DenseNet transition layer (training-mode BatchNorm, ReLU, conv1x1 without bias, 2x2/2 average pool).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Sequential transition{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t num_input_features = init.arg_int("num_input_features");
    const int64_t num_output_features = init.arg_int("num_output_features");
    transition = register_module(
        "transition",
        torch::nn::Sequential(
            torch::nn::BatchNorm2d(num_input_features), torch::nn::ReLU(torch::nn::ReLUOptions(true)),
            torch::nn::Conv2d(torch::nn::Conv2dOptions(num_input_features, num_output_features, 1).bias(false)),
            torch::nn::AvgPool2d(torch::nn::AvgPool2dOptions(2).stride(2))));
  }
  at::Tensor forward(const at::Tensor& x) { return transition->forward(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
