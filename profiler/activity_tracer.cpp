#include "profiler/activity_tracer.h"

#include <cuda_runtime_api.h>
#include <cupti_activity.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "profiler/detail/cupti_status.h"

namespace kloop::profiler {
namespace {

constexpr std::size_t kBufferBytes = 8 << 20;
constexpr std::size_t kBufferAlignment = 8;  // CUPTI requires 8-byte aligned activity buffers
constexpr CUpti_ActivityKind kTracedKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                               CUPTI_ACTIVITY_KIND_MEMSET};

// CUPTI hands buffers back on its own threads, to plain function pointers:
// the records land here, and only while a tracer is recording.
struct Recorder {
  std::mutex mutex;
  bool recording = false;
  bool callbacks_registered = false;
  ActivityTrace trace;
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

void disable_traced_kinds() {
  for (CUpti_ActivityKind kind : kTracedKinds) cuptiActivityDisable(kind);
}

}  // namespace

ActivityTracer::~ActivityTracer() {
  if (running_) stop();
}

bool ActivityTracer::start(std::string* why_not) {
  auto refuse = [&](const std::string& why) {
    why_not_ = why;
    if (why_not) *why_not = why;
    return false;
  };
  if (running_) return refuse("the tracer is already recording");
  if (std::string missing = detail::cuda_device_missing(); !missing.empty()) return refuse(missing);

  Recorder& r = recorder();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (r.recording) return refuse("another activity tracer is recording in this process");
    r.recording = true;  // claimed; released below on failure
  }
  auto release = [&] {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.recording = false;
    r.trace = {};
  };
  std::string why;
  if (!r.callbacks_registered) {
    if (detail::failed(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
                       "cuptiActivityRegisterCallbacks", &why)) {
      release();
      return refuse(why);
    }
    r.callbacks_registered = true;
  }
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.trace = {};
  }
  for (CUpti_ActivityKind kind : kTracedKinds) {
    if (detail::failed(cuptiActivityEnable(kind), "cuptiActivityEnable", &why)) {
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
  if (!running_) {
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
    Recorder& r = recorder();
    std::lock_guard<std::mutex> lock(r.mutex);
    trace = std::move(r.trace);
    r.trace = {};
    r.recording = false;
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
