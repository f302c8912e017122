// Model answers for 19_ReLU that the loop tests serve: a correct kernel
// (ATen API) and one that returns its input (an integrity violation).
#pragma once

namespace kloop::test_support {

inline constexpr const char* kReluAnswer =
    "```cpp\n#include <ATen/ops/empty_like.h>\n#include <kloop/kernel_api.h>\nstruct ModelNew {\n"
    "  explicit ModelNew(const kloop::ModuleInit&) {}\n"
    "  at::Tensor forward(const at::Tensor& x) { at::Tensor y = at::empty_like(x); "
    "return y.copy_(x).clamp_min_(0); }\n};\nKLOOP_REGISTER_CANDIDATE(ModelNew)\n```\n";

inline constexpr const char* kIdentityAnswer =
    "```cpp\n#include <kloop/kernel_api.h>\nstruct ModelNew {\n"
    "  explicit ModelNew(const kloop::ModuleInit&) {}\n"
    "  at::Tensor forward(const at::Tensor& x) { return x; }\n};\nKLOOP_REGISTER_CANDIDATE(ModelNew)\n```\n";

}  // namespace kloop::test_support
