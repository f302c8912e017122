// KernelBench level 3, task 40: 6-layer GRU (sequence-first) from h0, returning the final hidden state h_n (num_layers, batch, hidden_size).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::GRU gru{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    // bias and batch_first keep upstream's defaults (True, False); dropout is 0 as upstream's.
    gru = register_module("gru", torch::nn::GRU(torch::nn::GRUOptions(init.arg_int("input_size"), init.arg_int("hidden_size"))
                                                    .num_layers(init.arg_int("num_layers"))
                                                    .bias(true)
                                                    .batch_first(false)
                                                    .dropout(0.0)
                                                    .bidirectional(false)));
  }
  // x: (seq_len, batch, input_size); h0: (num_layers, batch, hidden_size)
  at::Tensor forward(const at::Tensor& x, const at::Tensor& h0) {
    auto result = gru(x, h0);  // (output, h_n)
    return std::get<1>(result);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
