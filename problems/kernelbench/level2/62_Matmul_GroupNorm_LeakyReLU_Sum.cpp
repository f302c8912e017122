// KernelBench level 2, task 62: Linear, GroupNorm over the features, LeakyReLU, then x + x.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::Linear fc{nullptr};
  torch::nn::GroupNorm gn{nullptr};
  double negative_slope;
  explicit Model(const kloop::ModuleInit& init) : negative_slope(init.arg_float("negative_slope")) {
    const int64_t hidden_size = init.arg_int("hidden_size");
    fc = register_module("fc", torch::nn::Linear(init.arg_int("input_size"), hidden_size));
    gn = register_module("gn", torch::nn::GroupNorm(torch::nn::GroupNormOptions(init.arg_int("num_groups"), hidden_size)
                                                        .eps(init.arg_float("eps"))));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = gn(fc(x));  // GroupNorm of a (batch, hidden_size) tensor
    y = torch::leaky_relu(y, negative_slope);
    return y + y;
  }
};
KLOOP_REGISTER_REFERENCE(Model)
