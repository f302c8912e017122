#include "evaluator/timing/device_figures.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace kloop {
namespace {

namespace fs = std::filesystem;

Calibration h200_like() {
  Calibration c;
  c.device = {{"name", "NVIDIA H200"}, {"cuda_driver", 13000}};
  c.dram_bytes_per_s = 4.0e12;
  c.fp32_flops_per_s = 50e12;
  c.tf32_flops_per_s = 400e12;
  c.bf16_flops_per_s = 800e12;
  return c;
}

TEST(SpeedOfLight, FloorIsTheSlowerOfMovingTheBytesAndDoingTheFlops) {
  // A 1 GiB elementwise op: read once, write once, one FLOP per element.
  const double n = 1 << 28;
  SpeedOfLight copy = speed_of_light(n, 8 * n, h200_like());
  EXPECT_EQ(copy.bound, "memory");
  EXPECT_NEAR(copy.floor_seconds, 8 * n / 4.0e12, 1e-12);
  // A 4096^3 GEMM: compute-bound, at the fastest (BF16) rate, never the FP32 one.
  const double m = 4096;
  SpeedOfLight gemm = speed_of_light(2 * m * m * m, 3 * 4 * m * m, h200_like());
  EXPECT_EQ(gemm.bound, "compute");
  EXPECT_NEAR(gemm.floor_seconds, 2 * m * m * m / 800e12, 1e-12);
}

class DeviceFiguresCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("kloop-figures-" + std::to_string(getpid()))).string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(DeviceFiguresCache, CalibrationRoundTripsPerGpuAndDriver) {
  EXPECT_FALSE(load_calibration(dir_, h200_like().device));
  store_calibration(dir_, h200_like());
  auto back = load_calibration(dir_, h200_like().device);
  ASSERT_TRUE(back);
  EXPECT_DOUBLE_EQ(back->bf16_flops_per_s, 800e12);
  nlohmann::json other_driver = {{"name", "NVIDIA H200"}, {"cuda_driver", 13010}};
  EXPECT_FALSE(load_calibration(dir_, other_driver)) << "a driver update measures again";
}

TEST_F(DeviceFiguresCache, BaselineIsReusedOnlyUnderTheSameKey) {
  BaselineKey key{"19_ReLU", "buildkey", {{"batch_size", 16}}, {{"name", "NVIDIA H200"}, {"cuda_driver", 13000}},
                  "2.11.0", {{"l2_flush", true}}};
  Baseline b;
  b.fp32 = summarize({1e-3, 1.1e-3, 0.9e-3});
  b.tf32 = summarize({0.5e-3, 0.5e-3, 0.5e-3});
  store_baseline(dir_, key, b);
  auto back = load_baseline(dir_, key);
  ASSERT_TRUE(back);
  EXPECT_DOUBLE_EQ(back->fp32.median, 1e-3);
  ASSERT_TRUE(back->tf32);
  EXPECT_DOUBLE_EQ(back->tf32->median, 0.5e-3);

  for (auto change : {+[](BaselineKey& k) { k.reference_build = "edited reference"; },
                      +[](BaselineKey& k) { k.dims["batch_size"] = 32; },
                      +[](BaselineKey& k) { k.device["cuda_driver"] = 13010; },
                      +[](BaselineKey& k) { k.torch_version = "2.12.0"; },
                      +[](BaselineKey& k) { k.rules["l2_flush"] = false; }}) {
    BaselineKey changed = key;
    change(changed);
    EXPECT_FALSE(load_baseline(dir_, changed)) << changed.hash();
  }
}

nlohmann::json read_json_file(const fs::path& p) { return nlohmann::json::parse(std::ifstream(p)); }
void write_json_file(const fs::path& p, const nlohmann::json& j) { std::ofstream(p) << j.dump(2); }

// Attack: a candidate that can write the cache edits the reference's stored
// time (a slower reference makes any candidate fast) or plants a baseline of
// its own. Neither is believed; the reference is measured again.
TEST_F(DeviceFiguresCache, TamperedOrUnsignedBaselineIsNotUsed) {
  BaselineKey key{"19_ReLU", "buildkey", {{"batch_size", 16}}, {{"name", "NVIDIA H200"}, {"cuda_driver", 13000}},
                  "2.11.0", {{"l2_flush", true}}};
  Baseline b;
  b.fp32 = summarize({1e-3, 1.1e-3, 0.9e-3});
  store_baseline(dir_, key, b);
  const fs::path file = fs::path(dir_) / "baselines" / (key.hash() + ".json");
  ASSERT_TRUE(fs::exists(file));
  const nlohmann::json stored = read_json_file(file);
  ASSERT_TRUE(stored.contains("mac"));

  nlohmann::json slower = stored;
  slower["fp32"]["median"] = 1.0;  // 1000x slower reference
  write_json_file(file, slower);
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(load_baseline(dir_, key)) << "an edited time must not be used";
  const std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warning.find(file.string()), std::string::npos) << warning;
  EXPECT_NE(warning.find("measured again"), std::string::npos) << warning;

  nlohmann::json unsigned_file = slower;
  unsigned_file.erase("mac");
  write_json_file(file, unsigned_file);
  EXPECT_FALSE(load_baseline(dir_, key)) << "a baseline without a MAC must not be used";

  // A genuine baseline of another key copied over this one's name.
  BaselineKey other = key;
  other.dims["batch_size"] = 4096;
  store_baseline(dir_, other, Baseline{summarize({5.0, 5.0, 5.0}), std::nullopt, ""});
  fs::copy_file(fs::path(dir_) / "baselines" / (other.hash() + ".json"), file, fs::copy_options::overwrite_existing);
  EXPECT_FALSE(load_baseline(dir_, key)) << "a signed baseline answers only for its own key";

  write_json_file(file, stored);
  auto back = load_baseline(dir_, key);
  ASSERT_TRUE(back) << "the untouched file is trusted again";
  EXPECT_DOUBLE_EQ(back->fp32.median, 1e-3);
}

// The reference's counters are reused only for the same reference, dims,
// device and counter format; edited ones (a candidate that could write the
// cache would make the reference look memory-bound in its feedback) are
// profiled again.
TEST_F(DeviceFiguresCache, ReferenceCountersAreReusedOnlyUnderTheSameKeyAndSignature) {
  BaselineKey key{"19_ReLU", "buildkey", {{"batch_size", 16}}, {{"name", "NVIDIA H200"}, {"cuda_driver", 13000}},
                  "2.11.0", {{"counters", 1}}};
  const nlohmann::json metrics = {{"kernels", {{{"name", "relu"}, {"dram_bytes", 1024}}}}, {"passes", 12}};
  EXPECT_FALSE(load_reference_metrics(dir_, key));
  store_reference_metrics(dir_, key, metrics);
  auto back = load_reference_metrics(dir_, key);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, metrics);
  for (auto change : {+[](BaselineKey& k) { k.reference_build = "edited reference"; },
                      +[](BaselineKey& k) { k.dims["batch_size"] = 32; },
                      +[](BaselineKey& k) { k.device["name"] = "NVIDIA H100"; },
                      +[](BaselineKey& k) { k.rules["counters"] = 2; }}) {
    BaselineKey changed = key;
    change(changed);
    EXPECT_FALSE(load_reference_metrics(dir_, changed)) << changed.hash();
  }
  EXPECT_FALSE(load_baseline(dir_, key)) << "counters are not a baseline";

  const fs::path file = fs::path(dir_) / "reference-metrics" / (key.hash() + ".json");
  ASSERT_TRUE(fs::exists(file));
  const nlohmann::json stored = read_json_file(file);
  nlohmann::json edited = stored;
  edited["metrics"]["passes"] = 13;
  write_json_file(file, edited);
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(load_reference_metrics(dir_, key)) << "edited counters must not be used";
  ::testing::internal::GetCapturedStderr();
  write_json_file(file, stored);
  EXPECT_TRUE(load_reference_metrics(dir_, key)) << "the untouched file is trusted again";
}

TEST_F(DeviceFiguresCache, TamperedCalibrationIsNotUsed) {
  store_calibration(dir_, h200_like());
  const fs::path file = calibration_path(dir_, h200_like().device);
  nlohmann::json j = read_json_file(file);
  j["dram_bytes_per_s"] = 1.0;  // a floor so low that nothing is ever "below the floor"
  write_json_file(file, j);
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(load_calibration(dir_, h200_like().device));
  EXPECT_NE(::testing::internal::GetCapturedStderr().find(file.string()), std::string::npos);
}

// A baseline is what every later candidate of its problem is compared with:
// one whose loop kept throttled samples (it discarded all it may) is not
// cached; one that discarded a few and then measured a steady card is.
TEST(BaselineCacheTest, ABaselineMeasuredOnAThrottlingCardIsNotKept) {
  EXPECT_EQ(baseline_not_kept(0, 0), "");
  EXPECT_EQ(baseline_not_kept(kMaxThrottledDiscards - 1, 117), "");
  const std::string fp32 = baseline_not_kept(kMaxThrottledDiscards, 0);
  EXPECT_NE(fp32.find("throttled"), std::string::npos) << fp32;
  EXPECT_NE(fp32.find("200 FP32"), std::string::npos) << fp32;
  EXPECT_NE(baseline_not_kept(3, kMaxThrottledDiscards), "");
}

}  // namespace
}  // namespace kloop
