// kloop reference API: how a problem's reference `Model` registers itself.
//
// A reference is a LibTorch module (torch::nn::Module) whose named parameters
// and buffers are the problem's weights, with the same names and shapes as
// upstream's state_dict(). kloop constructs it, overwrites every parameter
// from its own seeded generator, and reads the values back to hand them to
// the candidate by name. References are trusted and compiled once per
// content hash, so they may use the full torch::nn API.
#pragma once

#include <kloop/kernel_api.h>

#include <ATen/ATen.h>
#include <torch/nn.h>

namespace kloop::detail {

template <typename M>
class ReferenceAdapter : public Adapter<M> {
 public:
  static_assert(std::is_base_of_v<torch::nn::Module, M>,
                "kloop: a reference Model must derive from torch::nn::Module");
  explicit ReferenceAdapter(const ModuleInit& init) : Adapter<M>(init) {
    this->module().to(c10::Device(init.device()));
  }

  std::vector<std::pair<std::string, at::Tensor>> parameters() override {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (const auto& item : this->module().named_parameters(/*recurse=*/true)) {
      out.emplace_back(item.key(), item.value());
    }
    return out;
  }
  std::vector<std::pair<std::string, at::Tensor>> buffers() override {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (const auto& item : this->module().named_buffers(/*recurse=*/true)) {
      out.emplace_back(item.key(), item.value());
    }
    return out;
  }
};

}  // namespace kloop::detail

// Registers the reference class (conventionally Model). Use once per file.
#define KLOOP_REGISTER_REFERENCE(CLASS) \
  KLOOP_DETAIL_EXPORT(reference, kloop::detail::ReferenceAdapter, CLASS)
