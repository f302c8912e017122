#include "profiler/digest.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kloop::profiler {
namespace {

// A launch of `us` microseconds starting at `start_us`.
KernelRecord launch(const std::string& name, double start_us, double us, uint32_t correlation_id) {
  KernelRecord k;
  k.name = name;
  k.mangled = name;
  k.grid = {1024, 1, 1};
  k.block = {256, 1, 1};
  k.registers_per_thread = 32;
  k.stream_id = 7;
  k.start_ns = static_cast<uint64_t>(start_us * 1000);
  k.end_ns = static_cast<uint64_t>((start_us + us) * 1000);
  k.correlation_id = correlation_id;
  return k;
}

KernelMetrics counters(const std::string& name, int index, double dram_pct, double sm_pct, double bytes = kNoValue) {
  KernelMetrics m;
  m.name = name;
  m.launch_index = index;
  m.dram_throughput_pct = dram_pct;
  m.sm_throughput_pct = sm_pct;
  m.dram_bytes_read = std::isnan(bytes) ? kNoValue : bytes / 2;
  m.dram_bytes_written = std::isnan(bytes) ? kNoValue : bytes / 2;
  m.achieved_occupancy_pct = 85;
  m.l1_hit_rate_pct = 60;
  m.l2_hit_rate_pct = 70;
  return m;
}

DeviceRates h200() { return {"NVIDIA H200", 4.3e12, 67e12, 495e12, 790e12, 132, 64}; }

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The digest's line that contains `part`, or "".
std::string line_with(const std::string& text, const std::string& part) {
  std::size_t at = text.find(part);
  if (at == std::string::npos) return "";
  std::size_t begin = text.rfind('\n', at);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return text.substr(begin, text.find('\n', at) - begin);
}

constexpr std::size_t kRoomy = 100000;

TEST(BoundTest, ClassifiesFromThroughputs) {
  EXPECT_EQ(classify_bound(90, 30, 500, kNoValue), Bound::kMemory);
  EXPECT_EQ(classify_bound(3, 92, 500, kNoValue), Bound::kCompute);
  EXPECT_EQ(classify_bound(20, 25, 500, kNoValue), Bound::kLatency);  // neither unit busy
  EXPECT_EQ(classify_bound(50, 10, 2, kNoValue), Bound::kLatency);    // a 2 µs launch is launch-bound...
  EXPECT_EQ(classify_bound(85, 10, 2, kNoValue), Bound::kMemory);     // ...unless DRAM is really busy
  EXPECT_EQ(classify_bound(kNoValue, 10, 100, 0.8), Bound::kMemory);  // 80% of the calibrated bandwidth
  EXPECT_EQ(classify_bound(30, 35, 100, 0.7), Bound::kMemory);        // achieved bandwidth outranks the %
  EXPECT_EQ(classify_bound(kNoValue, kNoValue, 100, kNoValue), Bound::kUnknown);
  EXPECT_STREQ(bound_name(Bound::kLatency), "latency");
}

TEST(OccupancyTest, NamesWhatLimitsResidentBlocks) {
  KernelRecord k = launch("k", 0, 1, 1);
  k.registers_per_thread = 128;  // 4096 registers per warp: 16 warps, 2 blocks of 8
  OccupancyLimit limit = occupancy_limit(k);
  EXPECT_EQ(limit.blocks_per_sm, 2);
  EXPECT_EQ(limit.limiter, "registers");
  EXPECT_DOUBLE_EQ(limit.theoretical_pct, 25);

  k.registers_per_thread = 30;  // rounds up to 32 per thread: 8 blocks, as many as the thread limit
  EXPECT_EQ(occupancy_limit(k).blocks_per_sm, 8);
  EXPECT_DOUBLE_EQ(occupancy_limit(k).theoretical_pct, 100);

  k.block = {128, 1, 1};
  k.dynamic_shared_bytes = 100 * 1024;  // two blocks of 100 KiB (+1 KiB reserved) in 228 KiB
  limit = occupancy_limit(k);
  EXPECT_EQ(limit.blocks_per_sm, 2);
  EXPECT_EQ(limit.limiter, "shared memory");
  EXPECT_DOUBLE_EQ(limit.theoretical_pct, 12.5);

  k.dynamic_shared_bytes = 0;
  k.block = {32, 1, 1};  // one warp per block: the 32-block limit caps it at half the warps
  limit = occupancy_limit(k);
  EXPECT_EQ(limit.blocks_per_sm, 32);
  EXPECT_EQ(limit.limiter, "blocks");
  EXPECT_DOUBLE_EQ(limit.theoretical_pct, 50);

  EXPECT_EQ(occupancy_limit(KernelRecord{}).limiter, "");  // no launch shape, no claim
}

TEST(DigestTest, RanksKernelsBySummedTime) {
  ActivityTrace t;
  uint32_t id = 0;
  for (int i = 0; i < 3; ++i) t.kernels.push_back(launch("gemm_kernel", i * 1000, 100, ++id));
  t.kernels.push_back(launch("softmax_kernel", 5000, 50, ++id));
  for (int i = 0; i < 10; ++i) t.kernels.push_back(launch("bias_kernel", 6000 + i * 10, 2, ++id));
  DigestInputs in;
  in.forward_median_us = 400;
  const std::string d = make_digest(t, MetricsReport{}, in, kRoomy);

  const std::size_t first = d.find("1. gemm_kernel [custom]");
  const std::size_t second = d.find("2. softmax_kernel");
  const std::size_t third = d.find("3. bias_kernel");
  ASSERT_NE(first, std::string::npos) << d;
  ASSERT_NE(second, std::string::npos) << d;
  ASSERT_NE(third, std::string::npos) << d;
  EXPECT_LT(first, second);
  EXPECT_LT(second, third);
  // 300 of 370 µs; three launches of 100 µs.
  EXPECT_TRUE(has(d, "1. gemm_kernel [custom]: 300.0 µs per forward (81% of GPU time), 3 launches of 100.0 µs")) << d;
  EXPECT_TRUE(has(d, "2. softmax_kernel [custom]: 50.0 µs per forward (14% of GPU time), 1 launch")) << d;
  EXPECT_TRUE(has(d, "3. bias_kernel [custom]: 20.0 µs per forward (5.4% of GPU time), 10 launches of 2.00 µs")) << d;
  EXPECT_TRUE(has(d, "GPU time per forward: 370.0 µs in 14 kernel launches of 3 kernels; GPU busy 92% of the forward"))
      << d;
  EXPECT_TRUE(has(d, "   launch: grid (1024,1,1) block (256,1,1), 32 registers/thread, 0 B shared memory/block")) << d;
  EXPECT_TRUE(has(d, "bound: unknown (no hardware counters)")) << d;
  EXPECT_EQ(d, make_digest(t, MetricsReport{}, in, kRoomy));  // deterministic
}

TEST(DigestTest, EqualTimesRankInLaunchOrder) {
  ActivityTrace t;
  t.kernels.push_back(launch("zeta", 0, 10, 1));
  t.kernels.push_back(launch("alpha", 20, 10, 2));
  const std::string d = make_digest(t, MetricsReport{}, DigestInputs{}, kRoomy);
  EXPECT_LT(d.find("1. zeta"), d.find("2. alpha")) << d;
}

TEST(DigestTest, MemoryBoundKernelNearTheCalibratedBandwidth) {
  ActivityTrace t;
  t.kernels.push_back(launch("copy_kernel", 0, 500, 1));
  MetricsReport m;
  m.kernels.push_back(counters("copy_kernel", 0, 92, 31, 2.0e9));  // 2 GB in 500 µs = 4000 GB/s
  DigestInputs in;
  in.rates = h200();
  in.problem_bytes = 2.0e9;
  const std::string d = make_digest(t, m, in, kRoomy);
  EXPECT_TRUE(has(d,
                  "bound: memory (DRAM 92% of peak, 2.00 GB/launch at 4000 GB/s = 93% of calibrated, SM 31% of "
                  "peak, warps active 85%, L1 hit 60%, L2 hit 70%)"))
      << d;
  EXPECT_FALSE(has(d, "low DRAM bandwidth")) << d;
  EXPECT_FALSE(has(d, "unavoidable bytes")) << d;  // moves exactly the problem's bytes
}

TEST(DigestTest, LowBandwidthOnAMemoryDominatedKernel) {
  ActivityTrace t;
  t.kernels.push_back(launch("strided_copy", 0, 1000, 1));
  MetricsReport m;
  m.kernels.push_back(counters("strided_copy", 0, 45, 20, 1.0e9));  // 1000 GB/s of 4300
  DigestInputs in;
  in.rates = h200();
  const std::string d = make_digest(t, m, in, kRoomy);
  EXPECT_TRUE(has(d, "bound: memory")) << d;
  EXPECT_TRUE(
      has(d, "- low DRAM bandwidth for a memory-dominated kernel: 1000 GB/s is 23% of the calibrated 4300 GB/s"))
      << d;

  in.rates.reset();  // without calibration the counters' own % of peak decides
  const std::string uncalibrated = make_digest(t, m, in, kRoomy);
  EXPECT_TRUE(has(uncalibrated, "- low DRAM bandwidth for a memory-dominated kernel: 45% of peak")) << uncalibrated;
}

TEST(DigestTest, ExcessTrafficWithALowL1HitRate) {
  ActivityTrace t;
  t.kernels.push_back(launch("naive_matmul", 0, 2000, 1));
  MetricsReport m;
  KernelMetrics k = counters("naive_matmul", 0, 70, 40, 1.0e9);
  k.l1_hit_rate_pct = 12;
  m.kernels.push_back(k);
  DigestInputs in;
  in.problem_bytes = 3.2e8;
  const std::string d = make_digest(t, m, in, kRoomy);
  EXPECT_TRUE(has(d,
                  "- moves 3.1x the problem's unavoidable bytes (1.00 GB per forward vs 320.0 MB) with an L1 hit "
                  "rate of 12%: uncoalesced or repeated loads"))
      << d;
  EXPECT_TRUE(has(d, "- the kernels move 3.1x the problem's unavoidable bytes")) << d;
}

TEST(DigestTest, LowOccupancyNamesTheRegisterCount) {
  ActivityTrace t;
  KernelRecord k = launch("register_hog", 0, 800, 1);
  k.registers_per_thread = 168;  // 5376 registers per warp: 12 warps, one block of 8
  t.kernels.push_back(k);
  MetricsReport m;
  KernelMetrics c = counters("register_hog", 0, 20, 35);
  c.achieved_occupancy_pct = 11.8;
  m.kernels.push_back(c);
  const std::string d = make_digest(t, m, DigestInputs{}, kRoomy);
  EXPECT_TRUE(has(d,
                  "- low occupancy (12% warps active): 168 registers x 256 threads fit 1 block (8 of 64 warps) "
                  "per SM; fewer registers per thread"))
      << d;
  EXPECT_TRUE(has(d, "bound: latency")) << d;
}

TEST(DigestTest, LowOccupancyFromSharedMemoryAndFromSmallBlocks) {
  ActivityTrace t;
  KernelRecord k = launch("tiled", 0, 800, 1);
  k.block = {128, 1, 1};
  k.dynamic_shared_bytes = 100 * 1024;
  t.kernels.push_back(k);
  const std::string d = make_digest(t, MetricsReport{}, DigestInputs{}, kRoomy);  // theoretical 12.5%
  EXPECT_TRUE(has(d, "- low occupancy: 100.0 KiB of shared memory per block fit 2 blocks (8 of 64 warps) per SM")) << d;

  t.kernels[0] = launch("tiny_blocks", 0, 800, 1);
  t.kernels[0].block = {32, 1, 1};
  MetricsReport m;
  KernelMetrics c = counters("tiny_blocks", 0, 20, 30);
  c.achieved_occupancy_pct = 30;
  m.kernels.push_back(c);
  const std::string small = make_digest(t, m, DigestInputs{}, kRoomy);
  EXPECT_TRUE(has(small, "- low occupancy (30% warps active): up to 50% is possible")) << small;
}

TEST(DigestTest, SmallGridLeavesSmsIdle) {
  ActivityTrace t;
  KernelRecord k = launch("reduce_tail", 0, 300, 1);
  k.grid = {40, 1, 1};
  t.kernels.push_back(k);
  DigestInputs in;
  in.rates = h200();
  const std::string d = make_digest(t, MetricsReport{}, in, kRoomy);
  EXPECT_TRUE(has(d, "- grid of 40 blocks leaves 92 of 132 SMs idle")) << d;
}

TEST(DigestTest, ComputeBoundKernel) {
  ActivityTrace t;
  t.kernels.push_back(launch("fma_loop", 0, 900, 1));
  MetricsReport m;
  m.kernels.push_back(counters("fma_loop", 0, 0.4, 93, 1e6));
  m.kernels[0].l2_hit_rate_pct = 102;  // the H200 reported this for an FMA loop
  const std::string d = make_digest(t, m, DigestInputs{}, kRoomy);
  EXPECT_TRUE(has(d, "L2 hit 100%)")) << d;
  EXPECT_TRUE(has(d, "bound: compute (DRAM 0.4% of peak, 1.0 MB/launch, SM 93% of peak")) << d;
  EXPECT_TRUE(has(d, "- compute-bound at SM 93% of peak")) << d;
}

TEST(DigestTest, ManyTinyLaunches) {
  ActivityTrace t;
  for (int i = 0; i < 20; ++i) t.kernels.push_back(launch("add_one", i * 10, 2, i + 1));
  const std::string d = make_digest(t, MetricsReport{}, DigestInputs{}, kRoomy);
  EXPECT_TRUE(has(d, "- 20 launches under 5.00 µs each (40.0 µs per forward in total)")) << d;
  EXPECT_TRUE(has(d, "fuse them into fewer kernels")) << d;
  EXPECT_TRUE(has(d, "- 20 launches of 2.00 µs each: launch overhead dominates")) << d;

  t.kernels.resize(3);
  EXPECT_FALSE(has(make_digest(t, MetricsReport{}, DigestInputs{}, kRoomy), "under 5.00 µs each"));
}

TEST(DigestTest, IdleGpuHostCopiesAndStreams) {
  ActivityTrace t;
  t.kernels.push_back(launch("work", 0, 100, 1));
  KernelRecord side = launch("side_work", 200, 50, 2);
  side.stream_id = 9;
  t.kernels.push_back(side);
  t.memory.push_back({"memcpy DtoH", 4000000, 7, 300000, 310000});
  DigestInputs in;
  in.forward_median_us = 1000;
  const std::string d = make_digest(t, MetricsReport{}, in, kRoomy);
  EXPECT_TRUE(has(d, "plus 10.0 µs in 1 copy/memset (4.0 MB); GPU busy 16% of the forward")) << d;
  EXPECT_TRUE(has(d, "- the GPU idles 84% of the forward")) << d;
  EXPECT_TRUE(has(d, "- 1 copy between host and device per forward (4.0 MB, 10.0 µs)")) << d;
  EXPECT_TRUE(has(d, "- kernels ran on 2 streams")) << d;
}

TEST(DigestTest, SpeedOfLight) {
  DigestInputs in;
  in.problem_flops = 2e12;
  in.problem_bytes = 1e9;
  in.forward_median_us = 66666.7;
  in.rates = h200();
  in.rates->fp32_flops_per_s = 60e12;
  in.rates->dram_bytes_per_s = 4e12;
  const std::string d = make_digest(ActivityTrace{}, MetricsReport{}, in, kRoomy);
  EXPECT_TRUE(has(d,
                  "Speed of light: 2.00 TFLOP and 1.00 GB need at least 33.33 ms (compute-bound at 60 fp32 TFLOP/s "
                  "and 4000 GB/s); this forward runs at 50% of it"))
      << d;
  in.math = "tf32";  // 495 TFLOP/s: 4.04 ms
  EXPECT_TRUE(has(make_digest(ActivityTrace{}, MetricsReport{}, in, kRoomy), "need at least 4.04 ms (compute-bound"));
  in.problem_flops = 0;  // a copy: bytes alone
  EXPECT_TRUE(has(make_digest(ActivityTrace{}, MetricsReport{}, in, kRoomy),
                  "Speed of light: 1.00 GB need at least 250.0 µs (memory-bound at 4000 GB/s); this forward runs at"));
  in.problem_flops = 2e12;
  in.rates.reset();
  EXPECT_TRUE(has(make_digest(ActivityTrace{}, MetricsReport{}, in, kRoomy),
                  "Problem: 2.00 TFLOP and 1.00 GB (no calibrated rates: speed of light unknown)"));
}

TEST(DigestTest, SaysWhatIsMissingAndWhy) {
  ActivityTrace t;
  t.kernels.push_back(launch("copy_kernel", 0, 500, 1));
  MetricsReport m;
  m.unavailable = "no permission to read GPU performance counters (ERR_NVGPUCTRPERM)";
  const std::string d = make_digest(t, m, DigestInputs{}, kRoomy);
  EXPECT_TRUE(
      has(d, "Hardware counters unavailable: no permission to read GPU performance counters (ERR_NVGPUCTRPERM)"))
      << d;
  EXPECT_TRUE(has(d, "1. copy_kernel [custom]: 500.0 µs per forward")) << d;  // the trace still speaks

  ActivityTrace none;
  none.unavailable = "no usable CUDA GPU (cudaGetDeviceCount: cudaErrorNoDevice)";
  const std::string empty = make_digest(none, m, DigestInputs{}, kRoomy);
  EXPECT_TRUE(has(empty, "Kernel trace unavailable: no usable CUDA GPU")) << empty;
  EXPECT_FALSE(has(empty, "Kernels by GPU time")) << empty;

  MetricsReport partial;
  partial.kernels.push_back(counters("copy_kernel", 0, 90, 30));
  partial.notes.push_back("lts__t_sector_hit_rate.pct is not available on GH100");
  EXPECT_TRUE(has(make_digest(t, partial, DigestInputs{}, kRoomy),
                  "Hardware counters partial: lts__t_sector_hit_rate.pct is not available on GH100"));
}

TEST(DigestTest, NamelessCountersTakeTheTracesNamesByPosition) {
  ActivityTrace t;
  t.kernels.push_back(launch("first", 0, 100, 1));
  t.kernels.push_back(launch("second", 200, 300, 2));
  MetricsReport m;
  m.kernels.push_back(counters("", 0, 10, 95));
  m.kernels.push_back(counters("", 1, 90, 20));
  const std::vector<KernelSummary> s = summarize_kernels(t, m);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].name, "second");
  EXPECT_DOUBLE_EQ(s[0].dram_throughput_pct, 90);
  EXPECT_EQ(s[1].name, "first");
  EXPECT_DOUBLE_EQ(s[1].sm_throughput_pct, 95);
  EXPECT_EQ(s[1].profiled_launches, 1);
}

TEST(DigestTest, CountersOfOneKernelAverageOverItsLaunches) {
  ActivityTrace t;
  t.kernels.push_back(launch("k", 0, 10, 1));
  t.kernels.push_back(launch("k", 20, 10, 2));
  MetricsReport m;
  m.kernels.push_back(counters("k", 0, 80, 20, 1e6));
  KernelMetrics second = counters("k", 1, 60, kNoValue, 3e6);
  m.kernels.push_back(second);
  const std::vector<KernelSummary> s = summarize_kernels(t, m);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].launches, 2);
  EXPECT_EQ(s[0].profiled_launches, 2);
  EXPECT_DOUBLE_EQ(s[0].dram_throughput_pct, 70);
  EXPECT_DOUBLE_EQ(s[0].sm_throughput_pct, 20);  // the missing value does not count
  EXPECT_DOUBLE_EQ(s[0].dram_bytes_per_launch, 2e6);
  EXPECT_DOUBLE_EQ(s[0].share, 1.0);
}

TEST(DigestTest, ReferenceDigestShowsLibraryKernels) {
  ActivityTrace t;
  t.kernels.push_back(launch("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_cublas", 0, 300, 1));
  t.kernels.push_back(launch("void at::native::vectorized_elementwise_kernel<4>(int)", 400, 100, 2));
  DigestInputs in;
  in.role = "reference";
  const std::string d = make_digest(t, MetricsReport{}, in, kRoomy);
  EXPECT_TRUE(has(d, "Profile of the reference's forward")) << d;
  EXPECT_TRUE(has(d, "[cublas]")) << d;
  EXPECT_TRUE(has(d, "1. at::native::vectorized_elementwise_kernel<4> [aten]") ||
              has(d, "2. at::native::vectorized_elementwise_kernel<4> [aten]"))
      << d;
  EXPECT_TRUE(has(d, "- library kernels: aten (1 launch, 25% of GPU time), cublas (1 launch, 75% of GPU time)")) << d;
}

TEST(DigestTest, SeveralForwardsAreReportedPerForward) {
  ActivityTrace t;
  for (int i = 0; i < 4; ++i) t.kernels.push_back(launch("k", i * 100, 50, i + 1));
  DigestInputs in;
  in.forwards = 2;
  const std::string d = make_digest(t, MetricsReport{}, in, kRoomy);
  EXPECT_TRUE(has(d, "GPU time per forward: 100.0 µs in 2 kernel launches of 1 kernel")) << d;
  EXPECT_TRUE(has(d, "1. k [custom]: 100.0 µs per forward (100% of GPU time), 2 launches of 50.0 µs")) << d;
}

TEST(DigestTest, LongKernelNamesAreShortened) {
  ActivityTrace t;
  std::string name = "void ns::kernel<" + std::string(300, 'x') + ">(float*, int)";
  t.kernels.push_back(launch(name, 0, 10, 1));
  const std::string d = make_digest(t, MetricsReport{}, DigestInputs{}, kRoomy);
  const std::string title = line_with(d, "1. ns::kernel<");
  ASSERT_FALSE(title.empty()) << d;
  EXPECT_TRUE(has(title, "xxx... [custom]")) << title;
  EXPECT_FALSE(has(title, "(float*")) << title;
  EXPECT_LT(title.size(), 200u);

  t.kernels[0] = launch("void ns::(anonymous namespace)::copy_kernel(float4 const*, float4*, unsigned long)", 0, 10, 1);
  EXPECT_TRUE(has(make_digest(t, MetricsReport{}, DigestInputs{}, kRoomy), "1. ns::copy_kernel [custom]"));
}

ActivityTrace many_kernels(int n) {
  ActivityTrace t;
  for (int i = 0; i < n; ++i) {
    // Kernel i takes (n - i) * 10 µs, so ranks follow i.
    t.kernels.push_back(launch("kernel_" + std::to_string(100 + i), i * 1000, (n - i) * 10.0, i + 1));
  }
  return t;
}

TEST(DigestTest, CapDropsTheLowestRankedKernels) {
  const ActivityTrace t = many_kernels(12);
  DigestInputs in;
  in.forward_median_us = 1000;
  const std::string full = make_digest(t, MetricsReport{}, in, kRoomy);
  EXPECT_TRUE(has(full, "8. kernel_107")) << full;  // at most 8 kernel sections
  EXPECT_FALSE(has(full, "9. kernel_108")) << full;
  EXPECT_TRUE(has(full, "(4 more kernels: 13% of GPU time)")) << full;

  for (std::size_t cap : {700u, 500u, 400u}) {
    const std::string capped = make_digest(t, MetricsReport{}, in, cap);
    EXPECT_LE(capped.size(), cap);
    EXPECT_TRUE(has(capped, "1. kernel_100")) << capped;
    EXPECT_TRUE(has(capped, "more kernels")) << capped;
    EXPECT_EQ(capped.back(), '\n');  // whole lines only
    EXPECT_EQ(capped.rfind("(", capped.size() - 2), capped.rfind('\n', capped.size() - 2) + 1)
        << "the last line counts the dropped kernels:\n"
        << capped;
  }
  const std::string tiny = make_digest(t, MetricsReport{}, in, 120);
  EXPECT_LE(tiny.size(), 120u);
  EXPECT_TRUE(has(tiny, "Profile of the candidate's forward")) << tiny;
  EXPECT_TRUE(make_digest(t, MetricsReport{}, in, 0).empty());
}

TEST(DigestTest, NegligibleKernelsAreOnlyCounted) {
  ActivityTrace t;
  t.kernels.push_back(launch("big", 0, 1000, 1));
  for (int i = 0; i < 5; ++i) t.kernels.push_back(launch("small_" + std::to_string(i), 2000 + i * 10, 1, i + 2));
  const std::string d = make_digest(t, MetricsReport{}, DigestInputs{}, kRoomy);
  EXPECT_TRUE(has(d, "3. small_1")) << d;  // the first three are always shown
  EXPECT_FALSE(has(d, "4. small_2")) << d;
  EXPECT_TRUE(has(d, "(3 more kernels: 0.3% of GPU time)")) << d;
}

}  // namespace
}  // namespace kloop::profiler
