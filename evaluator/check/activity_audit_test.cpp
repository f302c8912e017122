// The activity audit on synthetic traces: calls are split at kloop's flush
// memsets (told from the module's by their size), and side-stream kernels,
// kernels outliving the stream sync and library kernels are found.
#include "evaluator/check/activity_audit.h"

#include <gtest/gtest.h>

namespace kloop {
namespace {

profiler::KernelRecord kernel(const std::string& name, uint32_t stream, uint64_t start, uint64_t end) {
  profiler::KernelRecord k;
  k.name = name;
  k.stream_id = stream;
  k.start_ns = start;
  k.end_ns = end;
  return k;
}

constexpr uint64_t kFlush = 50 << 20;

profiler::MemoryRecord memset_of(uint64_t bytes, uint64_t start, uint32_t stream) {
  profiler::MemoryRecord m;
  m.kind = "memset";
  m.bytes = bytes;
  m.stream_id = stream;
  m.start_ns = start;
  m.end_ns = start + 500;
  return m;
}
profiler::MemoryRecord flush(uint64_t start, uint32_t stream = 7) { return memset_of(kFlush, start, stream); }
profiler::MemoryRecord legacy_marker(uint64_t start) { return memset_of(kLegacyMarkerBytes, start, 1); }
profiler::MemoryRecord call_end(uint64_t start, uint32_t stream = 7) {
  return memset_of(kCallEndMarkerBytes, start, stream);
}

TEST(ActivityAuditTest, CleanCandidateOnKloopsStream) {
  profiler::ActivityTrace t;
  t.memory = {legacy_marker(100), flush(1000), call_end(5000), flush(10000), call_end(14000)};
  t.kernels = {kernel("relu_kernel(float const*, float*, long)", 7, 2000, 5000),
               kernel("relu_kernel(float const*, float*, long)", 1, 11000, 14000)};  // a plain <<<>>> launch
  ActivityAudit a = audit_activity(t, {5100, 14100}, kFlush);
  ASSERT_TRUE(a.unavailable.empty()) << a.unavailable;
  EXPECT_EQ(a.calls, 2);
  EXPECT_DOUBLE_EQ(a.kernels_per_call, 1);
  EXPECT_DOUBLE_EQ(a.gpu_us_per_call, 3);
  EXPECT_EQ(a.other_stream_kernels, 0);
  EXPECT_EQ(a.late_kernels, 0);
  EXPECT_TRUE(a.libraries.empty());
}

TEST(ActivityAuditTest, SideStreamLateAndLibraryKernelsAreFound) {
  profiler::ActivityTrace t;
  t.memory = {legacy_marker(100), flush(1000), call_end(4000)};
  t.kernels = {kernel("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", 7, 2000, 4000),
               kernel("hidden_work(float*)", 9, 2500, 90000)};
  ActivityAudit a = audit_activity(t, {4100}, kFlush);
  ASSERT_TRUE(a.unavailable.empty()) << a.unavailable;
  EXPECT_EQ(a.other_stream_kernels, 1);
  EXPECT_EQ(a.late_kernels, 1);
  ASSERT_EQ(a.late_names.size(), 1u);
  EXPECT_EQ(a.late_names[0], "hidden_work(float*)");
  ASSERT_FALSE(a.libraries.empty());
  EXPECT_EQ(a.libraries[0], "cublas");
}

TEST(ActivityAuditTest, MissingMarkersOrTraceSayWhy) {
  profiler::ActivityTrace t;
  t.unavailable = "no usable CUDA GPU";
  EXPECT_EQ(audit_activity(t, {}, kFlush).unavailable, "no usable CUDA GPU");
  profiler::ActivityTrace no_memsets;
  no_memsets.kernels = {kernel("k", 7, 1, 2)};
  EXPECT_NE(audit_activity(no_memsets, {5}, kFlush).unavailable.find("markers"), std::string::npos);
}

// A module's own memsets (it zeroes its output, or adds one to confuse the
// split) neither open calls nor turn the audit off; its kernels are still
// audited. One that imitates the flush miscounts the markers: unavailable,
// which the strict protocol does not accept (audit_unavailable).
TEST(ActivityAuditTest, TheModulesOwnMemsetsAreNotMarkers) {
  profiler::ActivityTrace t;
  t.memory = {legacy_marker(100), flush(1000), memset_of(4096, 1600, 7), memset_of(4, 1700, 1), call_end(5000),
              flush(10000), memset_of(4096, 10600, 9), call_end(14000)};
  t.kernels = {kernel("relu", 7, 2000, 5000), kernel("hidden(float*)", 9, 11000, 14050)};  // not joined
  ActivityAudit a = audit_activity(t, {5100, 14100}, kFlush);
  ASSERT_TRUE(a.unavailable.empty()) << a.unavailable;
  EXPECT_EQ(a.calls, 2);
  EXPECT_EQ(a.other_stream_kernels, 1);
  t.memory.push_back(memset_of(kFlush, 12000, 7));
  EXPECT_NE(audit_activity(t, {5100, 14100}, kFlush).unavailable.find("markers"), std::string::npos);
}

// A fork-join: work put on a second stream and joined back (an event on it,
// a wait on the current stream) ends before the current stream reaches the
// call's end marker, so the timer covered it. Un-joined work outlives the
// marker and stays side-stream work, whatever the module's own 12-byte
// memsets earlier in the call say (the last marker of a call counts).
TEST(ActivityAuditTest, JoinedSideStreamsAreAcceptedUnjoinedAreNot) {
  profiler::ActivityTrace t;
  t.memory = {legacy_marker(100), flush(1000), call_end(6000), flush(10000), memset_of(kCallEndMarkerBytes, 10500, 7),
              call_end(16000)};
  t.kernels = {kernel("left_half", 7, 2000, 4000), kernel("right_half", 9, 2000, 5900),  // joined
               kernel("left_half", 7, 11000, 13000), kernel("right_half", 9, 11000, 15000)};
  ActivityAudit a = audit_activity(t, {6100, 16100}, kFlush);
  ASSERT_TRUE(a.unavailable.empty()) << a.unavailable;
  EXPECT_EQ(a.joined_stream_kernels, 2);
  EXPECT_EQ(a.other_stream_kernels, 0);
  EXPECT_EQ(a.late_kernels, 0);

  t.kernels.back() = kernel("right_half", 9, 11000, 16050);  // the current stream did not wait for it
  a = audit_activity(t, {6100, 16100}, kFlush);
  EXPECT_EQ(a.joined_stream_kernels, 1);
  EXPECT_EQ(a.other_stream_kernels, 1);
  ASSERT_EQ(a.other_stream_names.size(), 1u);
  EXPECT_EQ(a.other_stream_names[0], "right_half");
}

// A call without its end marker (the module swallowed kloop's memset, or
// the trace lost it) leaves nothing to hold other streams against.
TEST(ActivityAuditTest, MissingEndMarkerMakesTheAuditUnavailable) {
  profiler::ActivityTrace t;
  t.memory = {legacy_marker(100), flush(1000), call_end(5000), flush(10000), call_end(14000, 9)};
  t.kernels = {kernel("relu", 7, 2000, 5000), kernel("relu", 7, 11000, 14000)};
  const ActivityAudit a = audit_activity(t, {5100, 14100}, kFlush);
  EXPECT_NE(a.unavailable.find("end-of-call marker"), std::string::npos) << a.unavailable;
}

}  // namespace
}  // namespace kloop
