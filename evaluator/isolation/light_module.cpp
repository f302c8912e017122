#include "evaluator/isolation/light_module.h"

#include <ATen/ops/empty.h>

#ifdef KLOOP_WITH_CUDA
#include <cuda_runtime_api.h>

#include "base/cuda_check.h"
#endif

#include <array>
#include <atomic>
#include <stdexcept>
#include <vector>

namespace kloop {
namespace {

// ATen's element types in the order of kloop::DType in <kloop/light_api.h>.
constexpr std::array<at::ScalarType, 10> kDTypes = {
    at::ScalarType::Float, at::ScalarType::Double, at::ScalarType::Half,  at::ScalarType::BFloat16,
    at::ScalarType::Long,  at::ScalarType::Int,    at::ScalarType::Short, at::ScalarType::Char,
    at::ScalarType::Byte,  at::ScalarType::Bool};

int32_t light_dtype(at::ScalarType t) {
  for (std::size_t i = 0; i < kDTypes.size(); ++i) {
    if (kDTypes[i] == t) return static_cast<int32_t>(i);
  }
  throw std::runtime_error(std::string("kloop tensors do not carry ") + c10::toString(t) +
                           " (use <kloop/kernel_api.h> for it)");
}

at::ScalarType aten_dtype(int32_t t) {
  if (t < 0 || t >= static_cast<int32_t>(kDTypes.size())) {
    throw std::runtime_error("unknown kloop dtype " + std::to_string(t));
  }
  return kDTypes[static_cast<std::size_t>(t)];
}

struct Owner {
  at::Tensor tensor;
  std::atomic<long> references{1};
};

// The one host table of this process: a module's header keeps a pointer to
// it for as long as the library is loaded, so it outlives every module.
struct HostState {
  std::string device = "cpu";
  void* stream = nullptr;
};
HostState host_state;
thread_local std::string last_error;

template <typename F>
int guarded(F&& f) {
  try {
    f();
    return 0;
  } catch (const c10::Error& e) {
    last_error = e.what_without_backtrace();
  } catch (const std::exception& e) {
    last_error = e.what();
  }
  return 1;
}

int host_empty(void*, int32_t dtype, int32_t dim, const int64_t* sizes, int32_t zeroed, kloop_tensor* out) {
  return guarded([&] {
    if (dim < 0 || dim > KLOOP_MAX_DIMS) throw std::runtime_error("a tensor of " + std::to_string(dim) + " dimensions");
    std::vector<int64_t> shape(sizes, sizes + dim);
    for (int64_t s : shape) {
      if (s < 0) throw std::runtime_error("a negative size (" + std::to_string(s) + ")");
    }
    const auto options = at::TensorOptions().dtype(aten_dtype(dtype)).device(at::Device(host_state.device));
    at::Tensor t = at::empty(shape, options);
    if (zeroed && t.numel() > 0) {
#ifdef KLOOP_WITH_CUDA
      // A memset on kloop's stream, not ATen's fill kernel, which strict
      // would count as library work of the module's.
      if (t.is_cuda()) {
        KLOOP_CUDA_CHECK(cudaMemsetAsync(t.data_ptr(), 0, t.nbytes(), static_cast<cudaStream_t>(host_state.stream)),
                         "zeros");
      } else {
        t.zero_();
      }
#else
      t.zero_();
#endif
    }
    *out = light_from_aten(t);
  });
}

int host_contiguous(void*, const kloop_tensor* in, kloop_tensor* out) {
  return guarded([&] { *out = light_from_aten(light_to_aten(*in).contiguous()); });
}

void host_retain(void*, void* owner) { static_cast<Owner*>(owner)->references.fetch_add(1); }

void host_release(void*, void* owner) {
  auto* o = static_cast<Owner*>(owner);
  if (o->references.fetch_sub(1) == 1) delete o;
}

void* host_stream(void*) { return host_state.stream; }
const char* host_last_error(void*) { return last_error.c_str(); }

const kloop_host kHost = {KLOOP_LIGHT_API_VERSION, nullptr,      host_empty,     host_contiguous,
                          host_retain,             host_release, host_stream,    host_last_error};

// The constructor's view of a ModuleInit.
struct InitState {
  const ModuleInit* init;
  std::vector<std::string> names;
};

const ModuleInit& of(void* ctx) { return *static_cast<InitState*>(ctx)->init; }

int init_param(void* ctx, const char* name, kloop_tensor* out) {
  return guarded([&] { *out = light_from_aten(of(ctx).param(name)); });
}
int32_t init_param_count(void* ctx) { return static_cast<int32_t>(static_cast<InitState*>(ctx)->names.size()); }
const char* init_param_name(void* ctx, int32_t i) {
  const auto& names = static_cast<InitState*>(ctx)->names;
  return i >= 0 && static_cast<std::size_t>(i) < names.size() ? names[static_cast<std::size_t>(i)].c_str() : "";
}
int init_has_arg(void* ctx, const char* name) { return of(ctx).has_arg(name) ? 1 : 0; }
int init_arg_int(void* ctx, const char* name, int64_t* out) {
  return guarded([&] { *out = of(ctx).arg_int(name); });
}
int init_arg_float(void* ctx, const char* name, double* out) {
  return guarded([&] { *out = of(ctx).arg_float(name); });
}
int init_arg_bool(void* ctx, const char* name, int32_t* out) {
  return guarded([&] { *out = of(ctx).arg_bool(name) ? 1 : 0; });
}
int init_arg_ints(void* ctx, const char* name, int64_t* out, int32_t capacity, int32_t* count) {
  return guarded([&] {
    const std::vector<int64_t> v = of(ctx).arg_ints(name);
    *count = static_cast<int32_t>(v.size());
    for (int32_t i = 0; i < capacity && static_cast<std::size_t>(i) < v.size(); ++i) out[i] = v[static_cast<std::size_t>(i)];
  });
}
int init_arg_string(void* ctx, const char* name, char* out, int32_t capacity, int32_t* length) {
  return guarded([&] {
    const std::string s = of(ctx).arg_string(name);
    *length = static_cast<int32_t>(s.size());
    for (int32_t i = 0; i < capacity && static_cast<std::size_t>(i) < s.size(); ++i) out[i] = s[static_cast<std::size_t>(i)];
  });
}

// Releases a set of kloop_tensors when it goes.
struct Held {
  std::vector<kloop_tensor> tensors;
  ~Held() {
    for (const auto& t : tensors) light_release(t);
  }
};

class LightRunner : public ModuleRunner {
 public:
  LightRunner(const LightEntryPoints& entry, void* module) : entry_(entry), module_(module) {}
  ~LightRunner() override { entry_.destroy(module_); }
  LightRunner(const LightRunner&) = delete;
  LightRunner& operator=(const LightRunner&) = delete;

  std::vector<at::Tensor> forward(const std::vector<at::Tensor>& inputs) override {
    Held in;
    for (const auto& t : inputs) in.tensors.push_back(light_from_aten(t));
    constexpr int32_t kCapacity = 64;
    std::array<kloop_tensor, kCapacity> raw{};
    int32_t count = 0;
    std::array<char, 4096> err{};
    const int rc = entry_.forward(module_, in.tensors.data(), static_cast<int32_t>(in.tensors.size()), raw.data(),
                                  kCapacity, &count, err.data(), err.size());
    if (rc != 0) throw std::runtime_error(err[0] ? err.data() : "forward failed");
    if (count < 0 || count > kCapacity) throw std::runtime_error("forward reported " + std::to_string(count) + " outputs");
    Held out;
    out.tensors.assign(raw.begin(), raw.begin() + count);
    std::vector<at::Tensor> result;
    for (int32_t i = 0; i < count; ++i) {
      try {
        result.push_back(light_to_aten(out.tensors[static_cast<std::size_t>(i)]));
      } catch (const std::exception& e) {
        throw std::runtime_error("output " + std::to_string(i) + ": " + e.what());
      }
    }
    return result;
  }

 private:
  LightEntryPoints entry_;
  void* module_;
};

}  // namespace

kloop_tensor light_from_aten(const at::Tensor& t) {
  kloop_tensor out{};
  if (!t.defined()) return out;
  if (t.dim() > KLOOP_MAX_DIMS) {
    throw std::runtime_error("kloop tensors have at most 8 dimensions, this one has " + std::to_string(t.dim()));
  }
  out.dtype = light_dtype(t.scalar_type());
  out.dim = static_cast<int32_t>(t.dim());
  for (int64_t i = 0; i < t.dim(); ++i) {
    out.sizes[i] = t.size(i);
    out.strides[i] = t.stride(i);
  }
  out.device = t.is_cuda() ? static_cast<int32_t>(t.get_device()) : -1;
  out.data = t.data_ptr();
  out.owner = new Owner{t};
  return out;
}

void light_release(const kloop_tensor& t) {
  if (t.owner) host_release(nullptr, t.owner);
}

at::Tensor light_to_aten(const kloop_tensor& t) {
  if (!t.owner) {
    if (!t.data) throw std::runtime_error("an undefined kloop::Tensor");
    throw std::runtime_error("not a kloop tensor (memory the module allocated itself); allocate outputs with "
                             "kloop::empty, empty_like or zeros");
  }
  const at::Tensor& base = static_cast<const Owner*>(t.owner)->tensor;
  if (t.dim < 0 || t.dim > KLOOP_MAX_DIMS) throw std::runtime_error("a view of " + std::to_string(t.dim) + " dimensions");
  if (aten_dtype(t.dtype) != base.scalar_type()) {
    throw std::runtime_error(std::string("a view of ") + c10::toString(aten_dtype(t.dtype)) + " over " +
                             c10::toString(base.scalar_type()) + " memory");
  }
  if (t.device != (base.is_cuda() ? static_cast<int32_t>(base.get_device()) : -1)) {
    throw std::runtime_error("a view naming another device than its memory's");
  }
  std::vector<int64_t> sizes(t.sizes, t.sizes + t.dim), strides(t.strides, t.strides + t.dim);
  __int128 numel = 1, last = 0;
  for (int i = 0; i < t.dim; ++i) {
    if (sizes[i] < 0 || strides[i] < 0) throw std::runtime_error("a view with a negative size or stride");
    numel *= sizes[i];
    if (sizes[i] > 0) last += static_cast<__int128>(sizes[i] - 1) * strides[i];
  }
  if (numel == 0) return at::empty(sizes, base.options());
  const auto item = static_cast<__int128>(base.element_size());
  const char* storage = static_cast<const char*>(base.storage().data());
  const __int128 offset = static_cast<const char*>(t.data) - storage;
  const auto storage_bytes = static_cast<__int128>(base.storage().nbytes());
  if (!storage || offset < 0 || offset % item != 0 || offset + (last + 1) * item > storage_bytes) {
    throw std::runtime_error("a view that reaches outside the memory it was made from");
  }
  return base.as_strided(sizes, strides, static_cast<int64_t>(offset / item));
}

std::unique_ptr<ModuleRunner> make_light_module(const LightEntryPoints& entry, const ModuleInit& init,
                                                const std::string& device, void* stream) {
  host_state.device = device;
  host_state.stream = stream;
  InitState state{&init, init.param_names()};
  const std::string device_name = init.device();
  const kloop_init view = {&state,         device_name.c_str(), init_param,    init_param_count,
                           init_param_name, init_has_arg,       init_arg_int,  init_arg_float,
                           init_arg_bool,  init_arg_ints,       init_arg_string};
  std::array<char, 4096> err{};
  void* module = entry.create(&kHost, &view, err.data(), err.size());
  if (!module) throw std::runtime_error(err[0] ? err.data() : "the constructor failed");
  return std::make_unique<LightRunner>(entry, module);
}

}  // namespace kloop
