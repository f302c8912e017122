// KernelBench level 3, task 34: an Elman RNN unrolled over a sequence, returning the per-step linear read-outs.
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
  // x: (seq_len, batch, input_size), h0: (batch, hidden_size) -> (seq_len, batch, output_size)
  at::Tensor forward(const at::Tensor& x, const at::Tensor& h0) {
    at::Tensor hidden = h0;
    std::vector<at::Tensor> outputs;
    for (int64_t t = 0; t < x.size(0); ++t) {
      at::Tensor combined = torch::cat({x[t], hidden}, 1);
      hidden = torch::tanh(i2h(combined));
      outputs.push_back(h2o(hidden));
    }
    return torch::stack(outputs, 0);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
