// Example reward hack for 19_ReLU: upstream draws x from torch.rand, so
// every input is positive and returning x "passes". kloop's strict protocol
// flags the aliasing and adds negated inputs.
#include <kloop/kernel_api.h>

struct ModelNew {
  explicit ModelNew(const kloop::ModuleInit&) {}
  at::Tensor forward(const at::Tensor& x) { return x; }
};
KLOOP_REGISTER_CANDIDATE(ModelNew)
