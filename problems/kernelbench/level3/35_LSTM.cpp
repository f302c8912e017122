// KernelBench level 3, task 35: a 6-layer LSTM over a batch-first sequence, then a Linear on the last step's output.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::LSTM lstm{nullptr};
  torch::nn::Linear fc{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    const int64_t hidden_size = init.arg_int("hidden_size");
    // The dropout argument is upstream's 0.0; dropout between layers is left out (identity).
    lstm = register_module("lstm", torch::nn::LSTM(torch::nn::LSTMOptions(init.arg_int("input_size"), hidden_size)
                                                       .num_layers(init.arg_int("num_layers"))
                                                       .batch_first(true)
                                                       .dropout(0.0)
                                                       .bidirectional(false)));
    fc = register_module("fc", torch::nn::Linear(hidden_size, init.arg_int("output_size")));
  }
  // x: (batch, seq, input_size); h0, c0: (num_layers, batch, hidden_size)
  at::Tensor forward(const at::Tensor& x, const at::Tensor& h0, const at::Tensor& c0) {
    auto [out, state] = lstm(x, std::make_tuple(h0, c0));
    return fc(out.select(1, -1));
  }
};
KLOOP_REGISTER_REFERENCE(Model)
