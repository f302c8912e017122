#include "profiler/activity_tracer.h"

#include <cuda_runtime_api.h>
#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <generated_cuda_runtime_api_meta.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

#include "profiler/detail/cupti_status.h"

namespace kloop::profiler {
namespace {

constexpr std::size_t kBufferBytes = 8 << 20;
constexpr std::size_t kBufferAlignment = 8;  // CUPTI requires 8-byte aligned activity buffers
constexpr CUpti_ActivityKind kTracedKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                               CUPTI_ACTIVITY_KIND_MEMSET};

// The launch calls whose callers are recorded: every kernel launch, cooperative
// and graph launch of the runtime and the driver API.
constexpr CUpti_CallbackId kRuntimeLaunches[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernelMultiDevice_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,  // <<<>>> from CUDA 13's nvcc
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
};
constexpr CUpti_CallbackId kDriverLaunches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
};

// CUPTI hands buffers back on its own threads, to plain function pointers:
// the records land here, and only while a tracer is recording. The launch
// callback runs on the launching thread and adds to `trace.launches` while
// launches are watched.
struct Recorder {
  std::mutex mutex;
  bool recording = false;
  bool watching = false;
  bool callbacks_registered = false;
  bool subscribed = false;
  CUpti_SubscriberHandle subscriber = nullptr;
  ActivityTrace trace;
  std::map<const void*, std::string> object_at;  // code address -> its binary, as dladdr said
};

Recorder& recorder() {
  static Recorder* r = new Recorder;  // never destroyed: CUPTI may deliver buffers during exit
  return *r;
}

std::string memcpy_kind(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "memcpy PtoP";
    default:
      return "memcpy";
  }
}

KernelRecord kernel_record(const CUpti_ActivityKernel10& k) {
  KernelRecord r;
  r.mangled = k.name ? k.name : "";
  r.name = demangle(r.mangled);
  r.grid = {static_cast<uint32_t>(k.gridX), static_cast<uint32_t>(k.gridY), static_cast<uint32_t>(k.gridZ)};
  r.block = {static_cast<uint32_t>(k.blockX), static_cast<uint32_t>(k.blockY), static_cast<uint32_t>(k.blockZ)};
  r.registers_per_thread = k.registersPerThread;
  r.static_shared_bytes = k.staticSharedMemory;
  r.dynamic_shared_bytes = k.dynamicSharedMemory;
  r.stream_id = k.streamId;
  r.start_ns = k.start;
  r.end_ns = k.end;
  r.correlation_id = k.correlationId;
  return r;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlignment, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_bytes) {
  std::vector<KernelRecord> kernels;
  std::vector<MemoryRecord> memory;
  CUpti_Activity* record = nullptr;
  while (buffer && cuptiActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        kernels.push_back(kernel_record(*reinterpret_cast<const CUpti_ActivityKernel10*>(record)));
        break;
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto& m = *reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        memory.push_back({memcpy_kind(m.copyKind), m.bytes, m.streamId, m.start, m.end});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto& m = *reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        memory.push_back({"memset", m.bytes, m.streamId, m.start, m.end});
        break;
      }
      default:
        break;
    }
  }
  std::free(buffer);
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.recording) return;  // a previous trace's leftovers
  r.trace.kernels.insert(r.trace.kernels.end(), kernels.begin(), kernels.end());
  r.trace.memory.insert(r.trace.memory.end(), memory.begin(), memory.end());
}

// The binary that contains `address`: kSelfObject for the one this tracer
// is linked into, else its path as the dynamic loader names it ("" if none).
std::string object_at(const void* address) {
  static const void* const self = [] {
    Dl_info info{};
    return dladdr(reinterpret_cast<const void*>(&object_at), &info) ? info.dli_fbase : nullptr;
  }();
  Dl_info info{};
  if (!address || !dladdr(address, &info) || !info.dli_fname) return "";
  if (info.dli_fbase == self) return kSelfObject;
  return info.dli_fname;
}

// The CUDA stack between a launch call and this callback: the driver, CUPTI
// and the shared runtime.
bool cuda_stack_object(const std::string& object) {
  const std::string file = object.substr(object.find_last_of('/') + 1);
  return file.rfind("libcuda.so", 0) == 0 || file.rfind("libcupti.so", 0) == 0 || file.rfind("libcudart.so", 0) == 0;
}

// The binary whose code called the launch API: the first frame below the
// CUDA stack on this thread's call stack ("" when the unwinder cannot get
// there). Caller addresses are looked up once each.
std::string launching_object(Recorder& r) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  bool below_cuda = false;
  for (int i = 1; i < n; ++i) {
    const void* at = static_cast<const char*>(frames[i]) - 1;  // inside the call instruction, not after it
    auto cached = r.object_at.find(at);
    const std::string object = cached != r.object_at.end() ? cached->second : (r.object_at[at] = object_at(at));
    if (cuda_stack_object(object)) {
      below_cuda = true;
    } else if (below_cuda) {
      return object;
    }
  }
  return "";
}

// The host function a runtime launch names (its stub lies in the binary
// that compiled the kernel), or null where the call names none.
const void* runtime_launch_function(CUpti_CallbackId cbid, const void* params) {
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
      return static_cast<const cudaLaunchKernel_v7000_params*>(params)->func;
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
      return static_cast<const cudaLaunchKernel_ptsz_v7000_params*>(params)->func;
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
      return static_cast<const cudaLaunchKernelExC_v11060_params*>(params)->func;
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
      return static_cast<const cudaLaunchKernelExC_ptsz_v11060_params*>(params)->func;
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
      return static_cast<const cudaLaunchCooperativeKernel_v9000_params*>(params)->func;
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000:
      return static_cast<const cudaLaunchCooperativeKernel_ptsz_v9000_params*>(params)->func;
    default:
      return nullptr;
  }
}

void CUPTIAPI launch_called(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  if (call->callbackSite != CUPTI_API_ENTER) return;
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.watching) return;
  // A runtime launch reaches the driver's launch call too, under the same
  // correlation id: the runtime's record (it can name the host stub) stands.
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    const auto& seen = r.trace.launches;
    for (std::size_t back = 0; back < seen.size() && back < 8; ++back) {
      if (seen[seen.size() - 1 - back].correlation_id == call->correlationId) return;
    }
  }
  LaunchOrigin o;
  o.correlation_id = call->correlationId;
  o.mangled = call->symbolName ? call->symbolName : "";
  o.graph = domain == CUPTI_CB_DOMAIN_RUNTIME_API
                ? cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000 ||
                      cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000
                : cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch || cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz;
  if (o.graph) o.mangled.clear();
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    if (const void* fn = runtime_launch_function(cbid, call->functionParams)) o.object = object_at(fn);
  }
  if (o.object.empty() || o.object == kSelfObject) o.object = launching_object(r);
  r.trace.launches.push_back(std::move(o));
}

// Turns the launch callbacks on (or off) for every launch call.
bool enable_launch_callbacks(Recorder& r, bool on, std::string* why) {
  const uint32_t flag = on ? 1 : 0;
  for (CUpti_CallbackId cbid : kRuntimeLaunches) {
    if (KLOOP_CUPTI_FAILED(cuptiEnableCallback(flag, r.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, cbid), why)) {
      return false;
    }
  }
  for (CUpti_CallbackId cbid : kDriverLaunches) {
    if (KLOOP_CUPTI_FAILED(cuptiEnableCallback(flag, r.subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid), why)) {
      return false;
    }
  }
  return true;
}

void disable_traced_kinds() {
  for (CUpti_ActivityKind kind : kTracedKinds) cuptiActivityDisable(kind);
}

}  // namespace

ActivityTracer::~ActivityTracer() {
  if (running_ || watching_) stop();
}

bool ActivityTracer::watch_launches(std::string* why_not) {
  auto refuse = [&](const std::string& why) {
    why_not_ = why;
    if (why_not) *why_not = why;
    return false;
  };
  if (watching_) return true;
  if (std::string missing = detail::cuda_device_missing(); !missing.empty()) return refuse(missing);
  Recorder& r = recorder();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (r.watching) return refuse("another activity tracer is watching launches in this process");
  }
  std::string why;
  if (!r.subscribed) {
    void* warm[1];
    backtrace(warm, 1);  // loads the unwinder now, not inside a launch
    if (KLOOP_CUPTI_FAILED(cuptiSubscribe(&r.subscriber, launch_called, nullptr), &why)) {
      return refuse(why + " (the launch callbacks that name each kernel's binary are taken: another CUPTI "
                          "client, such as a profiler, holds them)");
    }
    r.subscribed = true;
  }
  if (!enable_launch_callbacks(r, true, &why)) {
    std::string ignored;
    enable_launch_callbacks(r, false, &ignored);
    return refuse(why);
  }
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.watching = true;
    r.trace.launches.clear();
  }
  watching_ = true;
  return true;
}

bool ActivityTracer::start(std::string* why_not) {
  auto refuse = [&](const std::string& why) {
    why_not_ = why;
    if (why_not) *why_not = why;
    return false;
  };
  if (running_) return refuse("the tracer is already recording");
  if (std::string missing = detail::cuda_device_missing(); !missing.empty()) return refuse(missing);
  if (!watching_ && !watch_launches(why_not)) return false;

  Recorder& r = recorder();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (r.recording) return refuse("another activity tracer is recording in this process");
    r.recording = true;  // claimed; released below on failure
  }
  auto release = [&] {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.recording = false;
    r.trace.kernels.clear();
    r.trace.memory.clear();
  };
  std::string why;
  if (!r.callbacks_registered) {
    if (KLOOP_CUPTI_FAILED(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), &why)) {
      release();
      return refuse(why);
    }
    r.callbacks_registered = true;
  }
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.trace.kernels.clear();
    r.trace.memory.clear();
  }
  for (CUpti_ActivityKind kind : kTracedKinds) {
    if (KLOOP_CUPTI_FAILED(cuptiActivityEnable(kind), &why)) {
      disable_traced_kinds();
      release();
      return refuse(why);
    }
  }
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);  // resets the count for this trace
  running_ = true;
  why_not_.clear();
  return true;
}

ActivityTrace ActivityTracer::stop() {
  Recorder& r = recorder();
  if (watching_) {
    std::string ignored;
    enable_launch_callbacks(r, false, &ignored);
    watching_ = false;
  }
  if (!running_) {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.watching = false;
    r.trace.launches.clear();
    ActivityTrace empty;
    empty.unavailable = why_not_;
    return empty;
  }
  // Records are complete only once the work is; a failed sync (a broken
  // context) still leaves whatever CUPTI has.
  cudaDeviceSynchronize();
  cudaGetLastError();
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  disable_traced_kinds();
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);

  ActivityTrace trace;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    trace = std::move(r.trace);
    r.trace = {};
    r.recording = false;
    r.watching = false;
  }
  running_ = false;
  why_not_ = "the tracer was stopped";
  trace.dropped_records = dropped;
  std::stable_sort(trace.kernels.begin(), trace.kernels.end(), [](const KernelRecord& a, const KernelRecord& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.correlation_id < b.correlation_id;
  });
  std::stable_sort(trace.memory.begin(), trace.memory.end(),
                   [](const MemoryRecord& a, const MemoryRecord& b) { return a.start_ns < b.start_ns; });
  return trace;
}

}  // namespace kloop::profiler
