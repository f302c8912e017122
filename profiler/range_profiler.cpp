#include "profiler/range_profiler.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <set>

#include "profiler/activity_tracer.h"
#include "profiler/detail/cupti_status.h"

namespace kloop::profiler {
namespace {

// The metric behind each KernelMetrics field. All are in Nsight Compute's
// default sections, so every chip CUPTI supports should know them; one a chip
// does not know stays NaN and the report's notes say so.
struct MetricField {
  const char* name;
  double KernelMetrics::*field;
};
constexpr MetricField kMetricFields[] = {
    {"dram__throughput.avg.pct_of_peak_sustained_elapsed", &KernelMetrics::dram_throughput_pct},
    {"dram__bytes_read.sum", &KernelMetrics::dram_bytes_read},
    {"dram__bytes_write.sum", &KernelMetrics::dram_bytes_written},
    {"sm__throughput.avg.pct_of_peak_sustained_elapsed", &KernelMetrics::sm_throughput_pct},
    {"sm__warps_active.avg.pct_of_peak_sustained_active", &KernelMetrics::achieved_occupancy_pct},
    {"l1tex__t_sector_hit_rate.pct", &KernelMetrics::l1_hit_rate_pct},
    {"lts__t_sector_hit_rate.pct", &KernelMetrics::l2_hit_rate_pct},
};

// Driver API functions through the runtime, so nothing here links libcuda:
// without a driver the library still loads and reports why it cannot measure.
// Each symbol is asked for at the version whose signature the caller uses
// (CUDA 13 added cuCtxGetDevice_v13000 with a context argument).
template <typename Function>
Function driver_function(const char* symbol, unsigned int version) {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(symbol, &function, version, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    return nullptr;
  }
  return reinterpret_cast<Function>(function);
}

std::string unsupported_reason(const CUpti_Profiler_DeviceSupported_Params& p) {
  if (p.architecture != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) {
    return "the GPU's architecture has no range profiler (compute capability 7.5 or newer needed)";
  }
  if (p.vGpu == CUPTI_PROFILER_CONFIGURATION_DISABLED) return "profiling is disabled on this virtual GPU";
  if (p.vGpu != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) return "profiling is not supported on this virtual GPU";
  if (p.confidentialCompute != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) {
    return "profiling is not allowed in confidential computing mode";
  }
  if (p.sli != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) return "profiling is not supported with SLI";
  if (p.cmp != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) return "profiling is not supported on crypto-mining processors";
  if (p.wsl != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) return "profiling is not supported under this WSL setup";
  return "CUPTI reports the device as unsupported for range profiling";
}

// Every CUPTI object of one profile() call, released in reverse order of
// creation on every way out.
struct Session {
  bool profiler_initialized = false;
  CUpti_Profiler_Host_Object* host = nullptr;
  CUpti_RangeProfiler_Object* range_profiler = nullptr;
  bool started = false;

  Session() = default;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session() {
    if (started) {
      auto stop = KLOOP_CUPTI_PARAMS(CUpti_RangeProfiler_Stop_Params);
      stop.pRangeProfilerObject = range_profiler;
      cuptiRangeProfilerStop(&stop);
    }
    if (range_profiler) {
      auto disable = KLOOP_CUPTI_PARAMS(CUpti_RangeProfiler_Disable_Params);
      disable.pRangeProfilerObject = range_profiler;
      cuptiRangeProfilerDisable(&disable);
    }
    if (host) {
      auto deinit = KLOOP_CUPTI_PARAMS(CUpti_Profiler_Host_Deinitialize_Params);
      deinit.pHostObject = host;
      cuptiProfilerHostDeinitialize(&deinit);
    }
    if (profiler_initialized) {
      auto deinit = KLOOP_CUPTI_PARAMS(CUpti_Profiler_DeInitialize_Params);
      cuptiProfilerDeInitialize(&deinit);
    }
  }
};

// The Profiler Host side: which metrics the chip knows, and the configuration
// image that schedules them. Needs no GPU, only the chip's name.
struct HostConfig {
  std::vector<const char*> metrics;  // the ones the chip knows, in field order
  std::vector<const MetricField*> fields;
  std::vector<uint8_t> image;
};

bool configure_host(const std::string& chip_name, const uint8_t* availability_image, Session& session,
                    HostConfig& config, MetricsReport& report) {
  std::string& why = report.unavailable;
  auto host = KLOOP_CUPTI_PARAMS(CUpti_Profiler_Host_Initialize_Params);
  host.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  host.pChipName = chip_name.c_str();
  host.pCounterAvailabilityImage = availability_image;
  if (KLOOP_CUPTI_FAILED(cuptiProfilerHostInitialize(&host), &why)) return false;
  session.host = host.pHostObject;

  // Only metrics the chip knows go into the configuration.
  for (const MetricField& f : kMetricFields) {
    auto properties = KLOOP_CUPTI_PARAMS(CUpti_Profiler_Host_GetMetricProperties_Params);
    properties.pHostObject = session.host;
    properties.pMetricName = f.name;
    std::string unknown;
    if (KLOOP_CUPTI_FAILED(cuptiProfilerHostGetMetricProperties(&properties), &unknown)) {
      report.notes.push_back(std::string(f.name) + " is not available on " + chip_name + ": " + unknown);
    } else {
      config.metrics.push_back(f.name);
      config.fields.push_back(&f);
    }
  }
  if (config.metrics.empty()) {
    why = "none of the metrics is available on " + chip_name;
    return false;
  }

  auto add = KLOOP_CUPTI_PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params);
  add.pHostObject = session.host;
  add.ppMetricNames = config.metrics.data();
  add.numMetrics = config.metrics.size();
  if (KLOOP_CUPTI_FAILED(cuptiProfilerHostConfigAddMetrics(&add), &why)) return false;
  auto config_size = KLOOP_CUPTI_PARAMS(CUpti_Profiler_Host_GetConfigImageSize_Params);
  config_size.pHostObject = session.host;
  if (KLOOP_CUPTI_FAILED(cuptiProfilerHostGetConfigImageSize(&config_size), &why)) return false;
  config.image.resize(config_size.configImageSize);
  auto image = KLOOP_CUPTI_PARAMS(CUpti_Profiler_Host_GetConfigImage_Params);
  image.pHostObject = session.host;
  image.configImageSize = config.image.size();
  image.pConfigImage = config.image.data();
  if (KLOOP_CUPTI_FAILED(cuptiProfilerHostGetConfigImage(&image), &why)) return false;
  auto passes = KLOOP_CUPTI_PARAMS(CUpti_Profiler_Host_GetNumOfPasses_Params);
  passes.configImageSize = config.image.size();
  passes.pConfigImage = config.image.data();
  if (KLOOP_CUPTI_FAILED(cuptiProfilerHostGetNumOfPasses(&passes), &why)) return false;
  report.passes = static_cast<int>(passes.numOfPasses);
  return true;
}

// One launch per correlation id: a replayed kernel may be recorded per pass.
std::vector<std::string> launch_names(const ActivityTrace& trace) {
  std::vector<std::string> names;
  std::set<uint32_t> seen;
  for (const auto& k : trace.kernels) {
    if (seen.insert(k.correlation_id).second) names.push_back(k.name);
  }
  return names;
}

// The body of profile(): fills `report` as far as it gets; on failure sets
// report.unavailable and returns.
void collect(const std::function<void()>& run_once, const RangeProfilerOptions& options, MetricsReport& report) {
  std::string& why = report.unavailable;
  if (std::string missing = detail::cuda_device_missing(); !missing.empty()) {
    why = missing;
    return;
  }
  if (cudaError_t status = cudaFree(nullptr); status != cudaSuccess) {  // makes the primary context current
    why = std::string("no CUDA context (cudaFree: ") + cudaGetErrorString(status) + ")";
    return;
  }
  const auto ctx_get_current = driver_function<PFN_cuCtxGetCurrent_v4000>("cuCtxGetCurrent", 4000);
  const auto ctx_get_device = driver_function<PFN_cuCtxGetDevice_v2000>("cuCtxGetDevice", 2000);
  CUcontext context = nullptr;
  if (!ctx_get_current || ctx_get_current(&context) != CUDA_SUCCESS || context == nullptr) {
    why = "no current CUDA context (cuCtxGetCurrent)";
    return;
  }
  int device_index = 0;
  cudaGetDevice(&device_index);
  CUdevice device = device_index;
  if (!ctx_get_device || ctx_get_device(&device) != CUDA_SUCCESS) device = device_index;

  Session session;
  auto initialize = KLOOP_CUPTI_PARAMS(CUpti_Profiler_Initialize_Params);
  if (KLOOP_CUPTI_FAILED(cuptiProfilerInitialize(&initialize), &why)) return;
  session.profiler_initialized = true;

  // A diagnosis only: should the query itself fail, the calls below still
  // say why profiling cannot run.
  auto supported = KLOOP_CUPTI_PARAMS(CUpti_Profiler_DeviceSupported_Params);
  supported.cuDevice = device;
  supported.api = CUPTI_PROFILER_RANGE_PROFILING;
  if (cuptiProfilerDeviceSupported(&supported) == CUPTI_SUCCESS &&
      supported.isSupported != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) {
    why = unsupported_reason(supported);
    return;
  }

  auto chip = KLOOP_CUPTI_PARAMS(CUpti_Device_GetChipName_Params);
  chip.deviceIndex = static_cast<size_t>(device_index);
  if (KLOOP_CUPTI_FAILED(cuptiDeviceGetChipName(&chip), &why)) return;
  const std::string chip_name = chip.pChipName ? chip.pChipName : "";

  // Counter availability: the first call sizes the image, the second fills it.
  auto availability = KLOOP_CUPTI_PARAMS(CUpti_Profiler_GetCounterAvailability_Params);
  availability.ctx = context;
  if (KLOOP_CUPTI_FAILED(cuptiProfilerGetCounterAvailability(&availability), &why)) return;
  std::vector<uint8_t> availability_image(availability.counterAvailabilityImageSize);
  availability.pCounterAvailabilityImage = availability_image.data();
  if (KLOOP_CUPTI_FAILED(cuptiProfilerGetCounterAvailability(&availability), &why)) return;

  HostConfig config;
  if (!configure_host(chip_name, availability_image.data(), session, config, report)) return;

  auto enable = KLOOP_CUPTI_PARAMS(CUpti_RangeProfiler_Enable_Params);
  enable.ctx = context;
  if (KLOOP_CUPTI_FAILED(cuptiRangeProfilerEnable(&enable), &why)) return;
  session.range_profiler = enable.pRangeProfilerObject;

  auto data_size = KLOOP_CUPTI_PARAMS(CUpti_RangeProfiler_GetCounterDataSize_Params);
  data_size.pRangeProfilerObject = session.range_profiler;
  data_size.pMetricNames = config.metrics.data();
  data_size.numMetrics = config.metrics.size();
  data_size.maxNumOfRanges = options.max_kernels;
  data_size.maxNumRangeTreeNodes = static_cast<uint32_t>(options.max_kernels);
  if (KLOOP_CUPTI_FAILED(cuptiRangeProfilerGetCounterDataSize(&data_size), &why)) return;
  std::vector<uint8_t> counter_data(data_size.counterDataSize);
  auto data_init = KLOOP_CUPTI_PARAMS(CUpti_RangeProfiler_CounterDataImage_Initialize_Params);
  data_init.pRangeProfilerObject = session.range_profiler;
  data_init.counterDataSize = counter_data.size();
  data_init.pCounterData = counter_data.data();
  if (KLOOP_CUPTI_FAILED(cuptiRangeProfilerCounterDataImageInitialize(&data_init), &why)) return;

  auto set_config = KLOOP_CUPTI_PARAMS(CUpti_RangeProfiler_SetConfig_Params);
  set_config.pRangeProfilerObject = session.range_profiler;
  set_config.configSize = config.image.size();
  set_config.pConfig = config.image.data();
  set_config.counterDataImageSize = counter_data.size();
  set_config.pCounterDataImage = counter_data.data();
  set_config.range = CUPTI_AutoRange;
  set_config.replayMode = CUPTI_KernelReplay;
  set_config.maxRangesPerPass = options.max_kernels;
  set_config.numNestingLevels = 1;  // auto range: one level
  set_config.minNestingLevel = 1;
  set_config.passIndex = 0;
  set_config.targetNestingLevel = 1;
  if (KLOOP_CUPTI_FAILED(cuptiRangeProfilerSetConfig(&set_config), &why)) return;

  // The profiled run: once, with kernel replay inside each launch.
  ActivityTracer tracer;
  std::string no_names;
  const bool naming = options.name_kernels && tracer.start(&no_names);
  auto start = KLOOP_CUPTI_PARAMS(CUpti_RangeProfiler_Start_Params);
  start.pRangeProfilerObject = session.range_profiler;
  if (KLOOP_CUPTI_FAILED(cuptiRangeProfilerStart(&start), &why)) return;
  session.started = true;
  std::string run_error;
  try {
    run_once();
  } catch (const std::exception& e) {
    run_error = e.what();
  } catch (...) {
    run_error = "an exception that is not a std::exception";
  }
  const cudaError_t sync = cudaDeviceSynchronize();
  auto stop = KLOOP_CUPTI_PARAMS(CUpti_RangeProfiler_Stop_Params);
  stop.pRangeProfilerObject = session.range_profiler;
  // Reported after the run's own failures, which come first.
  std::string stop_failure;
  const bool stop_failed = KLOOP_CUPTI_FAILED(cuptiRangeProfilerStop(&stop), &stop_failure);
  session.started = false;
  const ActivityTrace trace = naming ? tracer.stop() : ActivityTrace{};
  if (!run_error.empty()) {
    why = "the profiled run threw: " + run_error;
    return;
  }
  if (sync != cudaSuccess) {
    why =
        std::string("the profiled run failed on the GPU: ") + cudaGetErrorName(sync) + ": " + cudaGetErrorString(sync);
    return;
  }
  if (stop_failed) {
    why = stop_failure;
    return;
  }
  if (!stop.isAllPassSubmitted) {
    report.notes.push_back("CUPTI had replay passes left after the run; some counters may be missing");
  }

  auto decode = KLOOP_CUPTI_PARAMS(CUpti_RangeProfiler_DecodeData_Params);
  decode.pRangeProfilerObject = session.range_profiler;
  if (KLOOP_CUPTI_FAILED(cuptiRangeProfilerDecodeData(&decode), &why)) return;
  if (decode.numOfRangeDropped > 0) {
    report.notes.push_back("CUPTI dropped the counters of " + std::to_string(decode.numOfRangeDropped) + " launches");
  }
  auto info = KLOOP_CUPTI_PARAMS(CUpti_RangeProfiler_GetCounterDataInfo_Params);
  info.pCounterDataImage = counter_data.data();
  info.counterDataImageSize = counter_data.size();
  if (KLOOP_CUPTI_FAILED(cuptiRangeProfilerGetCounterDataInfo(&info), &why)) return;

  // Ranges follow launch order; when the counter data was full, the first
  // max_kernels launches are the profiled ones.
  const std::vector<std::string> names = launch_names(trace);
  const size_t ranges = info.numTotalRanges;
  const bool full = ranges == options.max_kernels && names.size() > ranges;
  const bool named = naming && (names.size() == ranges || full);
  if (full) {
    report.notes.push_back(std::to_string(names.size() - ranges) + " of " + std::to_string(names.size()) +
                           " launches were not profiled: RangeProfilerOptions::max_kernels is " +
                           std::to_string(options.max_kernels));
  }
  if (options.name_kernels && !naming) {
    report.notes.push_back("launches are unnamed (" + no_names + "); match them by position");
  } else if (naming && !named) {
    report.notes.push_back("launches are unnamed: the trace saw " + std::to_string(names.size()) +
                           " launches, the profiler " + std::to_string(ranges) + " ranges");
  }
  std::string evaluate_error;
  std::vector<double> values(config.metrics.size());
  for (size_t range = 0; range < ranges; ++range) {
    KernelMetrics m;
    m.launch_index = static_cast<int>(range);
    if (named) m.name = names[range];
    auto evaluate = KLOOP_CUPTI_PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params);
    evaluate.pHostObject = session.host;
    evaluate.pCounterDataImage = counter_data.data();
    evaluate.counterDataImageSize = counter_data.size();
    evaluate.rangeIndex = range;
    evaluate.ppMetricNames = config.metrics.data();
    evaluate.numMetrics = config.metrics.size();
    evaluate.pMetricValues = values.data();
    if (!KLOOP_CUPTI_FAILED(cuptiProfilerHostEvaluateToGpuValues(&evaluate), &evaluate_error)) {
      for (size_t i = 0; i < config.fields.size(); ++i) m.*(config.fields[i]->field) = values[i];
    }
    report.kernels.push_back(m);
  }
  if (!evaluate_error.empty()) report.notes.push_back("some launches have no counters: " + evaluate_error);
}

}  // namespace

const std::vector<std::string>& RangeProfiler::metric_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const MetricField& f : kMetricFields) n.push_back(f.name);
    return n;
  }();
  return names;
}

MetricsReport RangeProfiler::plan(const std::string& chip_name) {
  MetricsReport report;
  Session session;
  HostConfig config;
  configure_host(chip_name, nullptr, session, config, report);
  return report;
}

MetricsReport RangeProfiler::profile(const std::function<void()>& run_once) {
  const auto begin = std::chrono::steady_clock::now();
  MetricsReport report;
  try {
    collect(run_once, options_, report);
  } catch (const std::exception& e) {  // allocation failures and the like: still a value
    report.unavailable = std::string("the profiler failed: ") + e.what();
  } catch (...) {
    report.unavailable = "the profiler failed with an unknown exception";
  }
  if (!report.unavailable.empty()) report.kernels.clear();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return report;
}

}  // namespace kloop::profiler
