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

// Where the audit's records come from, said in every verdict that has one:
// CUPTI runs in the process that hosts the candidate, which the candidate's
// code can rewrite. The audit sees what an honest module does (a library
// call, a stream it forgot to join); against a module that hides its work
// it is a claim, and strict's custom-kernels rule rests on it.
inline constexpr const char* kActivityEvidence =
    "traced in the candidate's own process (CUPTI in its worker): it shows what an honest module launched; a module "
    "with code execution there can switch the trace off, rewrite its records or work from another process, so "
    "strict's custom-kernels rule rests on this claim";

struct ActivityAudit {
  int calls = 0;
  int joined_stream_kernels = 0;  // on another stream, ended before kloop's stream reached the call's end
  double kernels_per_call = 0;
  double gpu_us_per_call = 0;    // summed kernel durations, all streams
  double span_us_per_call = 0;   // first kernel start to last kernel end
  int other_stream_kernels = 0;  // on another stream and still running when kloop's stream reached the call's end
  int late_kernels = 0;          // still running after kloop's stream had finished
  std::vector<std::string> libraries;    // the library of every kernel that is not the module's own (see below)
  std::vector<std::string> compiled_in;  // template libraries (cub, thrust, cutlass, cute) in the module's own kernels
  int unattributed_kernels = 0;          // no launch call seen for them: judged by their names
  std::vector<std::string> other_stream_names;
  std::vector<std::string> late_names;
  std::string unavailable;       // why there is no audit
};

// `stream_done_ns[i]` is the CUPTI time at which call i's end event had
// completed. kloop's markers are told from the module's own memsets by
// their size: the trace opens with a 4-byte memset on the legacy default
// stream (which the timer orders with kloop's stream, so kernels there are
// fine), each call with the L2 flush, `flush_bytes` on kloop's stream, and
// ends it with a 12-byte memset on kloop's stream, enqueued after forward
// returned (the last one of the call counts: a module's own 12-byte memsets
// come before it). Memsets of any other size are the module's work and
// change nothing; one that imitates the flush leaves the markers miscounted
// (unavailable), as does a call without its end marker.
//
// Work on another stream is the module's own business when it is joined:
// a kernel there that ended before kloop's stream reached the end marker
// was waited for (an event or a stream wait), so the timer's stop event,
// which follows the marker, covered it. One still running then is
// side-stream work the timer did not see.
//
// Library use is judged by origin: each kernel belongs to the binary whose
// code launched it (trace.launches, matched by correlation id, and for a
// graph's kernels by the launches captured into it). `own_objects` (the
// candidate's module, or its folders) is the module's own code, even where it instantiates
// CUB, Thrust, CUTLASS or CuTe templates (listed in `compiled_in`), unless
// the kernel carries a name only cuBLAS's or cuDNN's binaries do (vendor
// machine code the module loaded itself). Any other binary is precompiled
// library code, named by object_library(). A kernel whose launch was not
// seen (a graph captured before the trace) is judged by its name alone.
constexpr uint64_t kLegacyMarkerBytes = 4;
constexpr uint64_t kCallEndMarkerBytes = 12;
ActivityAudit audit_activity(const profiler::ActivityTrace& trace, const std::vector<uint64_t>& stream_done_ns,
                             uint64_t flush_bytes, const std::vector<std::string>& own_objects = {});

}  // namespace kloop
