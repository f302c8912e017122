#include <kloop/reference_api.h>

// out = a + b, elementwise.
struct Model : torch::nn::Module {
  explicit Model(const kloop::ModuleInit&) {}
  at::Tensor forward(const at::Tensor& a, const at::Tensor& b) { return a + b; }
};
KLOOP_REGISTER_REFERENCE(Model)
