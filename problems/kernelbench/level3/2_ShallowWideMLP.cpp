// KernelBench level 3, task 2: shallow wide MLP, Linear+ReLU per hidden layer then an output Linear.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Sequential network{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    network = torch::nn::Sequential();
    int64_t current = init.arg_int("input_size");
    for (int64_t size : init.arg_ints("hidden_layer_sizes")) {
      network->push_back(torch::nn::Linear(current, size));
      network->push_back(torch::nn::ReLU());
      current = size;
    }
    network->push_back(torch::nn::Linear(current, init.arg_int("output_size")));
    register_module("network", network);
  }
  at::Tensor forward(const at::Tensor& x) { return network->forward(x); }
};
KLOOP_REGISTER_REFERENCE(Model)
