// kloop kernel API: the contract between kloop and a compiled model file.
//
// A candidate (or a reference) is one source file that defines a class with
//   * a constructor taking `const kloop::ModuleInit&` (weights and
//     constructor arguments by name), and
//   * a `forward` taking at::Tensor arguments (any arity) and returning an
//     at::Tensor, a std::tuple of tensors or a std::vector of tensors,
// and registers it with KLOOP_REGISTER_CANDIDATE(ModelNew) (or
// KLOOP_REGISTER_REFERENCE(Model) from reference_api.h).
//
// The header pulls in only light ATen headers (ATen/core/Tensor.h): a full
// <ATen/ATen.h> or <torch/torch.h> multiplies the compile time of every
// candidate. Include the <ATen/ops/NAME.h> headers of the ops you call.
//
// Ownership: kloop owns the ModuleInit and the tensors it hands out; the
// module may keep copies of the tensors (they share storage). The exported
// entry points below are the ABI; kKernelApiVersion changes whenever they or
// the classes crossing them change.
#pragma once

#ifdef KLOOP_LIGHT_API_INCLUDED
#error "kloop: include either <kloop/kernel_api.h> (ATen tensors) or <kloop/light_api.h> (kloop tensors), not both"
#endif

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#define KLOOP_KERNEL_API_VERSION 1

namespace kloop {

constexpr int kKernelApiVersion = KLOOP_KERNEL_API_VERSION;

// What a module's constructor receives: the problem's weights (parameters and
// buffers, named as in the reference's state_dict) and constructor arguments.
// Implemented by kloop; accessors throw std::out_of_range naming what exists.
class ModuleInit {
 public:
  virtual ~ModuleInit() = default;

  virtual bool has_param(const std::string& name) const = 0;
  virtual at::Tensor param(const std::string& name) const = 0;
  virtual std::vector<std::string> param_names() const = 0;

  virtual bool has_arg(const std::string& name) const = 0;
  virtual int64_t arg_int(const std::string& name) const = 0;
  virtual double arg_float(const std::string& name) const = 0;
  virtual bool arg_bool(const std::string& name) const = 0;
  virtual std::vector<int64_t> arg_ints(const std::string& name) const = 0;
  virtual std::string arg_string(const std::string& name) const = 0;

  // "cpu" or "cuda:N": where inputs live and where outputs must be.
  virtual std::string device() const = 0;
};

// The type-erased module kloop drives through the exported entry points.
class ModuleRunner {
 public:
  virtual ~ModuleRunner() = default;
  virtual std::vector<at::Tensor> forward(const std::vector<at::Tensor>& inputs) = 0;
  // Named parameters and buffers (references only; candidates have none).
  virtual std::vector<std::pair<std::string, at::Tensor>> parameters() { return {}; }
  virtual std::vector<std::pair<std::string, at::Tensor>> buffers() { return {}; }
  // References: the affine weight and bias (undefined where absent) of each
  // norm layer (BatchNorm, InstanceNorm, LayerNorm, GroupNorm) in
  // registration order, for strict's non-identity parameters under
  // KernelBench's seeded construction.
  virtual std::vector<std::pair<at::Tensor, at::Tensor>> norm_affine() { return {}; }
};

// Signature of the factory each registration macro exports.
using ModuleFactory = ModuleRunner* (*)(const ModuleInit& init);

namespace detail {

template <typename T>
struct ForwardSignature;

template <typename C, typename R, typename... Args>
struct ForwardSignature<R (C::*)(Args...)> {
  using Result = R;
  static constexpr std::size_t kArity = sizeof...(Args);
};
template <typename C, typename R, typename... Args>
struct ForwardSignature<R (C::*)(Args...) const> : ForwardSignature<R (C::*)(Args...)> {};

template <typename T>
struct IsTensorArg : std::is_same<std::decay_t<T>, at::Tensor> {};

template <typename C, typename R, typename... Args>
constexpr bool all_tensor_args(R (C::*)(Args...)) {
  return (IsTensorArg<Args>::value && ...);
}
template <typename C, typename R, typename... Args>
constexpr bool all_tensor_args(R (C::*)(Args...) const) {
  return (IsTensorArg<Args>::value && ...);
}

inline void flatten(at::Tensor t, std::vector<at::Tensor>& out) { out.push_back(std::move(t)); }
inline void flatten(std::vector<at::Tensor> v, std::vector<at::Tensor>& out) {
  for (auto& t : v) out.push_back(std::move(t));
}
template <typename... Ts>
void flatten(std::tuple<Ts...> tuple, std::vector<at::Tensor>& out) {
  std::apply([&out](auto&&... t) { (flatten(std::move(t), out), ...); }, std::move(tuple));
}

template <typename M, std::size_t... I>
std::vector<at::Tensor> call_forward(M& module, const std::vector<at::Tensor>& in,
                                     std::index_sequence<I...>) {
  std::vector<at::Tensor> out;
  flatten(module.forward(in[I]...), out);
  return out;
}

// Adapts a user class with forward(at::Tensor...) to ModuleRunner.
template <typename M>
class Adapter : public ModuleRunner {
 public:
  using Signature = ForwardSignature<decltype(&M::forward)>;
  static_assert(all_tensor_args(&M::forward),
                "kloop: forward must take only at::Tensor arguments (by value or const&)");

  explicit Adapter(const ModuleInit& init) : module_(make(init)) {}

  std::vector<at::Tensor> forward(const std::vector<at::Tensor>& inputs) override {
    if (inputs.size() != Signature::kArity) {
      throw std::invalid_argument("kloop: forward takes " + std::to_string(Signature::kArity) +
                                  " tensor(s) but the problem passes " +
                                  std::to_string(inputs.size()));
    }
    return call_forward(*module_, inputs, std::make_index_sequence<Signature::kArity>{});
  }

 protected:
  M& module() { return *module_; }

 private:
  static std::shared_ptr<M> make(const ModuleInit& init) {
    if constexpr (std::is_constructible_v<M, const ModuleInit&>) {
      return std::make_shared<M>(init);
    } else {
      static_assert(std::is_default_constructible_v<M>,
                    "kloop: the module needs a constructor taking const kloop::ModuleInit& "
                    "(or a default constructor when the problem has no weights or arguments)");
      (void)init;
      return std::make_shared<M>();
    }
  }

  std::shared_ptr<M> module_;
};

}  // namespace detail
}  // namespace kloop

// Exported entry points. Role-specific names let kloop refuse a reference
// where a candidate is expected (and the other way round) at load time.
#define KLOOP_DETAIL_EXPORT(ROLE, ADAPTER, CLASS)                                          \
  extern "C" __attribute__((visibility("default"))) int kloop_##ROLE##_api_version() {   \
    return KLOOP_KERNEL_API_VERSION;                                                       \
  }                                                                                        \
  extern "C" __attribute__((visibility("default"))) int kloop_##ROLE##_forward_arity() {  \
    return static_cast<int>(ADAPTER<CLASS>::Signature::kArity);                            \
  }                                                                                        \
  extern "C" __attribute__((visibility("default"))) kloop::ModuleRunner* kloop_##ROLE##_create( \
      const kloop::ModuleInit& init) {                                                     \
    return new ADAPTER<CLASS>(init);                                                       \
  }

// Registers the candidate class (conventionally ModelNew). Use once per file.
#define KLOOP_REGISTER_CANDIDATE(CLASS) KLOOP_DETAIL_EXPORT(candidate, kloop::detail::Adapter, CLASS)
