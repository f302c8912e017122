// KernelBench level 1, task 99: TripletMarginLoss (p 2, eps 1e-6, no swap, mean reduction).
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  torch::nn::TripletMarginLoss loss_fn{nullptr};
  explicit Model(const kloop::ModuleInit& init) {
    loss_fn = register_module(
        "loss_fn", torch::nn::TripletMarginLoss(torch::nn::TripletMarginLossOptions().margin(init.arg_float("margin"))));
  }
  at::Tensor forward(const at::Tensor& anchor, const at::Tensor& positive, const at::Tensor& negative) {
    return loss_fn(anchor, positive, negative);
  }
};
KLOOP_REGISTER_REFERENCE(Model)
