// Kernel and copy tracing with the CUPTI Activity API: which kernels ran,
// with what launch shape, registers and shared memory, on which stream, for
// how long (GPU timestamps). Tracing adds 1-3 µs per launch, so it runs in its
// own phase, never while kloop times a candidate.
#pragma once

#include <string>

#include "profiler/records.h"

namespace kloop::profiler {

// Records kernels (CONCURRENT_KERNEL), memcpys and memsets between start()
// and stop(), and the binary that called each launch (a CUPTI callback on
// every launch call of the runtime and driver APIs: the launched function's
// host stub where the runtime names one, else the first caller below the
// CUDA stack, found by unwinding). CUPTI's activity buffers and its one
// callback subscriber are process-wide, so one tracer records at a time; a
// tracer may be started and stopped any number of times.
class ActivityTracer {
 public:
  ActivityTracer() = default;
  ~ActivityTracer();  // stops a running trace
  ActivityTracer(const ActivityTracer&) = delete;
  ActivityTracer& operator=(const ActivityTracer&) = delete;

  // Starts recording. On failure (no GPU, another profiler attached, another
  // tracer recording) returns false and says why in *why_not.
  bool start(std::string* why_not);

  // Starts recording launch origins only (no activity), so that launches
  // before start() (a graph captured while a module is built) are named
  // too; start() does this itself when it has not been done. Fails like
  // start(), and also when another CUPTI client holds the callbacks.
  bool watch_launches(std::string* why_not);

  // Waits for the device, collects everything recorded since start(), sorted
  // by start time, names demangled. Without a successful start() the trace is
  // empty and `unavailable` says why.
  ActivityTrace stop();

  bool running() const { return running_; }

 private:
  bool running_ = false;
  bool watching_ = false;
  std::string why_not_ = "the tracer was not started";
};

}  // namespace kloop::profiler
