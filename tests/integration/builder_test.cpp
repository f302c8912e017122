// The builder against the real host compiler: caching, invalidation,
// diagnostics, concurrent builds of one source, and the timeout.
#include "evaluator/build/builder.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace kloop {
namespace {

namespace fs = std::filesystem;

class BuilderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kloop-builder-test-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    config_ = BuilderConfig::from_environment();
    config_.cache_dir = (dir_ / "cache").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string source(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  static std::string fixture(const std::string& name) {
    return std::string(KLOOP_TEST_FIXTURES) + "/relu/" + name;
  }
  int entries() const {
    int n = 0;
    for (const auto& e : fs::directory_iterator(fs::path(config_.cache_dir) / "builds")) {
      if (e.is_directory()) ++n;
    }
    return n;
  }

  fs::path dir_;
  BuilderConfig config_;
};

TEST_F(BuilderTest, BuildsThenServesFromCache) {
  Builder b(config_);
  BuildResult first = b.build(fixture("correct.cpp"), ModuleRole::kCandidate, BuildTarget::kCpu);
  ASSERT_TRUE(first.ok) << first.log;
  EXPECT_FALSE(first.cached);
  EXPECT_TRUE(fs::exists(first.library_path));
  BuildResult again = Builder(config_).build(fixture("correct.cpp"), ModuleRole::kCandidate, BuildTarget::kCpu);
  EXPECT_TRUE(again.ok);
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(again.library_path, first.library_path);
}

TEST_F(BuilderTest, KeyCoversSourceRoleAndFlags) {
  config_.use_reference_pch = false;  // a reference key would otherwise build the PCH in this fresh cache
  Builder b(config_);
  const std::string text = "int x;\n";
  std::string k = b.cache_key(text, ModuleRole::kCandidate, BuildTarget::kCpu);
  EXPECT_EQ(k, b.cache_key(text, ModuleRole::kCandidate, BuildTarget::kCpu));
  EXPECT_NE(k, b.cache_key(text + " ", ModuleRole::kCandidate, BuildTarget::kCpu));
  EXPECT_NE(k, b.cache_key(text, ModuleRole::kReference, BuildTarget::kCpu));
  BuilderConfig o3 = config_;
  o3.optimization = "-O3";
  EXPECT_NE(k, Builder(o3).cache_key(text, ModuleRole::kCandidate, BuildTarget::kCpu));
}

// References go through the shared precompiled header of reference_api.h
// (clang's instantiating PCH when clang is installed, else GCC's), and the
// key records which, so a build with the PCH never answers for one without.
TEST_F(BuilderTest, ReferencesUseThePrecompiledHeader) {
  config_ = BuilderConfig::from_environment();  // the suite's shared cache: the PCH is built once per run
  const std::string reference = std::string(KLOOP_TEST_PROBLEMS) + "/kernelbench/level1/19_ReLU.cpp";
  Builder b(config_);
  BuildResult r = b.build(reference, ModuleRole::kReference, BuildTarget::kCpu);
  ASSERT_TRUE(r.ok) << r.log;
  const bool clang = r.command.find("-include-pch") != std::string::npos;
  const bool gcc = r.command.find("-include ") != std::string::npos && r.command.find("-Winvalid-pch") != std::string::npos;
  EXPECT_TRUE(clang || gcc) << r.command;
  if (clang) {
    EXPECT_EQ(r.command.rfind(config_.reference_cxx, 0), 0u) << "clang builds references: " << r.command;
  }
  BuilderConfig without = config_;
  without.use_reference_pch = false;
  std::string text = "// same text\n";
  EXPECT_NE(b.cache_key(text, ModuleRole::kReference, BuildTarget::kCpu),
            Builder(without).cache_key(text, ModuleRole::kReference, BuildTarget::kCpu));
}

TEST_F(BuilderTest, CompileErrorsAreParsedAndCached) {
  Builder b(config_);
  BuildResult r = b.build(fixture("compile_error.cpp"), ModuleRole::kCandidate, BuildTarget::kCpu);
  EXPECT_FALSE(r.ok);
  ASSERT_FALSE(r.diagnostics.empty()) << r.log;
  bool found = false;
  for (const auto& d : r.diagnostics) {
    if (d.severity == "error" && d.file == "candidate.cpp" && d.line == 9 &&
        d.message.find("undeclared_function") != std::string::npos) {
      found = true;
    }
  }
  EXPECT_TRUE(found) << r.log;
  BuildResult again = b.build(fixture("compile_error.cpp"), ModuleRole::kCandidate, BuildTarget::kCpu);
  EXPECT_TRUE(again.cached);
  EXPECT_FALSE(again.ok);
  EXPECT_EQ(again.log, r.log);
}

TEST_F(BuilderTest, TwoProcessesBuildingOneSourceShareOneEntry) {
  std::string src = source("shared.cpp", "#include <kloop/kernel_api.h>\nextern \"C\" int f() { return 1; }\n");
  pid_t kids[2];
  for (pid_t& k : kids) {
    k = fork();
    ASSERT_GE(k, 0);
    if (k == 0) {
      BuildResult r = Builder(config_).build(src, ModuleRole::kCandidate, BuildTarget::kCpu);
      _exit(r.ok && fs::exists(r.library_path) ? 0 : 1);
    }
  }
  for (pid_t k : kids) {
    int status = 0;
    waitpid(k, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_EQ(entries(), 1);  // no leftover temporary folders, no duplicate
  BuildResult r = Builder(config_).build(src, ModuleRole::kCandidate, BuildTarget::kCpu);
  EXPECT_TRUE(r.cached);
}

TEST_F(BuilderTest, TimeoutIsReportedAndNotCached) {
  config_.timeout = std::chrono::seconds(1);
  // The full ATen header takes far longer than a second to compile.
  std::string src = source("slow.cpp", "#include <ATen/ATen.h>\nint y;\n");
  BuildResult r = Builder(config_).build(src, ModuleRole::kCandidate, BuildTarget::kCpu);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(entries(), 0);
}

}  // namespace
}  // namespace kloop
