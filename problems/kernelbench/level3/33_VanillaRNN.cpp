// KernelBench level 3, task 33: one step of an Elman RNN cell, tanh(i2h([x, h])) then a linear read-out.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear i2h{nullptr}, h2o{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t input_size = init.arg_int("input_size");
    const int64_t hidden_size = init.arg_int("hidden_size");
    const int64_t output_size = init.arg_int("output_size");
    i2h = register_module("i2h", torch::nn::Linear(input_size + hidden_size, hidden_size));
    h2o = register_module("h2o", torch::nn::Linear(hidden_size, output_size));
  }
  // Upstream copies initial_hidden into its stored hidden state before the step,
  // so the step starts from initial_hidden.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& initial_hidden) {
    at::Tensor combined = torch::cat({x, initial_hidden}, 1);
    at::Tensor hidden = torch::tanh(i2h(combined));
    return h2o(hidden);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
