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

TEST(ActivityAuditTest, CleanCandidateOnKloopsStream) {
  profiler::ActivityTrace t;
  t.memory = {legacy_marker(100), flush(1000), flush(10000)};
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
  t.memory = {legacy_marker(100), flush(1000)};
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
  t.memory = {legacy_marker(100), flush(1000), memset_of(4096, 1600, 7), memset_of(4, 1700, 1), flush(10000),
              memset_of(4096, 10600, 9)};
  t.kernels = {kernel("relu", 7, 2000, 5000), kernel("hidden(float*)", 9, 11000, 14000)};
  ActivityAudit a = audit_activity(t, {5100, 14100}, kFlush);
  ASSERT_TRUE(a.unavailable.empty()) << a.unavailable;
  EXPECT_EQ(a.calls, 2);
  EXPECT_EQ(a.other_stream_kernels, 1);
  t.memory.push_back(memset_of(kFlush, 12000, 7));
  EXPECT_NE(audit_activity(t, {5100, 14100}, kFlush).unavailable.find("markers"), std::string::npos);
}

}  // namespace
}  // namespace kloop
