// KernelBench level 1, task 98: KL divergence with batchmean reduction, predictions given as probabilities.
#include <kloop/reference_api.h>

struct Model : torch::nn::Module {
  explicit Model(const kloop::ModuleInit&) {}
  at::Tensor forward(const at::Tensor& predictions, const at::Tensor& targets) {
    namespace F = torch::nn::functional;
    return F::kl_div(torch::log(predictions), targets, F::KLDivFuncOptions().reduction(torch::kBatchMean));
  }
};
KLOOP_REGISTER_REFERENCE(Model)
