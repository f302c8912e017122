// What the profiler saw of one run, as plain data: the kernels and copies the
// CUPTI activity API recorded, the hardware counters the range profiler
// collected per kernel, and the device's calibrated rates. No CUDA here: the
// worker fills these, sends them to the driver as JSON, and the digest reads
// them.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kloop::profiler {

// A metric that could not be collected.
inline constexpr double kNoValue = std::numeric_limits<double>::quiet_NaN();

// One kernel launch as the activity API recorded it.
struct KernelRecord {
  std::string name;     // demangled
  std::string mangled;  // as the driver reported it
  std::array<uint32_t, 3> grid{};
  std::array<uint32_t, 3> block{};
  int registers_per_thread = 0;
  int static_shared_bytes = 0;
  int dynamic_shared_bytes = 0;
  uint32_t stream_id = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t correlation_id = 0;  // the same for every record of one launch

  double duration_us() const { return end_ns > start_ns ? (end_ns - start_ns) * 1e-3 : 0.0; }
  uint64_t threads_per_block() const { return uint64_t{block[0]} * block[1] * block[2]; }
  uint64_t blocks() const { return uint64_t{grid[0]} * grid[1] * grid[2]; }
};

// Who launched a kernel, as the CUPTI launch callback saw it: the binary
// whose code called the launch API.
struct LaunchOrigin {
  uint32_t correlation_id = 0;  // the launch call's; the kernel record it made carries the same
  std::string mangled;          // the kernel the call launched; "" where the API does not say (a graph launch)
  std::string object;           // the calling binary's path as the dynamic loader names it; kSelfObject for
                                // the tracer's own executable; "" when the call stack did not say
  bool graph = false;           // a graph launch: its kernels were put into the graph by whoever captured them
};
inline constexpr const char* kSelfObject = "<kloop>";

// One memcpy or memset.
struct MemoryRecord {
  std::string kind;  // "memcpy HtoD", "memcpy DtoH", "memcpy DtoD", "memcpy HtoH", "memcpy PtoP", "memcpy", "memset"
  uint64_t bytes = 0;
  uint32_t stream_id = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;

  double duration_us() const { return end_ns > start_ns ? (end_ns - start_ns) * 1e-3 : 0.0; }
};

// Everything the activity API recorded between start and stop, kernels and
// copies each in start-time order.
struct ActivityTrace {
  std::vector<KernelRecord> kernels;
  std::vector<MemoryRecord> memory;
  std::vector<LaunchOrigin> launches;  // every launch call seen while tracing (and from watch_launches() on)
  std::string unavailable;       // non-empty: why tracing could not run
  uint64_t dropped_records = 0;  // records CUPTI lost for lack of buffer space
};

// The hardware counters of one kernel launch. Every figure is kNoValue when
// its metric could not be collected.
struct KernelMetrics {
  std::string name;                       // demangled; empty when the launch could not be named
  int launch_index = 0;                   // 0-based position among the profiled run's kernel launches
  double dram_throughput_pct = kNoValue;  // % of peak sustained DRAM throughput
  double dram_bytes_read = kNoValue;
  double dram_bytes_written = kNoValue;
  double sm_throughput_pct = kNoValue;       // % of peak of the busiest SM sub-unit
  double achieved_occupancy_pct = kNoValue;  // warps active, % of the SM's maximum
  double l1_hit_rate_pct = kNoValue;
  double l2_hit_rate_pct = kNoValue;
};

// The result of one profiling phase.
struct MetricsReport {
  std::vector<KernelMetrics> kernels;  // in launch order
  std::string unavailable;             // non-empty: why no counters were collected
  std::vector<std::string> notes;      // partial results: missing metrics, unprofiled launches
  int passes = 0;                      // replay passes per kernel
  double seconds = 0;                  // wall time of the profiling phase
};

// The device's measured rates (kloop calibrate). Zero means unknown.
struct DeviceRates {
  std::string gpu_name;
  double dram_bytes_per_s = 0;  // read + write bytes per second a copy achieves
  double fp32_flops_per_s = 0;
  double tf32_flops_per_s = 0;
  double bf16_flops_per_s = 0;
  int sm_count = 0;
  int max_warps_per_sm = 0;
};

// One JSON form each; NaN travels as null. Missing fields keep their defaults.
nlohmann::json to_json(const KernelRecord& r);
KernelRecord kernel_record_from_json(const nlohmann::json& j);
nlohmann::json to_json(const LaunchOrigin& o);
LaunchOrigin launch_origin_from_json(const nlohmann::json& j);
nlohmann::json to_json(const MemoryRecord& r);
MemoryRecord memory_record_from_json(const nlohmann::json& j);
nlohmann::json to_json(const ActivityTrace& t);
ActivityTrace activity_trace_from_json(const nlohmann::json& j);
nlohmann::json to_json(const KernelMetrics& m);
KernelMetrics kernel_metrics_from_json(const nlohmann::json& j);
nlohmann::json to_json(const MetricsReport& r);
MetricsReport metrics_report_from_json(const nlohmann::json& j);
nlohmann::json to_json(const DeviceRates& r);
DeviceRates device_rates_from_json(const nlohmann::json& j);

// The readable form of a mangled C++ name; the input itself when it is not one.
std::string demangle(const std::string& mangled);

// Which library a kernel comes from, judged by its name: "cublas" (cuBLAS and
// cuBLASLt GEMM/GEMV kernels, including the CUTLASS kernels cuBLAS ships),
// "cudnn" (convolution engines), "cutlass" (CUTLASS templates instantiated by
// the author), "cub" (CUB/Thrust device algorithms), "aten" (PyTorch's own
// kernels) or "custom" (anything else: kernels the author wrote).
std::string kernel_library(const std::string& kernel_name);

// Which library a binary that launches kernels belongs to: "custom" for one
// of `own_objects` (the candidate's own module; a folder, ending in '/', owns
// every binary under it), "kloop" for kSelfObject,
// "aten" (libtorch*, libc10*), "cublas" (libcublas*), "cudnn" (libcudnn*),
// and any other binary by its file name without directory, "lib" prefix
// and version ("cufft", "flash_attn_2_cuda"): precompiled code that is not
// the candidate's. "" when `object` is "" (not known).
std::string object_library(const std::string& object, const std::vector<std::string>& own_objects);

// For a kernel compiled into the candidate's own module: the header-only
// template library its name comes from ("cub", "thrust", "cutlass", "cute"),
// or "".
std::string template_library(const std::string& kernel_name);

// The vendor library a kernel's name marks beyond doubt ("cublas" for
// cuBLAS's own kernel families, "cudnn" for cuDNN's, "inductor" for the
// Triton kernels torch.compile generates), or "": machine code of a vendor
// a module loaded itself, or code a compiler wrote from PyTorch ops, is
// still not the module's own.
std::string vendor_kernel_mark(const std::string& kernel_name);

// The libraries other than "custom" whose kernels appear in a trace, sorted.
std::vector<std::string> vendor_libraries(const ActivityTrace& trace);

}  // namespace kloop::profiler
