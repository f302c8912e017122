// The CUPTI side on a machine without a usable GPU (CI): every entry point
// returns a clear reason and the process goes on. Skipped where a GPU exists.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "profiler/activity_tracer.h"
#include "profiler/detail/cupti_status.h"
#include "profiler/range_profiler.h"

namespace kloop::profiler {
namespace {

bool gpu_present() {
  int count = 0;
  const bool present = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  cudaGetLastError();
  return present;
}

TEST(CuptiWithoutGpuTest, ActivityTracerRefusesWithAReason) {
  if (gpu_present()) GTEST_SKIP() << "a GPU is present; tests/gpu covers this machine";
  for (int attempt = 0; attempt < 2; ++attempt) {  // refusing leaves nothing behind
    ActivityTracer tracer;
    std::string why;
    EXPECT_FALSE(tracer.start(&why));
    EXPECT_NE(why.find("CUDA"), std::string::npos) << why;
    EXPECT_FALSE(tracer.running());
    const ActivityTrace trace = tracer.stop();
    EXPECT_TRUE(trace.kernels.empty());
    EXPECT_EQ(trace.unavailable, why);
  }
  ActivityTracer never_started;
  EXPECT_FALSE(never_started.stop().unavailable.empty());
}

TEST(CuptiWithoutGpuTest, RangeProfilerReportsUnavailableWithoutRunning) {
  if (gpu_present()) GTEST_SKIP() << "a GPU is present; tests/gpu covers this machine";
  int runs = 0;
  RangeProfiler profiler;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const MetricsReport report = profiler.profile([&] { ++runs; });
    EXPECT_NE(report.unavailable.find("no usable CUDA GPU"), std::string::npos) << report.unavailable;
    EXPECT_EQ(report.unavailable.find('\n'), std::string::npos) << "one line";
    EXPECT_TRUE(report.kernels.empty());
    EXPECT_GE(report.seconds, 0);
  }
  EXPECT_EQ(runs, 0);
}

// The Profiler Host API needs no GPU: the metric names must be valid for the
// H200's chip and schedule in a few replay passes.
TEST(RangeProfilerPlanTest, EveryMetricIsKnownOnGH100) {
  const MetricsReport plan = RangeProfiler::plan("GH100");
  EXPECT_TRUE(plan.unavailable.empty()) << plan.unavailable;
  EXPECT_TRUE(plan.notes.empty()) << plan.notes.front();
  EXPECT_GT(plan.passes, 1);
  EXPECT_LE(plan.passes, 16);
  EXPECT_TRUE(plan.kernels.empty());
}

TEST(RangeProfilerPlanTest, UnknownChipIsAReasonNotACrash) {
  const MetricsReport plan = RangeProfiler::plan("XX999");
  EXPECT_NE(plan.unavailable.find("cuptiProfilerHostInitialize"), std::string::npos) << plan.unavailable;
  EXPECT_EQ(plan.passes, 0);
}

TEST(CuptiStatusTest, ExplainsTheFailuresAUserCanFix) {
  const std::string privileges = detail::explain_cupti(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, "cuptiRangeProfilerEnable");
  EXPECT_NE(privileges.find("ERR_NVGPUCTRPERM"), std::string::npos) << privileges;
  EXPECT_NE(privileges.find("cuptiRangeProfilerEnable: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"), std::string::npos)
      << privileges;
  const std::string attached =
      detail::explain_cupti(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, "cuptiActivityEnable");
  EXPECT_NE(attached.find("another profiler is attached"), std::string::npos) << attached;
  EXPECT_NE(detail::explain_cupti(CUPTI_ERROR_INVALID_CHIP_NAME, "cuptiProfilerHostInitialize").find("chip"),
            std::string::npos);
}

TEST(CuptiStatusTest, MetricNamesCoverEveryKernelMetricsField) {
  const std::vector<std::string>& names = RangeProfiler::metric_names();
  ASSERT_EQ(names.size(), 7u);
  EXPECT_EQ(names[0], "dram__throughput.avg.pct_of_peak_sustained_elapsed");
  EXPECT_EQ(names[1], "dram__bytes_read.sum");
  EXPECT_EQ(names[2], "dram__bytes_write.sum");
  EXPECT_EQ(names[3], "sm__throughput.avg.pct_of_peak_sustained_elapsed");
  EXPECT_EQ(names[4], "sm__warps_active.avg.pct_of_peak_sustained_active");
  EXPECT_EQ(names[5], "l1tex__t_sector_hit_rate.pct");
  EXPECT_EQ(names[6], "lts__t_sector_hit_rate.pct");
}

}  // namespace
}  // namespace kloop::profiler
