// kloop reference API: how a problem's reference `Model` registers itself.
//
// A reference is a LibTorch module (torch::nn::Module) whose named parameters
// and buffers are the problem's weights, with the same names and shapes as
// upstream's state_dict(). kloop builds it one of two ways (problems/README.md: Weights):
// for a compiled candidate it overwrites every parameter from its own seeded
// generator and hands the values to the candidate by name; for a
// KernelBench-format candidate it seeds torch's generator and lets the
// constructor's own initialisation stand, as KernelBench does, so the
// constructor must draw what upstream's __init__ draws, in the same order
// (torch::nn layers' defaults, torch::randn(...) where upstream calls
// torch.randn). References are trusted and compiled once per content hash,
// so they may use the full torch::nn API.
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
  std::vector<std::pair<at::Tensor, at::Tensor>> norm_affine() override {
    std::vector<std::pair<at::Tensor, at::Tensor>> out;
    for (const auto& m : this->module().modules(/*include_self=*/false)) {
      const std::string type = m->name();
      bool norm = false;
      for (const char* n : {"torch::nn::BatchNorm", "torch::nn::InstanceNorm", "torch::nn::LayerNormImpl",
                            "torch::nn::GroupNormImpl"}) {
        norm = norm || type.rfind(n, 0) == 0;
      }
      if (!norm) continue;
      const auto own = m->named_parameters(/*recurse=*/false);
      const at::Tensor* weight = own.find("weight");
      const at::Tensor* bias = own.find("bias");
      if (!weight || !weight->defined()) continue;  // not affine
      out.emplace_back(*weight, bias ? *bias : at::Tensor());
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
