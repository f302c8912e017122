// The one way kloop checks a CUDA runtime or driver API call. A failure
// throws std::runtime_error that says what kloop was doing, the API's own
// error string, and the call's text at file:line, so a report points at the
// line that failed:
//   "CUDA error during the module's kernels: an illegal memory access was
//    encountered (cudaDeviceSynchronize() at device_session.cpp:141)"
// Header-only and free of kloop's other layers, so every folder can use it.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <stdexcept>
#include <string>

namespace kloop {

// The last part of a __FILE__ path: build systems pass full paths, and a
// reader needs only the name to find the line.
inline const char* source_file_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

inline bool cuda_failed(cudaError_t result) { return result != cudaSuccess; }
inline bool cuda_failed(CUresult result) { return result != CUDA_SUCCESS; }

[[noreturn]] inline void throw_cuda_error(const std::string& context, const char* error, const char* call,
                                          const char* file, int line) {
  throw std::runtime_error(context + ": " + error + " (" + call + " at " + source_file_name(file) + ":" +
                           std::to_string(line) + ")");
}

[[noreturn]] inline void throw_cuda_error(cudaError_t result, const std::string& context, const char* call,
                                          const char* file, int line) {
  // A non-sticky error would otherwise stay pending and be blamed on
  // whichever call next asks cudaGetLastError (often the module's launches).
  cudaGetLastError();
  throw_cuda_error(context, cudaGetErrorString(result), call, file, line);
}

[[noreturn]] inline void throw_cuda_error(CUresult result, const std::string& context, const char* call,
                                          const char* file, int line) {
  const char* text = nullptr;
  if (cuGetErrorString(result, &text) != CUDA_SUCCESS || text == nullptr) {
    throw_cuda_error(context, ("error " + std::to_string(result)).c_str(), call, file, line);
  }
  throw_cuda_error(context, text, call, file, line);
}

}  // namespace kloop

// Checks a cudaError_t or CUresult call; `context` (a string) says what
// kloop was doing and is built only when the call fails.
#define KLOOP_CUDA_CHECK(call, context)                                                         \
  do {                                                                                          \
    const auto kloop_cuda_check_result = (call);                                                \
    if (::kloop::cuda_failed(kloop_cuda_check_result)) {                                        \
      ::kloop::throw_cuda_error(kloop_cuda_check_result, (context), #call, __FILE__, __LINE__); \
    }                                                                                           \
  } while (false)
