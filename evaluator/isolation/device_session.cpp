// CPU and CUDA implementations of DeviceSession. Host code only: the CUDA
// runtime is called from here, no kernels are defined.
#include "evaluator/isolation/device_session.h"

#include <dlfcn.h>

#include <algorithm>
#include <stdexcept>

#ifdef KLOOP_WITH_CUDA
#include <ATen/Context.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "base/cuda_check.h"
#endif

namespace kloop {

#ifdef KLOOP_WITH_CUDA
namespace {

// NVML through dlopen: the driver ships libnvidia-ml.so.1, and kloop needs
// three of its C functions, so no header or link-time dependency.
class ClockMonitor {
 public:
  explicit ClockMonitor(int cuda_index) {
    char bus[32] = {0};
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), cuda_index) != cudaSuccess) {
      status_ = "unavailable: no PCI bus id for the device";
      return;
    }
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib_) {
      status_ = "unavailable: libnvidia-ml.so.1 not found";
      return;
    }
    using Init = int (*)();
    using ByPci = int (*)(const char*, void**);
    auto init = reinterpret_cast<Init>(dlsym(lib_, "nvmlInit_v2"));
    auto by_pci = reinterpret_cast<ByPci>(dlsym(lib_, "nvmlDeviceGetHandleByPciBusId_v2"));
    reasons_ = reinterpret_cast<Reasons>(dlsym(lib_, "nvmlDeviceGetCurrentClocksEventReasons"));
    if (!reasons_) reasons_ = reinterpret_cast<Reasons>(dlsym(lib_, "nvmlDeviceGetCurrentClocksThrottleReasons"));
    if (!init || !by_pci || !reasons_) {
      status_ = "unavailable: libnvidia-ml.so.1 lacks the clock-reason functions";
      reasons_ = nullptr;
    } else if (init() != 0 || by_pci(bus, &device_) != 0) {
      status_ = std::string("unavailable: NVML cannot open device ") + bus;
      reasons_ = nullptr;
    } else {
      status_ = "nvml";
    }
  }
  // Software power cap, hardware slowdown, software and hardware thermal
  // slowdown, power brake: each lowers the SM clock (NVML's reason bits).
  bool throttled() const {
    constexpr unsigned long long kSlowdowns = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;
    unsigned long long r = 0;
    return reasons_ && reasons_(device_, &r) == 0 && (r & kSlowdowns) != 0;
  }
  const std::string& status() const { return status_; }

 private:
  using Reasons = int (*)(void*, unsigned long long*);
  void* lib_ = nullptr;
  void* device_ = nullptr;
  Reasons reasons_ = nullptr;
  std::string status_;
};

}  // namespace

struct DeviceSession::Cuda {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  void* flush = nullptr;
  std::size_t l2_bytes = 0;
  unsigned char fill = 0;
  cudaDeviceProp props{};
  std::unique_ptr<ClockMonitor> clocks;
};
#else
struct DeviceSession::Cuda {};
#endif

DeviceSession::DeviceSession(const std::string& device) {
  if (device == "cpu") return;
#ifdef KLOOP_WITH_CUDA
  cuda_ = true;
  index_ = device.rfind("cuda:", 0) == 0 ? std::stoi(device.substr(5)) : 0;
  gpu_ = std::make_unique<Cuda>();
  KLOOP_CUDA_CHECK(cudaSetDevice(index_), "CUDA error during cudaSetDevice");
  KLOOP_CUDA_CHECK(cudaGetDeviceProperties(&gpu_->props, index_), "CUDA error during cudaGetDeviceProperties");
  // A blocking stream: work a module puts on the legacy default stream
  // (a plain <<<grid, block>>>) is ordered with it, so events see it.
  KLOOP_CUDA_CHECK(cudaStreamCreateWithFlags(&gpu_->stream, cudaStreamDefault), "CUDA error during cudaStreamCreate");
  c10::cuda::setCurrentCUDAStream(c10::cuda::getStreamFromExternal(gpu_->stream, static_cast<c10::DeviceIndex>(index_)));
  KLOOP_CUDA_CHECK(cudaEventCreate(&gpu_->start), "CUDA error during cudaEventCreate");
  KLOOP_CUDA_CHECK(cudaEventCreate(&gpu_->stop), "CUDA error during cudaEventCreate");
  gpu_->l2_bytes = static_cast<std::size_t>(gpu_->props.l2CacheSize);
  KLOOP_CUDA_CHECK(cudaMalloc(&gpu_->flush, gpu_->l2_bytes), "CUDA error during allocating the L2 flush buffer");
  // A fresh context's limit is the driver's default (11.25 MiB on the H200
  // machine), not the module's doing: cleared without being noted.
  clear_persisting_l2();
  gpu_->clocks = std::make_unique<ClockMonitor>(index_);
  set_tf32(false);  // expected outputs are computed in full FP32
  set_deterministic(false);
#else
  throw std::invalid_argument("device " + device + ": this kloop-worker was built without CUDA");
#endif
}

DeviceSession::~DeviceSession() {
#ifdef KLOOP_WITH_CUDA
  if (gpu_) {
    // Best effort: after a device fault these fail, and that is fine.
    if (gpu_->flush) cudaFree(gpu_->flush);
    if (gpu_->start) cudaEventDestroy(gpu_->start);
    if (gpu_->stop) cudaEventDestroy(gpu_->stop);
  }
#endif
}

void* DeviceSession::stream() const {
#ifdef KLOOP_WITH_CUDA
  if (cuda_) return gpu_->stream;
#endif
  return nullptr;
}

void DeviceSession::restore_stream() {
#ifdef KLOOP_WITH_CUDA
  if (cuda_) {
    c10::cuda::setCurrentCUDAStream(c10::cuda::getStreamFromExternal(gpu_->stream, static_cast<c10::DeviceIndex>(index_)));
  }
#endif
}

void DeviceSession::synchronize() {
#ifdef KLOOP_WITH_CUDA
  if (cuda_) {
    KLOOP_CUDA_CHECK(cudaDeviceSynchronize(), "CUDA error during the module's kernels");
    KLOOP_CUDA_CHECK(cudaGetLastError(), "CUDA error during the module's kernel launches");
  }
#endif
}

void DeviceSession::release_cached_memory() {
#ifdef KLOOP_WITH_CUDA
  if (cuda_) {
    synchronize();
    c10::cuda::CUDACachingAllocator::emptyCache();
  }
#endif
}

void DeviceSession::synchronize_stream() {
#ifdef KLOOP_WITH_CUDA
  if (cuda_) {
    KLOOP_CUDA_CHECK(cudaEventRecord(gpu_->stop, gpu_->stream), "CUDA error during cudaEventRecord");
    KLOOP_CUDA_CHECK(cudaEventSynchronize(gpu_->stop), "CUDA error during the module's kernels");
  }
#endif
}

void DeviceSession::mark_legacy_stream() {
#ifdef KLOOP_WITH_CUDA
  if (cuda_) {
    KLOOP_CUDA_CHECK(cudaMemsetAsync(gpu_->flush, 0, 4, cudaStreamLegacy),
                     "CUDA error during the legacy-stream marker");
    KLOOP_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy), "CUDA error during the legacy-stream marker");
  }
#endif
}

void DeviceSession::mark_call_end(std::size_t bytes) {
#ifdef KLOOP_WITH_CUDA
  if (cuda_) {
    KLOOP_CUDA_CHECK(cudaMemsetAsync(gpu_->flush, 0, bytes, gpu_->stream), "CUDA error during the end-of-call marker");
  }
#else
  (void)bytes;
#endif
}

void DeviceSession::set_tf32(bool on) {
#ifdef KLOOP_WITH_CUDA
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  at::globalContext().setAllowTF32CuBLAS(on);
  at::globalContext().setAllowTF32CuDNN(on);
#pragma GCC diagnostic pop
#else
  (void)on;
#endif
}

void DeviceSession::begin_sample(bool flush_l2, bool guard_l2) {
  guard_l2_ = guard_l2;
#ifdef KLOOP_WITH_CUDA
  if (cuda_) {
    if (guard_l2 && gpu_->props.persistingL2CacheMaxSize > 0) {
      reset_persisting_l2();
      KLOOP_CUDA_CHECK(cudaCtxResetPersistingL2Cache(), "CUDA error during demoting persisting L2 lines");
    }
    if (flush_l2) {
      // A different byte each time, so the memset cannot be elided or cached.
      KLOOP_CUDA_CHECK(cudaMemsetAsync(gpu_->flush, ++gpu_->fill, gpu_->l2_bytes, gpu_->stream),
                       "CUDA error during the L2 flush");
    }
    throttled_at_begin_ = gpu_->clocks->throttled();
    KLOOP_CUDA_CHECK(cudaEventRecord(gpu_->start, gpu_->stream), "CUDA error during cudaEventRecord");
  }
#else
  (void)flush_l2;
#endif
  wall_start_ = std::chrono::steady_clock::now();
}

double DeviceSession::end_sample() {
#ifdef KLOOP_WITH_CUDA
  if (cuda_) {
    KLOOP_CUDA_CHECK(cudaEventRecord(gpu_->stop, gpu_->stream), "CUDA error during cudaEventRecord");
    synchronize();
    if (guard_l2_) observe_persisting_l2();
    last_wall_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count();
    last_throttled_ = throttled_at_begin_ || gpu_->clocks->throttled();
    float ms = 0;
    KLOOP_CUDA_CHECK(cudaEventElapsedTime(&ms, gpu_->start, gpu_->stop), "CUDA error during cudaEventElapsedTime");
    return ms * 1e-3;
  }
#endif
  last_wall_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count();
  return last_wall_;
}

void DeviceSession::flush_l2_async() {
#ifdef KLOOP_WITH_CUDA
  if (cuda_) {
    KLOOP_CUDA_CHECK(cudaMemsetAsync(gpu_->flush, ++gpu_->fill, gpu_->l2_bytes, gpu_->stream),
                     "CUDA error during the L2 flush");
  }
#endif
}

void DeviceSession::guard_persisting_l2() {
#ifdef KLOOP_WITH_CUDA
  if (cuda_ && gpu_->props.persistingL2CacheMaxSize > 0) {
    reset_persisting_l2();
    KLOOP_CUDA_CHECK(cudaCtxResetPersistingL2Cache(), "CUDA error during demoting persisting L2 lines");
  }
#endif
}

bool DeviceSession::throttled_now() const {
#ifdef KLOOP_WITH_CUDA
  if (cuda_) return gpu_->clocks->throttled();
#endif
  return false;
}

long long DeviceSession::persisting_l2_limit() const {
  long long now = 0;
#ifdef KLOOP_WITH_CUDA
  if (cuda_) {
    std::size_t v = 0;
    if (cudaDeviceGetLimit(&v, cudaLimitPersistingL2CacheSize) == cudaSuccess) now = static_cast<long long>(v);
  }
#endif
  return std::max(now, l2_limit_seen_);
}

long long DeviceSession::persisting_l2_window_bytes() const { return l2_window_seen_; }

void DeviceSession::observe_persisting_l2() {
#ifdef KLOOP_WITH_CUDA
  if (!cuda_) return;
  std::size_t limit = 0;
  if (cudaDeviceGetLimit(&limit, cudaLimitPersistingL2CacheSize) == cudaSuccess) {
    l2_limit_seen_ = std::max(l2_limit_seen_, static_cast<long long>(limit));
  }
  cudaStreamAttrValue window{};
  if (cudaStreamGetAttribute(gpu_->stream, cudaStreamAttributeAccessPolicyWindow, &window) == cudaSuccess) {
    l2_window_seen_ = std::max(l2_window_seen_, static_cast<long long>(window.accessPolicyWindow.num_bytes));
  }
  cudaGetLastError();  // a device without the attribute: nothing to see
#endif
}

void DeviceSession::reset_persisting_l2() {
  observe_persisting_l2();  // what the module left set is seen before it goes
  clear_persisting_l2();
}

void DeviceSession::clear_persisting_l2() {
#ifdef KLOOP_WITH_CUDA
  if (cuda_ && gpu_->props.persistingL2CacheMaxSize > 0) {
    KLOOP_CUDA_CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0),
                     "CUDA error during resetting the persisting-L2 limit");
    cudaStreamAttrValue none{};
    KLOOP_CUDA_CHECK(cudaStreamSetAttribute(gpu_->stream, cudaStreamAttributeAccessPolicyWindow, &none),
                     "CUDA error during clearing the stream's access-policy window");
  }
#endif
}

void DeviceSession::set_deterministic(bool on) {
#ifdef KLOOP_WITH_CUDA
  if (cuda_) {
    at::globalContext().setDeterministicCuDNN(on);
    at::globalContext().setBenchmarkCuDNN(false);
    // warn_only: an op without a deterministic kernel still runs.
    at::globalContext().setDeterministicAlgorithms(on, /*warn_only=*/true);
  }
#else
  (void)on;
#endif
}

std::string DeviceSession::clock_monitor() const {
#ifdef KLOOP_WITH_CUDA
  if (cuda_) return gpu_->clocks->status();
#endif
  return "unavailable: CPU";
}

nlohmann::json DeviceSession::info() const {
#ifdef KLOOP_WITH_CUDA
  if (cuda_) {
    int driver = 0;
    cudaDriverGetVersion(&driver);
    const auto& p = gpu_->props;
    return {{"device", "cuda:" + std::to_string(index_)}, {"name", p.name},
            {"compute_capability", std::to_string(p.major) + "." + std::to_string(p.minor)},
            {"sms", p.multiProcessorCount},  {"l2_bytes", p.l2CacheSize},
            {"memory_bytes", p.totalGlobalMem}, {"cuda_driver", driver}};
  }
#endif
  return {{"device", "cpu"}};
}

}  // namespace kloop
