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

profiler::KernelRecord launched(const std::string& name, uint32_t correlation, uint64_t start, uint64_t end) {
  profiler::KernelRecord k = kernel(name, 7, start, end);
  k.mangled = name;
  k.correlation_id = correlation;
  return k;
}

constexpr const char* kModule = "/tmp/kloop-work/candidate.so";
constexpr const char* kTorch = "/opt/torch/lib/libtorch_cuda.so";
constexpr const char* kCublasLt = "/opt/nvidia/cublas/lib/libcublasLt.so.12";

// Library use by origin: a kernel belongs to the binary that launched it,
// whatever its name says. ATen's kernels outside at:: (a global or an
// anonymous namespace) are ATen's; the module's own kernels named like
// ATen's, or built from CUB in a renamed namespace, are the module's; the
// template libraries it compiled in are named; vendor machine code it
// launched itself is still the vendor's.
TEST(ActivityAuditTest, LibraryUseIsJudgedByTheLaunchingBinary) {
  profiler::ActivityTrace t;
  t.memory = {legacy_marker(100), flush(1000), call_end(9000)};
  t.kernels = {launched("void (anonymous namespace)::softmax_warp_forward<float>(float*)", 1, 2000, 2100),
               launched("void at::native::my_own_relu(float*)", 2, 2200, 2300),
               launched("void renamed_cub::DeviceReduceKernel<float>(float*)", 3, 2400, 2500),
               launched("void cub::_V_300000_SM_900::detail::transform::transform_kernel<int>(int)", 4, 2600, 2700)};
  t.launches = {{1, t.kernels[0].mangled, kTorch, false},
                {2, t.kernels[1].mangled, kModule, false},
                {3, t.kernels[2].mangled, kModule, false},
                {4, t.kernels[3].mangled, kModule, false}};
  ActivityAudit a = audit_activity(t, {9100}, kFlush, {kModule});
  ASSERT_TRUE(a.unavailable.empty()) << a.unavailable;
  EXPECT_EQ(a.libraries, (std::vector<std::string>{"aten"}));
  EXPECT_EQ(a.compiled_in, (std::vector<std::string>{"cub"}));
  EXPECT_EQ(a.unattributed_kernels, 0);

  // Without the ATen launch the module's kernels are all its own.
  t.kernels.erase(t.kernels.begin());
  a = audit_activity(t, {9100}, kFlush, {kModule});
  EXPECT_TRUE(a.libraries.empty());

  // cuBLAS's kernel launched by the module from a cubin it loaded itself.
  t.kernels.push_back(launched("nvjet_tst_128x64_64x8_1x2_h_bz_TNT", 5, 3000, 4000));
  t.launches.push_back({5, t.kernels.back().mangled, kModule, false});
  a = audit_activity(t, {9100}, kFlush, {kModule});
  EXPECT_EQ(a.libraries, (std::vector<std::string>{"cublas"}));

  // Any other binary is precompiled code that is not the module's.
  t.launches.back().object = "/opt/site-packages/flash_attn_2_cuda.so";
  t.kernels.back().name = t.kernels.back().mangled = "void flash_fwd_kernel<Traits>(Params)";
  t.launches.back().mangled = t.kernels.back().mangled;
  a = audit_activity(t, {9100}, kFlush, {kModule});
  EXPECT_EQ(a.libraries, (std::vector<std::string>{"flash_attn_2_cuda"}));
}

// A Python candidate's Triton cache is its own: its hand-written Triton
// kernel launched from there is its own, torch.compile's kernels (which
// Triton compiles into the same cache) are Inductor's, by their names.
TEST(ActivityAuditTest, TorchCompilesKernelsInTheTritonCacheAreNotTheCandidates) {
  const std::string triton = "/dev/shm/kloop-work-1/sandbox/triton/";
  profiler::ActivityTrace t;
  t.memory = {legacy_marker(100), flush(1000), call_end(9000)};
  t.kernels = {launched("relu_kernel", 1, 2000, 2100)};
  t.launches = {{1, t.kernels[0].mangled, triton + "3f/__triton_launcher.so", false}};
  ActivityAudit a = audit_activity(t, {9100}, kFlush, {kModule, triton});
  ASSERT_TRUE(a.unavailable.empty()) << a.unavailable;
  EXPECT_TRUE(a.libraries.empty());

  t.kernels.push_back(launched("triton_poi_fused_relu_0", 2, 2200, 2300));
  t.launches.push_back({2, t.kernels.back().mangled, triton + "a9/__triton_launcher.so", false});
  a = audit_activity(t, {9100}, kFlush, {kModule, triton});
  EXPECT_EQ(a.libraries, (std::vector<std::string>{"inductor"}));
}

// A graph's kernels carry the graph launch's correlation id: they are judged
// by the launches captured into the graph (by name), not by whoever
// launched the graph; a kernel whose launch was never seen falls back on
// its name.
TEST(ActivityAuditTest, GraphKernelsAreJudgedByTheirCapturedLaunches) {
  profiler::ActivityTrace t;
  t.memory = {legacy_marker(100), flush(1000), call_end(9000)};
  t.kernels = {launched("ampere_sgemm_128x64_nn", 20, 2000, 3000), launched("relu(float*)", 20, 3100, 3200)};
  t.launches = {{7, "ampere_sgemm_128x64_nn", kCublasLt, false},  // captured from cuBLAS
                {8, "relu(float*)", kModule, false},              // captured from the module
                {20, "", kModule, true}};                         // the module launches the graph
  ActivityAudit a = audit_activity(t, {9100}, kFlush, {kModule});
  ASSERT_TRUE(a.unavailable.empty()) << a.unavailable;
  EXPECT_EQ(a.libraries, (std::vector<std::string>{"cublas"}));
  EXPECT_EQ(a.unattributed_kernels, 0);

  t.launches.erase(t.launches.begin());  // captured before the trace: only the name is left
  a = audit_activity(t, {9100}, kFlush, {kModule});
  EXPECT_EQ(a.libraries, (std::vector<std::string>{"cublas"}));
  EXPECT_EQ(a.unattributed_kernels, 1);
}

}  // namespace
}  // namespace kloop
