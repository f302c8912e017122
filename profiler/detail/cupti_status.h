// CUPTI and CUDA failures as one-line reasons a person can act on. Profiling
// failures are values (MetricsReport::unavailable, ActivityTrace::unavailable),
// never exceptions: the evaluation goes on without counters.
#pragma once

#include <cupti_result.h>

#include <cstddef>
#include <string>

namespace kloop::profiler::detail {

// "no permission to read GPU performance counters (ERR_NVGPUCTRPERM): ...
// (cuptiRangeProfilerEnable: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)".
std::string explain_cupti(CUptiResult result, const char* call);

// The same, saying where the call is: "... (cuptiRangeProfilerEnable(&enable):
// CUPTI_ERROR_INSUFFICIENT_PRIVILEGES at range_profiler.cpp:233)".
std::string explain_cupti(CUptiResult result, const char* call, const char* file, int line);

// Empty when a CUDA device is visible; otherwise why not.
std::string cuda_device_missing();

// A CUPTI parameter struct, zeroed (pPriv = NULL, outputs cleared) with its
// structSize set from the header's <Type>_STRUCT_SIZE macro.
template <typename Params>
Params cupti_params(size_t struct_size) {
  Params params{};
  params.structSize = struct_size;
  return params;
}
#define KLOOP_CUPTI_PARAMS(Type) ::kloop::profiler::detail::cupti_params<Type>(Type##_STRUCT_SIZE)

// Records a failed call's reason in *why (when it is still empty) and says
// whether the call failed. Called through KLOOP_CUPTI_FAILED, which names the
// call and its place.
inline bool failed(CUptiResult result, const char* call, const char* file, int line, std::string* why) {
  if (result == CUPTI_SUCCESS) return false;
  if (why->empty()) *why = explain_cupti(result, call, file, line);
  return true;
}
#define KLOOP_CUPTI_FAILED(call, why) ::kloop::profiler::detail::failed((call), #call, __FILE__, __LINE__, (why))

}  // namespace kloop::profiler::detail
