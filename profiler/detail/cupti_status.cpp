#include "profiler/detail/cupti_status.h"

#include <cuda_runtime_api.h>

#include "base/cuda_check.h"

namespace kloop::profiler::detail {
namespace {

const char* explanation(CUptiResult result) {
  switch (result) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
      return "no permission to read GPU performance counters (ERR_NVGPUCTRPERM): run as root or load the NVIDIA "
             "driver with NVreg_RestrictProfilingToAdminUsers=0";
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      return "the hypervisor does not allow profiling on this virtual GPU";
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      return "another profiler is attached (Nsight Systems, Nsight Compute, cuda-gdb or a second CUPTI client)";
    case CUPTI_ERROR_HARDWARE_BUSY:
      return "the GPU's performance monitors are in use by another process or profiler";
    case CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED:
    case CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED:
      return "an older CUPTI profiling API is active in this process";
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
      return "profiling is not supported on a virtual GPU";
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
      return "profiling is not allowed in confidential computing mode";
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
      return "profiling is not supported on crypto-mining processors";
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
      return "profiling is not supported on a MIG instance";
    case CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED:
      return "profiling is not supported with SLI";
    case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
      return "profiling is not supported under this WSL setup";
    case CUPTI_ERROR_INVALID_CHIP_NAME:
      return "this CUPTI does not know the GPU's chip";
    case CUPTI_ERROR_NOT_SUPPORTED:
      return "the operation is not supported on this GPU or system";
    case CUPTI_ERROR_NOT_INITIALIZED:
    case CUPTI_ERROR_INVALID_DEVICE:
    case CUPTI_ERROR_INVALID_CONTEXT:
      return "CUDA is not usable (no driver, no device or no context)";
    case CUPTI_ERROR_INVALID_METRIC_NAME:
      return "a metric is unknown on this GPU";
    case CUPTI_ERROR_OUT_OF_MEMORY:
      return "out of memory";
    default:
      return "CUPTI failed";
  }
}

const char* result_name(CUptiResult result) {
  const char* name = nullptr;
  if (cuptiGetResultString(result, &name) != CUPTI_SUCCESS || name == nullptr) name = "unknown CUPTI error";
  return name;
}

}  // namespace

std::string explain_cupti(CUptiResult result, const char* call) {
  return std::string(explanation(result)) + " (" + call + ": " + result_name(result) + ")";
}

std::string explain_cupti(CUptiResult result, const char* call, const char* file, int line) {
  return std::string(explanation(result)) + " (" + call + ": " + result_name(result) + " at " + source_file_name(file) +
         ":" + std::to_string(line) + ")";
}

std::string cuda_device_missing() {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();  // leave no error behind for the caller's next runtime call
    std::string why = std::string("no usable CUDA GPU (cudaGetDeviceCount: ") + cudaGetErrorName(status) + ": " +
                      cudaGetErrorString(status) + ")";
    if (status == cudaErrorInsufficientDriver) why += "; is an NVIDIA driver installed?";
    return why;
  }
  if (count == 0) return "no CUDA GPU visible (cudaGetDeviceCount found 0 devices)";
  return "";
}

}  // namespace kloop::profiler::detail
