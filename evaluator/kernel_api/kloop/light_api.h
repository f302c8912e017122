// kloop light kernel API (version 2): a candidate without ATen.
//
// The same contract as <kloop/kernel_api.h> (a ModelNew class, its constructor taking
// `const kloop::ModuleInit&`, a forward over tensors, KLOOP_REGISTER_CANDIDATE(ModelNew)),
// with kloop's own tensor handle in place of at::Tensor. This header includes nothing of
// LibTorch, so a one-kernel CUDA candidate compiles in a few seconds instead of the tens of
// seconds that parsing ATen's headers costs. Candidates that call ATen operators include
// <kloop/kernel_api.h> instead (version 1) and pay for it; a file includes one of the two.
//
// A kloop::Tensor is a view (data pointer, dtype, sizes, strides in elements, device) of
// memory kloop owns: the inputs, the weights, and what kloop::empty / empty_like / zeros
// allocate. Copies share the memory; it lives while a handle to it does. Outputs must be
// such tensors (or views of them); memory the module allocates itself cannot be returned.
//
// Between kloop and the module there is only the C ABI below (plain structs and function
// pointers), so the module's C++ types never cross it.
#pragma once

#ifdef KLOOP_KERNEL_API_VERSION
#error "kloop: include either <kloop/kernel_api.h> (ATen tensors) or <kloop/light_api.h> (kloop tensors), not both"
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <kloop/light_abi.h>

#define KLOOP_LIGHT_API_INCLUDED 1

namespace kloop {

constexpr int kLightApiVersion = KLOOP_LIGHT_API_VERSION;

enum class DType : int32_t {
  Float32 = 0,
  Float64 = 1,
  Float16 = 2,
  BFloat16 = 3,
  Int64 = 4,
  Int32 = 5,
  Int16 = 6,
  Int8 = 7,
  UInt8 = 8,
  Bool = 9,
};

inline std::size_t element_size(DType t) {
  switch (t) {
    case DType::Float64:
    case DType::Int64:
      return 8;
    case DType::Float32:
    case DType::Int32:
      return 4;
    case DType::Float16:
    case DType::BFloat16:
    case DType::Int16:
      return 2;
    case DType::Int8:
    case DType::UInt8:
    case DType::Bool:
      return 1;
  }
  return 0;
}

inline const char* dtype_name(DType t) {
  static const char* const names[] = {"float32", "float64", "float16", "bfloat16", "int64",
                                      "int32",   "int16",   "int8",    "uint8",    "bool"};
  const int i = static_cast<int>(t);
  return i >= 0 && i < 10 ? names[i] : "unknown";
}

namespace detail {

inline const kloop_host*& host_slot() {
  static const kloop_host* host = nullptr;
  return host;
}

inline const kloop_host& host() {
  const kloop_host* h = host_slot();
  if (!h) throw std::logic_error("kloop: kloop tensors are only available once kloop has loaded the module");
  return *h;
}

[[noreturn]] inline void fail(const std::string& what) { throw std::runtime_error("kloop: " + what); }

inline void check_host(int rc, const char* what) {
  if (rc != 0) {
    const char* why = host().last_error(host().ctx);
    fail(std::string(what) + ": " + (why && *why ? why : "failed"));
  }
}

// The dtype a C++ element type stands for; -1 where only the size is known
// (__half, __nv_bfloat16, vector types: checked by size).
template <typename T>
struct DTypeOf : std::integral_constant<int, -1> {};
template <> struct DTypeOf<float> : std::integral_constant<int, 0> {};
template <> struct DTypeOf<double> : std::integral_constant<int, 1> {};
template <> struct DTypeOf<int64_t> : std::integral_constant<int, 4> {};
template <> struct DTypeOf<int32_t> : std::integral_constant<int, 5> {};
template <> struct DTypeOf<int16_t> : std::integral_constant<int, 6> {};
template <> struct DTypeOf<int8_t> : std::integral_constant<int, 7> {};
template <> struct DTypeOf<uint8_t> : std::integral_constant<int, 8> {};
template <> struct DTypeOf<bool> : std::integral_constant<int, 9> {};

}  // namespace detail

class Tensor {
 public:
  Tensor() { std::memset(&t_, 0, sizeof t_); }
  // Takes over the reference that `t` counts.
  static Tensor adopt(const kloop_tensor& t) {
    Tensor out;
    out.t_ = t;
    return out;
  }
  // Counts a reference of its own.
  static Tensor borrow(const kloop_tensor& t) {
    Tensor out = adopt(t);
    out.retain();
    return out;
  }

  Tensor(const Tensor& o) : t_(o.t_) { retain(); }
  Tensor(Tensor&& o) noexcept : t_(o.t_) {
    o.t_.owner = nullptr;
    o.t_.data = nullptr;
  }
  Tensor& operator=(const Tensor& o) {
    if (this != &o) {
      Tensor copy(o);
      swap(copy);
    }
    return *this;
  }
  Tensor& operator=(Tensor&& o) noexcept {
    swap(o);
    return *this;
  }
  ~Tensor() { release(); }
  void swap(Tensor& o) noexcept { std::swap(t_, o.t_); }

  bool defined() const { return t_.data != nullptr || t_.owner != nullptr; }
  DType dtype() const { return static_cast<DType>(t_.dtype); }
  std::size_t element_size() const { return kloop::element_size(dtype()); }
  int64_t dim() const { return t_.dim; }
  int64_t size(int64_t d) const { return t_.sizes[wrap(d)]; }
  int64_t stride(int64_t d) const { return t_.strides[wrap(d)]; }
  std::vector<int64_t> sizes() const { return std::vector<int64_t>(t_.sizes, t_.sizes + t_.dim); }
  std::vector<int64_t> strides() const { return std::vector<int64_t>(t_.strides, t_.strides + t_.dim); }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < t_.dim; ++i) n *= t_.sizes[i];
    return n;
  }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * element_size(); }
  bool is_cuda() const { return t_.device >= 0; }
  int device_index() const { return t_.device; }
  bool is_contiguous() const {
    int64_t expected = 1;
    for (int i = t_.dim - 1; i >= 0; --i) {
      if (t_.sizes[i] != 1 && t_.strides[i] != expected) return false;
      expected *= t_.sizes[i];
    }
    return true;
  }

  void* data_ptr() const { return t_.data; }
  // Typed access: the element type must be the tensor's (float for float32,
  // int64_t for int64, ...); types kloop does not know (__half,
  // __nv_bfloat16, float4) are checked by size only.
  template <typename T>
  T* data_ptr() const {
    constexpr int known = detail::DTypeOf<std::remove_cv_t<T>>::value;
    if (known >= 0 ? known != t_.dtype : sizeof(T) % element_size() != 0) {
      detail::fail(std::string("data_ptr<T>() of a ") + dtype_name(dtype()) + " tensor with an element type of " +
                   std::to_string(sizeof(T)) + " byte(s) that is not its own");
    }
    return static_cast<T*>(t_.data);
  }

  // The same memory, contiguous: this tensor when it already is, else a copy.
  Tensor contiguous() const {
    if (is_contiguous()) return *this;
    kloop_tensor out;
    detail::check_host(detail::host().contiguous(detail::host().ctx, &t_, &out), "contiguous");
    return adopt(out);
  }
  // A view with other sizes (one may be -1) of a contiguous tensor.
  Tensor view(std::vector<int64_t> shape) const {
    if (!is_contiguous()) detail::fail("view() of a non-contiguous tensor; call contiguous() or reshape()");
    int64_t known = 1, infer = -1;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] == -1) {
        if (infer >= 0) detail::fail("view() with more than one -1");
        infer = static_cast<int64_t>(i);
      } else {
        known *= shape[i];
      }
    }
    if (infer >= 0 && known > 0) shape[infer] = numel() / known;
    Tensor out = *this;
    out.set_shape(shape, contiguous_strides(shape));
    if (out.numel() != numel()) detail::fail("view() to a shape of " + std::to_string(out.numel()) +
                                             " elements from " + std::to_string(numel()));
    return out;
  }
  Tensor reshape(std::vector<int64_t> shape) const { return contiguous().view(std::move(shape)); }
  Tensor transpose(int64_t a, int64_t b) const {
    Tensor out = *this;
    std::swap(out.t_.sizes[wrap(a)], out.t_.sizes[wrap(b)]);
    std::swap(out.t_.strides[wrap(a)], out.t_.strides[wrap(b)]);
    return out;
  }
  Tensor t() const {
    if (dim() != 2) detail::fail("t() of a " + std::to_string(dim()) + "-dimensional tensor");
    return transpose(0, 1);
  }
  Tensor permute(const std::vector<int64_t>& order) const {
    if (static_cast<int64_t>(order.size()) != dim()) detail::fail("permute() needs one index per dimension");
    Tensor out = *this;
    std::vector<bool> seen(order.size(), false);
    for (std::size_t i = 0; i < order.size(); ++i) {
      const int d = wrap(order[i]);
      if (seen[d]) detail::fail("permute() names a dimension twice");
      seen[d] = true;
      out.t_.sizes[i] = t_.sizes[d];
      out.t_.strides[i] = t_.strides[d];
    }
    return out;
  }
  Tensor narrow(int64_t d, int64_t start, int64_t length) const {
    const int i = wrap(d);
    if (start < 0 || length < 0 || start + length > t_.sizes[i]) detail::fail("narrow() out of range");
    Tensor out = *this;
    out.t_.data = static_cast<char*>(t_.data) + start * t_.strides[i] * static_cast<int64_t>(element_size());
    out.t_.sizes[i] = length;
    return out;
  }
  Tensor select(int64_t d, int64_t index) const {
    const int i = wrap(d);
    if (index < 0) index += t_.sizes[i];
    if (index < 0 || index >= t_.sizes[i]) detail::fail("select() index out of range");
    Tensor out = narrow(i, index, 1);
    for (int k = i; k + 1 < t_.dim; ++k) {
      out.t_.sizes[k] = out.t_.sizes[k + 1];
      out.t_.strides[k] = out.t_.strides[k + 1];
    }
    --out.t_.dim;
    return out;
  }

  const kloop_tensor& raw() const { return t_; }
  // A kloop_tensor that counts one reference of its own (for kloop).
  kloop_tensor release_raw() && {
    kloop_tensor out = t_;
    t_.owner = nullptr;
    t_.data = nullptr;
    return out;
  }

  static std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
    std::vector<int64_t> s(shape.size(), 1);
    for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * (shape[i + 1] > 1 ? shape[i + 1] : 1);
    return s;
  }

 private:
  int wrap(int64_t d) const {
    const int64_t i = d < 0 ? d + t_.dim : d;
    if (i < 0 || i >= t_.dim) {
      detail::fail("dimension " + std::to_string(d) + " of a " + std::to_string(t_.dim) + "-dimensional tensor");
    }
    return static_cast<int>(i);
  }
  void set_shape(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
    if (shape.size() > KLOOP_MAX_DIMS) detail::fail("more than 8 dimensions");
    for (int64_t s : shape) {
      if (s < 0) detail::fail("a negative size");
    }
    t_.dim = static_cast<int32_t>(shape.size());
    for (std::size_t i = 0; i < shape.size(); ++i) {
      t_.sizes[i] = shape[i];
      t_.strides[i] = strides[i];
    }
  }
  void retain() {
    if (t_.owner) detail::host().retain(detail::host().ctx, t_.owner);
  }
  void release() {
    if (t_.owner) detail::host().release(detail::host().ctx, t_.owner);
    t_.owner = nullptr;
  }

  kloop_tensor t_;
};

// New tensors on the module's device, contiguous, owned by kloop.
namespace detail {
// A new tensor from kloop's allocator, its bytes zeroed when `zero`.
inline Tensor allocate(const std::vector<int64_t>& sizes, DType dtype, int zero, const char* what) {
  if (sizes.size() > KLOOP_MAX_DIMS) fail(std::string(what) + "() with more than 8 dimensions");
  kloop_tensor out;
  check_host(host().empty(host().ctx, static_cast<int32_t>(dtype), static_cast<int32_t>(sizes.size()), sizes.data(),
                          zero, &out),
             what);
  return Tensor::adopt(out);
}
}  // namespace detail

inline Tensor empty(const std::vector<int64_t>& sizes, DType dtype = DType::Float32) {
  return detail::allocate(sizes, dtype, 0, "empty");
}
inline Tensor zeros(const std::vector<int64_t>& sizes, DType dtype = DType::Float32) {
  return detail::allocate(sizes, dtype, 1, "zeros");
}
inline Tensor empty_like(const Tensor& t) { return empty(t.sizes(), t.dtype()); }
inline Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), t.dtype()); }

// The stream kloop times the module on (the current stream): launch every kernel there. Null on CPU.
inline void* current_stream_handle() { return detail::host().stream(detail::host().ctx); }
#if defined(__CUDACC__) || defined(CUDART_VERSION)
inline cudaStream_t current_stream() { return static_cast<cudaStream_t>(current_stream_handle()); }
#endif

// What a module's constructor receives: the problem's weights (named as in
// the reference's state_dict) and constructor arguments. Accessors throw
// std::runtime_error naming what exists.
class ModuleInit {
 public:
  explicit ModuleInit(const kloop_init& init) : init_(init) {}

  bool has_param(const std::string& name) const {
    for (const auto& n : param_names()) {
      if (n == name) return true;
    }
    return false;
  }
  Tensor param(const std::string& name) const {
    kloop_tensor out;
    detail::check_host(init_.param(init_.ctx, name.c_str(), &out), "param");
    return Tensor::adopt(out);
  }
  std::vector<std::string> param_names() const {
    std::vector<std::string> out;
    const int32_t n = init_.param_count(init_.ctx);
    for (int32_t i = 0; i < n; ++i) out.emplace_back(init_.param_name(init_.ctx, i));
    return out;
  }
  bool has_arg(const std::string& name) const { return init_.has_arg(init_.ctx, name.c_str()) != 0; }
  int64_t arg_int(const std::string& name) const {
    int64_t v = 0;
    detail::check_host(init_.arg_int(init_.ctx, name.c_str(), &v), "arg_int");
    return v;
  }
  double arg_float(const std::string& name) const {
    double v = 0;
    detail::check_host(init_.arg_float(init_.ctx, name.c_str(), &v), "arg_float");
    return v;
  }
  bool arg_bool(const std::string& name) const {
    int32_t v = 0;
    detail::check_host(init_.arg_bool(init_.ctx, name.c_str(), &v), "arg_bool");
    return v != 0;
  }
  std::vector<int64_t> arg_ints(const std::string& name) const {
    int32_t n = 0;
    detail::check_host(init_.arg_ints(init_.ctx, name.c_str(), nullptr, 0, &n), "arg_ints");
    std::vector<int64_t> v(static_cast<std::size_t>(n));
    detail::check_host(init_.arg_ints(init_.ctx, name.c_str(), v.data(), n, &n), "arg_ints");
    return v;
  }
  std::string arg_string(const std::string& name) const {
    int32_t n = 0;
    detail::check_host(init_.arg_string(init_.ctx, name.c_str(), nullptr, 0, &n), "arg_string");
    std::string s(static_cast<std::size_t>(n), '\0');
    detail::check_host(init_.arg_string(init_.ctx, name.c_str(), s.data(), n, &n), "arg_string");
    return s;
  }
  // "cpu" or "cuda:N": where inputs live and where outputs must be.
  std::string device() const { return init_.device; }

 private:
  const kloop_init& init_;
};

namespace detail {

template <typename T>
struct LightSignature;
template <typename C, typename R, typename... Args>
struct LightSignature<R (C::*)(Args...)> {
  static constexpr std::size_t kArity = sizeof...(Args);
  static constexpr bool kTensorArgs = (std::is_same<std::decay_t<Args>, Tensor>::value && ...);
};
template <typename C, typename R, typename... Args>
struct LightSignature<R (C::*)(Args...) const> : LightSignature<R (C::*)(Args...)> {};

inline void flatten(Tensor t, std::vector<Tensor>& out) { out.push_back(std::move(t)); }
inline void flatten(std::vector<Tensor> v, std::vector<Tensor>& out) {
  for (auto& t : v) out.push_back(std::move(t));
}
template <typename... Ts>
void flatten(std::tuple<Ts...> tuple, std::vector<Tensor>& out) {
  std::apply([&out](auto&&... t) { (flatten(std::move(t), out), ...); }, std::move(tuple));
}

inline void write_error(const char* what, char* err, std::size_t capacity) {
  if (!err || capacity == 0) return;
  std::strncpy(err, what, capacity - 1);
  err[capacity - 1] = '\0';
}

template <typename M>
struct LightModule {
  using Signature = LightSignature<decltype(&M::forward)>;
  static_assert(Signature::kTensorArgs, "kloop: forward must take only kloop::Tensor arguments (by value or const&)");

  static M* create(const kloop_init& init) {
    if constexpr (std::is_constructible_v<M, const ModuleInit&>) {
      ModuleInit view(init);
      return new M(view);
    } else {
      static_assert(std::is_default_constructible_v<M>,
                    "kloop: the module needs a constructor taking const kloop::ModuleInit& "
                    "(or a default constructor when the problem has no weights or arguments)");
      return new M();
    }
  }

  template <std::size_t... I>
  static void forward(M& m, const std::vector<Tensor>& in, std::vector<Tensor>& out, std::index_sequence<I...>) {
    flatten(m.forward(in[I]...), out);
  }
};

}  // namespace detail
}  // namespace kloop

// Registers the candidate class (conventionally ModelNew), once per file. The entry points
// catch every exception and hand its text to kloop.
#define KLOOP_REGISTER_CANDIDATE(CLASS)                                                                          \
  extern "C" __attribute__((visibility("default"))) int kloop_candidate_api_version() {                          \
    return KLOOP_LIGHT_API_VERSION;                                                                              \
  }                                                                                                              \
  extern "C" __attribute__((visibility("default"))) int kloop_candidate_forward_arity() {                        \
    return static_cast<int>(kloop::detail::LightModule<CLASS>::Signature::kArity);                               \
  }                                                                                                              \
  extern "C" __attribute__((visibility("default"))) void* kloop_candidate_light_create(                          \
      const kloop_host* host, const kloop_init* init, char* err, std::size_t capacity) {                         \
    try {                                                                                                        \
      kloop::detail::host_slot() = host;                                                                         \
      return kloop::detail::LightModule<CLASS>::create(*init);                                                   \
    } catch (const std::exception& e) {                                                                          \
      kloop::detail::write_error(e.what(), err, capacity);                                                       \
    } catch (...) {                                                                                              \
      kloop::detail::write_error("the constructor threw a non-standard exception", err, capacity);               \
    }                                                                                                            \
    return nullptr;                                                                                              \
  }                                                                                                              \
  extern "C" __attribute__((visibility("default"))) int kloop_candidate_light_forward(                           \
      void* module, const kloop_tensor* inputs, int32_t n_inputs, kloop_tensor* outputs, int32_t capacity,       \
      int32_t* n_outputs, char* err, std::size_t err_capacity) {                                                 \
    using Light = kloop::detail::LightModule<CLASS>;                                                             \
    try {                                                                                                        \
      if (n_inputs != static_cast<int32_t>(Light::Signature::kArity)) {                                          \
        throw std::invalid_argument("kloop: forward takes " + std::to_string(Light::Signature::kArity) +         \
                                    " tensor(s) but the problem passes " + std::to_string(n_inputs));            \
      }                                                                                                          \
      std::vector<kloop::Tensor> in, out;                                                                        \
      for (int32_t i = 0; i < n_inputs; ++i) in.push_back(kloop::Tensor::borrow(inputs[i]));                    \
      Light::forward(*static_cast<CLASS*>(module), in, out, std::make_index_sequence<Light::Signature::kArity>{}); \
      if (static_cast<int32_t>(out.size()) > capacity) {                                                         \
        throw std::length_error("kloop: forward returned " + std::to_string(out.size()) +                        \
                                " tensors, more than the " + std::to_string(capacity) + " kloop takes");         \
      }                                                                                                          \
      *n_outputs = static_cast<int32_t>(out.size());                                                             \
      for (std::size_t i = 0; i < out.size(); ++i) outputs[i] = std::move(out[i]).release_raw();                 \
      return 0;                                                                                                  \
    } catch (const std::exception& e) {                                                                          \
      kloop::detail::write_error(e.what(), err, err_capacity);                                                   \
    } catch (...) {                                                                                              \
      kloop::detail::write_error("forward threw a non-standard exception", err, err_capacity);                   \
    }                                                                                                            \
    return 1;                                                                                                    \
  }                                                                                                              \
  extern "C" __attribute__((visibility("default"))) void kloop_candidate_light_destroy(void* module) {           \
    delete static_cast<CLASS*>(module);                                                                          \
  }
