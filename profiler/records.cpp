#include "profiler/records.h"

#include <cxxabi.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <set>

namespace kloop::profiler {
namespace {

// JSON has no NaN: an unavailable metric travels as null.
nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

double number_or_nan(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : kNoValue;
}

std::array<uint32_t, 3> dim3_from_json(const nlohmann::json& j, const char* key) {
  std::array<uint32_t, 3> d{};
  auto it = j.find(key);
  if (it != j.end() && it->is_array()) {
    for (std::size_t i = 0; i < 3 && i < it->size(); ++i) d[i] = (*it)[i].get<uint32_t>();
  }
  return d;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// The kernel's own qualified name: "void at::native::foo<int>(int*)" -> "at::native::foo".
std::string function_path(const std::string& name) {
  std::string s = starts_with(name, "void ") ? name.substr(5) : name;
  return s.substr(0, s.find_first_of("<("));
}

// cuBLAS ships GEMM kernels named by architecture ("sm90_xmma_gemm_...",
// "ampere_sgemm_128x64_nn", "volta_h884gemm_...").
bool is_arch_gemm(const std::string& path) {
  static const char* const kArchPrefixes[] = {"sm50_",   "sm60_",   "sm70_",   "sm75_",     "sm80_",    "sm86_",
                                              "sm89_",   "sm90_",   "sm100_",  "sm120_",    "maxwell_", "volta_",
                                              "turing_", "ampere_", "hopper_", "blackwell_"};
  if (!contains(path, "gemm") && !contains(path, "gemv")) return false;
  for (const char* prefix : kArchPrefixes) {
    if (starts_with(path, prefix)) return true;
  }
  return false;
}

// "cutlass_80_tensorop_s1688gemm_..." and "cutlass3x_sm90_..." are the CUTLASS
// kernels inside cuBLAS; an author's own CUTLASS code is "cutlass::...".
bool is_cublas_cutlass(const std::string& name) {
  for (std::size_t at = name.find("cutlass"); at != std::string::npos; at = name.find("cutlass", at + 1)) {
    std::size_t next = at + 7;
    if (next + 1 < name.size() && name[next] == '_' && std::isdigit(static_cast<unsigned char>(name[next + 1]))) {
      return true;
    }
    if (name.compare(next, 3, "3x_") == 0) return true;
  }
  return false;
}

}  // namespace

nlohmann::json to_json(const KernelRecord& r) {
  return {{"name", r.name},
          {"mangled", r.mangled},
          {"grid", r.grid},
          {"block", r.block},
          {"registers_per_thread", r.registers_per_thread},
          {"static_shared_bytes", r.static_shared_bytes},
          {"dynamic_shared_bytes", r.dynamic_shared_bytes},
          {"stream_id", r.stream_id},
          {"start_ns", r.start_ns},
          {"end_ns", r.end_ns},
          {"correlation_id", r.correlation_id}};
}

KernelRecord kernel_record_from_json(const nlohmann::json& j) {
  KernelRecord r;
  r.name = j.value("name", "");
  r.mangled = j.value("mangled", "");
  r.grid = dim3_from_json(j, "grid");
  r.block = dim3_from_json(j, "block");
  r.registers_per_thread = j.value("registers_per_thread", 0);
  r.static_shared_bytes = j.value("static_shared_bytes", 0);
  r.dynamic_shared_bytes = j.value("dynamic_shared_bytes", 0);
  r.stream_id = j.value("stream_id", uint32_t{0});
  r.start_ns = j.value("start_ns", uint64_t{0});
  r.end_ns = j.value("end_ns", uint64_t{0});
  r.correlation_id = j.value("correlation_id", uint32_t{0});
  return r;
}

nlohmann::json to_json(const LaunchOrigin& o) {
  return {{"correlation_id", o.correlation_id}, {"mangled", o.mangled}, {"object", o.object}, {"graph", o.graph}};
}

LaunchOrigin launch_origin_from_json(const nlohmann::json& j) {
  LaunchOrigin o;
  o.correlation_id = j.value("correlation_id", uint32_t{0});
  o.mangled = j.value("mangled", "");
  o.object = j.value("object", "");
  o.graph = j.value("graph", false);
  return o;
}

nlohmann::json to_json(const MemoryRecord& r) {
  return {
      {"kind", r.kind}, {"bytes", r.bytes}, {"stream_id", r.stream_id}, {"start_ns", r.start_ns}, {"end_ns", r.end_ns}};
}

MemoryRecord memory_record_from_json(const nlohmann::json& j) {
  MemoryRecord r;
  r.kind = j.value("kind", "");
  r.bytes = j.value("bytes", uint64_t{0});
  r.stream_id = j.value("stream_id", uint32_t{0});
  r.start_ns = j.value("start_ns", uint64_t{0});
  r.end_ns = j.value("end_ns", uint64_t{0});
  return r;
}

nlohmann::json to_json(const ActivityTrace& t) {
  nlohmann::json kernels = nlohmann::json::array();
  for (const auto& k : t.kernels) kernels.push_back(to_json(k));
  nlohmann::json memory = nlohmann::json::array();
  for (const auto& m : t.memory) memory.push_back(to_json(m));
  nlohmann::json launches = nlohmann::json::array();
  for (const auto& o : t.launches) launches.push_back(to_json(o));
  return {{"kernels", kernels},
          {"memory", memory},
          {"launches", launches},
          {"unavailable", t.unavailable},
          {"dropped_records", t.dropped_records}};
}

ActivityTrace activity_trace_from_json(const nlohmann::json& j) {
  ActivityTrace t;
  for (const auto& k : j.value("kernels", nlohmann::json::array())) t.kernels.push_back(kernel_record_from_json(k));
  for (const auto& m : j.value("memory", nlohmann::json::array())) t.memory.push_back(memory_record_from_json(m));
  for (const auto& o : j.value("launches", nlohmann::json::array())) t.launches.push_back(launch_origin_from_json(o));
  t.unavailable = j.value("unavailable", "");
  t.dropped_records = j.value("dropped_records", uint64_t{0});
  return t;
}

nlohmann::json to_json(const KernelMetrics& m) {
  return {{"name", m.name},
          {"launch_index", m.launch_index},
          {"dram_throughput_pct", number_or_null(m.dram_throughput_pct)},
          {"dram_bytes_read", number_or_null(m.dram_bytes_read)},
          {"dram_bytes_written", number_or_null(m.dram_bytes_written)},
          {"sm_throughput_pct", number_or_null(m.sm_throughput_pct)},
          {"achieved_occupancy_pct", number_or_null(m.achieved_occupancy_pct)},
          {"l1_hit_rate_pct", number_or_null(m.l1_hit_rate_pct)},
          {"l2_hit_rate_pct", number_or_null(m.l2_hit_rate_pct)}};
}

KernelMetrics kernel_metrics_from_json(const nlohmann::json& j) {
  KernelMetrics m;
  m.name = j.value("name", "");
  m.launch_index = j.value("launch_index", 0);
  m.dram_throughput_pct = number_or_nan(j, "dram_throughput_pct");
  m.dram_bytes_read = number_or_nan(j, "dram_bytes_read");
  m.dram_bytes_written = number_or_nan(j, "dram_bytes_written");
  m.sm_throughput_pct = number_or_nan(j, "sm_throughput_pct");
  m.achieved_occupancy_pct = number_or_nan(j, "achieved_occupancy_pct");
  m.l1_hit_rate_pct = number_or_nan(j, "l1_hit_rate_pct");
  m.l2_hit_rate_pct = number_or_nan(j, "l2_hit_rate_pct");
  return m;
}

nlohmann::json to_json(const MetricsReport& r) {
  nlohmann::json kernels = nlohmann::json::array();
  for (const auto& k : r.kernels) kernels.push_back(to_json(k));
  return {{"kernels", kernels},
          {"unavailable", r.unavailable},
          {"notes", r.notes},
          {"passes", r.passes},
          {"seconds", r.seconds}};
}

MetricsReport metrics_report_from_json(const nlohmann::json& j) {
  MetricsReport r;
  for (const auto& k : j.value("kernels", nlohmann::json::array())) r.kernels.push_back(kernel_metrics_from_json(k));
  r.unavailable = j.value("unavailable", "");
  r.notes = j.value("notes", std::vector<std::string>{});
  r.passes = j.value("passes", 0);
  r.seconds = j.value("seconds", 0.0);
  return r;
}

nlohmann::json to_json(const DeviceRates& r) {
  return {{"gpu_name", r.gpu_name},
          {"dram_bytes_per_s", r.dram_bytes_per_s},
          {"fp32_flops_per_s", r.fp32_flops_per_s},
          {"tf32_flops_per_s", r.tf32_flops_per_s},
          {"bf16_flops_per_s", r.bf16_flops_per_s},
          {"sm_count", r.sm_count},
          {"max_warps_per_sm", r.max_warps_per_sm}};
}

DeviceRates device_rates_from_json(const nlohmann::json& j) {
  DeviceRates r;
  r.gpu_name = j.value("gpu_name", "");
  r.dram_bytes_per_s = j.value("dram_bytes_per_s", 0.0);
  r.fp32_flops_per_s = j.value("fp32_flops_per_s", 0.0);
  r.tf32_flops_per_s = j.value("tf32_flops_per_s", 0.0);
  r.bf16_flops_per_s = j.value("bf16_flops_per_s", 0.0);
  r.sm_count = j.value("sm_count", 0);
  r.max_warps_per_sm = j.value("max_warps_per_sm", 0);
  return r;
}

std::string demangle(const std::string& mangled) {
  if (!starts_with(mangled, "_Z")) return mangled;
  int status = 0;
  char* readable = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  std::string result = status == 0 && readable ? readable : mangled;
  std::free(readable);
  return result;
}

namespace {

// torch.compile's code generator (Inductor) names the Triton kernels it
// writes by their kind ("triton_poi_fused_relu_0": pointwise, red, per,
// tem, for) whatever the source; Triton compiles them into the same cache
// as a candidate's own Triton kernels, so the cache does not tell them
// apart: the name does.
bool is_inductor_kernel(const std::string& lowered_path) {
  for (const char* kind : {"triton_poi_", "triton_red_", "triton_per_", "triton_tem_", "triton_for_"}) {
    if (starts_with(lowered_path, kind)) return true;
  }
  return false;
}

}  // namespace

std::string kernel_library(const std::string& kernel_name) {
  const std::string name = lower(kernel_name);
  const std::string path = function_path(name);
  if (is_inductor_kernel(path)) return "inductor";
  if (starts_with(path, "at::") || starts_with(path, "at_cuda_detail::") || starts_with(path, "pytorch_flash::") ||
      starts_with(path, "fmha_cutlass") || starts_with(name, "_zn2at")) {
    return "aten";
  }
  static const char* const kCudnnMarks[] = {
      "cudnn",    "xmma_fprop", "xmma_dgrad", "xmma_wgrad",           "implicit_convolve", "precomputed_convolve",
      "winograd", "nchwtonhwc", "nhwctonchw", "conv2d_grouped_direct"};
  for (const char* mark : kCudnnMarks) {
    if (contains(name, mark)) return "cudnn";
  }
  if (contains(name, "cublas") || starts_with(path, "nvjet") || contains(name, "xmma_gemm") || is_arch_gemm(path) ||
      is_cublas_cutlass(name)) {
    return "cublas";
  }
  if (contains(name, "cutlass")) return "cutlass";
  if (starts_with(path, "cub::") || starts_with(path, "thrust::")) return "cub";
  return "custom";
}

std::string object_library(const std::string& object, const std::vector<std::string>& own_objects) {
  if (object.empty()) return "";
  for (const std::string& own : own_objects) {
    if (object == own) return "custom";
    // A folder (a Python candidate's build with the libraries its
    // load_inline extensions made, its Triton cache) owns every binary under it.
    if (!own.empty() && own.back() == '/' && object.rfind(own, 0) == 0) return "custom";
  }
  if (object == kSelfObject) return "kloop";
  std::string file = object.substr(object.find_last_of('/') + 1);
  file = file.substr(0, file.find(".so"));
  if (starts_with(file, "lib")) file = file.substr(3);
  if (starts_with(file, "torch") || starts_with(file, "c10")) return "aten";
  if (starts_with(file, "cublas")) return "cublas";
  if (starts_with(file, "cudnn")) return "cudnn";
  return file.empty() ? object : file;
}

std::string template_library(const std::string& kernel_name) {
  const std::string name = lower(kernel_name);
  const std::string path = function_path(name);
  if (starts_with(path, "cute::")) return "cute";
  if (contains(name, "cutlass")) return "cutlass";
  if (starts_with(path, "thrust::")) return "thrust";
  if (starts_with(path, "cub::")) return "cub";
  return "";
}

std::string vendor_kernel_mark(const std::string& kernel_name) {
  const std::string name = lower(kernel_name);
  if (is_inductor_kernel(function_path(name))) return "inductor";
  if (contains(name, "cudnn") || contains(name, "xmma_fprop") || contains(name, "xmma_dgrad") ||
      contains(name, "xmma_wgrad") || contains(name, "implicit_convolve_") || contains(name, "precomputed_convolve_")) {
    return "cudnn";
  }
  if (contains(name, "cublas") || starts_with(function_path(name), "nvjet") || contains(name, "xmma_gemm") ||
      is_cublas_cutlass(name)) {
    return "cublas";
  }
  return "";
}

std::vector<std::string> vendor_libraries(const ActivityTrace& trace) {
  std::set<std::string> kinds;
  for (const auto& k : trace.kernels) {
    std::string kind = kernel_library(k.name.empty() ? k.mangled : k.name);
    if (kind != "custom") kinds.insert(kind);
  }
  return {kinds.begin(), kinds.end()};
}

}  // namespace kloop::profiler
