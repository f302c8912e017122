// The activity audit: reads a CUPTI trace of a few forward calls (each
// opened by kloop's L2-flush memset on kloop's stream and closed by a CUPTI
// timestamp taken once that stream had finished) and says what the calls
// launched and where: kernels per call, kernels on other streams, work that
// finished after kloop considered the call complete, vendor-library and ATen
// kernels, and the GPU time the kernels took.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/records.h"

namespace kloop {

struct ActivityAudit {
  int calls = 0;
  double kernels_per_call = 0;
  double gpu_us_per_call = 0;    // summed kernel durations, all streams
  double span_us_per_call = 0;   // first kernel start to last kernel end
  int other_stream_kernels = 0;  // not on kloop's stream
  int late_kernels = 0;          // still running after kloop's stream had finished
  std::vector<std::string> libraries;  // kernel_library() of every kernel not "custom"
  std::vector<std::string> other_stream_names;
  std::vector<std::string> late_names;
  std::string unavailable;       // why there is no audit
};

// `stream_done_ns[i]` is the CUPTI time at which call i's end event had
// completed. kloop's markers are told from the module's own memsets by
// their size: the trace opens with a 4-byte memset on the legacy default
// stream (which the timer orders with kloop's stream, so kernels there are
// fine), and each call with the L2 flush, `flush_bytes` on kloop's stream.
// Memsets of any other size are the module's work and change nothing; one
// that imitates a marker leaves the markers miscounted (unavailable).
constexpr uint64_t kLegacyMarkerBytes = 4;
ActivityAudit audit_activity(const profiler::ActivityTrace& trace, const std::vector<uint64_t>& stream_done_ns,
                             uint64_t flush_bytes);

}  // namespace kloop
