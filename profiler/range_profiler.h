// Hardware counters per kernel with CUPTI's Profiler Host and Range Profiler
// APIs (CUDA 13): one auto range per kernel launch, kernel replay (CUPTI
// saves and restores device memory between a kernel's passes, so a kernel
// that updates its inputs in place is measured on the same data every pass
// and runs, as far as the program can tell, exactly once). Counters only:
// replay inflates durations, so kloop's timing never comes from here.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "profiler/records.h"

namespace kloop::profiler {

struct RangeProfilerOptions {
  // Kernel launches the counter data holds; later launches are not profiled
  // (MetricsReport::notes says how many). Each costs about 680 KB of host
  // memory with the default metrics on an H200 (1024: 695 MB, ~1.5 s of
  // setup), so size it from the activity trace of the same run.
  std::size_t max_kernels = 128;
  // Name each profiled launch by tracing the profiled run with an
  // ActivityTracer (skipped when another tracer is recording; the digest then
  // names launches by their position in a separate trace).
  bool name_kernels = true;
};

class RangeProfiler {
 public:
  explicit RangeProfiler(RangeProfilerOptions options = {}) : options_(options) {}

  // Runs run_once() once under the profiler and returns the counters of every
  // kernel it launched, in launch order. run_once launches its work on the
  // calling thread's current CUDA context (the runtime's primary context) and
  // returns after a device synchronize. Never throws and never aborts: a
  // missing GPU, missing privileges, another profiler, an unknown chip or an
  // exception from run_once come back as MetricsReport::unavailable.
  MetricsReport profile(const std::function<void()>& run_once);

  // What profile() would collect on a chip ("GH100"), from the Profiler Host
  // API alone (no GPU needed): `passes` per kernel, `notes` for metrics the
  // chip does not know, `unavailable` if none can be configured; no kernels.
  static MetricsReport plan(const std::string& chip_name);

  // The CUPTI metric behind each KernelMetrics figure, in field order.
  static const std::vector<std::string>& metric_names();

 private:
  RangeProfilerOptions options_;
};

}  // namespace kloop::profiler
