// kloop baseline --resume and kloop audit --resume: rows an earlier
// (cut-short) run wrote are kept as they are and only the rest is measured;
// a table it cannot read is an error that names the file.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/shell.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::pair<int, std::string> run(const std::string& args) {
  const kloop::test::ShellResult r = kloop::test::shell(std::string(KLOOP_TEST_BINARY) + " " + args + " 2>&1");
  return {r.code, r.output};
}

class BaselineCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kloop-baseline-cli-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(BaselineCliTest, ResumeKeepsEarlierRowsAndMeasuresTheRest) {
  const fs::path earlier = dir_ / "earlier.json", table = dir_ / "table.json";
  // 19_ReLU was measured before (a figure no CPU run would give); the row
  // with an error is measured again.
  std::ofstream(earlier) << json::array({{{"task", "19_ReLU"}, {"level", 1}, {"fp32_ms", 123.5}, {"tf32_ms", 45.25}},
                                         {{"task", "21_Sigmoid"}, {"level", 1}, {"error", "killed"}}})
                                .dump();
  auto [rc, out] = run("baseline 19_ReLU 21_Sigmoid --device cpu --dims small --max-timing 0.02 --resume " +
                       earlier.string() + " --json " + table.string());
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("1 references measured on cpu (strict timing rules), 1 resumed: 0 failed"), std::string::npos)
      << out;
  const json rows = json::parse(std::ifstream(table));
  ASSERT_EQ(rows.size(), 2u) << rows.dump(2);
  EXPECT_EQ(rows[0]["task"], "19_ReLU");
  EXPECT_DOUBLE_EQ(rows[0]["fp32_ms"].get<double>(), 123.5);
  EXPECT_EQ(rows[0].value("resumed", false), true);
  EXPECT_EQ(rows[1]["task"], "21_Sigmoid");
  EXPECT_FALSE(rows[1].contains("error")) << rows[1].dump();
  EXPECT_GT(rows[1]["fp32_ms"].get<double>(), 0);
  EXPECT_FALSE(rows[1].value("resumed", false));
}

// torch.compile baselines need torch >= 2.0: on an older torch (Debian's
// 1.13, CI's) kloop baseline --compile measures nothing and says why.
TEST_F(BaselineCliTest, TorchCompileFailsClosedOnAnOldTorch) {
  // The python3 kloop finds (python3 on the PATH, then /usr/bin/python3, that imports torch).
  const kloop::test::ShellResult version = kloop::test::shell(
      "python3 -c 'import torch; print(torch.__version__)' 2>/dev/null || "
      "/usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>/dev/null");
  const std::string upstream = std::string(KLOOP_TEST_FIXTURES) + "/upstream";
  auto [mode_rc, mode_out] = run("baseline 19_ReLU --device cpu --dims small --compile turbo --upstream " + upstream);
  EXPECT_NE(mode_rc, 0) << mode_out;
  EXPECT_NE(mode_out.find("--compile: 'turbo' is not a mode kloop measures; use default or reduce-overhead"),
            std::string::npos)
      << mode_out;
  auto [no_up_rc, no_up_out] = run("baseline 19_ReLU --device cpu --dims small --compile default");
  EXPECT_NE(no_up_rc, 0) << no_up_out;
  EXPECT_NE(no_up_out.find("--compile needs --upstream"), std::string::npos) << no_up_out;
  if (version.code != 0 || version.output.empty() || version.output[0] >= '2') {
    GTEST_SKIP() << "python3's torch is '" << version.output << "', not 1.x";
  }
  const fs::path table = dir_ / "compile.json";
  auto [rc, out] = run("baseline 19_ReLU --device cpu --dims small --max-timing 0.02 --compile default,reduce-overhead "
                       "--upstream " + upstream + " --json " + table.string());
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("--compile: torch.compile needs torch >= 2.0; this torch is 1.13"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(table)) << "nothing was measured";
}

// KernelBench's bf16: the baseline and the audit of the reference in that
// precision, tables that say so, and an fp32 row that is not resumed as one.
TEST_F(BaselineCliTest, BaselineAndAuditRunInTheAskedPrecision) {
  const fs::path table = dir_ / "bf16.json", audit = dir_ / "audit-bf16.json", earlier = dir_ / "audit-fp32.json";
  auto [rc, out] = run("baseline 19_ReLU --device cpu --dims small --max-timing 0.02 --precision bf16 --json " +
                       table.string());
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("(strict timing rules, bf16)"), std::string::npos) << out;
  const json rows = json::parse(std::ifstream(table));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["precision"], "bf16");
  EXPECT_GT(rows[0]["fp32_ms"].get<double>(), 0);
  // An fp32 row of the same task, device and dims: audited again in bf16.
  std::ofstream(earlier) << json::array({{{"problem", "19_ReLU"},
                                          {"level", 1},
                                          {"max_abs_output", 0.5},
                                          {"flags", json::array({{{"check", "zeros_pass"}, {"reason", "planted"}}})},
                                          {"device", "cpu"},
                                          {"dims", "small"}}})
                                .dump();
  auto [arc, aout] = run("audit 19_ReLU --device cpu --dims small --precision bf16 --resume " + earlier.string() +
                         " --json " + audit.string());
  EXPECT_NE(aout.find("1 problems audited (cpu, small dims, strict tolerance at bf16; 0 resumed)"), std::string::npos)
      << aout;
  EXPECT_EQ(aout.find("planted"), std::string::npos) << aout;
  (void)arc;
  const json arows = json::parse(std::ifstream(audit));
  ASSERT_EQ(arows.size(), 1u);
  EXPECT_EQ(arows[0]["precision"], "bf16");
}

// In fp16 and bf16 the zero-mean case's conditioning flag is decided by a
// rule (every protocol's tolerance there is at least KernelBench's own, so
// a candidate that fails the case is beyond it from the reference too); in
// fp32 it still waits for the spec's decision.
TEST_F(BaselineCliTest, HalfPrecisionConditioningFlagsAreDecidedByRule) {
  for (const std::string precision : {"bf16", "fp32"}) {
    const fs::path earlier = dir_ / ("conditioning-" + precision + ".json");
    std::ofstream(earlier) << json::array({{{"problem", "24_LogSoftmax"},
                                            {"level", 1},
                                            {"max_abs_output", 8.9},
                                            {"flags", json::array({{{"check", "centered_ill_conditioned"},
                                                                    {"reason", "planted"}}})},
                                            {"device", "cpu"},
                                            {"dims", "small"},
                                            {"precision", precision}}})
                                  .dump();
    auto [rc, out] = run("audit 24_LogSoftmax --device cpu --dims small --precision " + precision + " --resume " +
                         earlier.string());
    (void)rc;
    ASSERT_NE(out.find("planted"), std::string::npos) << out;
    if (precision == "bf16") {
      EXPECT_NE(out.find("decision: accept at bf16 (rule)"), std::string::npos) << out;
      EXPECT_NE(out.find("1 flagged, 0 without a decision"), std::string::npos) << out;
    } else {
      EXPECT_NE(out.find("decision: none yet (centered_inputs: false in"), std::string::npos) << out;
      EXPECT_NE(out.find("1 flagged, 1 without a decision"), std::string::npos) << out;
    }
  }
}

TEST_F(BaselineCliTest, UnreadableResumeTableNamesTheFile) {
  const fs::path bad = dir_ / "bad.json";
  std::ofstream(bad) << "{\"task\": ";
  auto [rc, out] = run("baseline 19_ReLU --device cpu --dims small --resume " + bad.string());
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find(bad.string() + ": not a baseline table written by --json"), std::string::npos) << out;
}

// An audit at upstream sizes takes more than one device session: --json
// keeps each task's findings as they come, --resume skips the tasks done.
TEST_F(BaselineCliTest, AuditResumeKeepsEarlierFindings) {
  const fs::path earlier = dir_ / "audit-earlier.json", table = dir_ / "audit.json";
  // A planted finding for 19_ReLU (no real audit raises it); 21_Sigmoid's
  // row is of other dims and is audited again.
  std::ofstream(earlier) << json::array({{{"problem", "19_ReLU"},
                                          {"level", 1},
                                          {"max_abs_output", 0.5},
                                          {"flags", json::array({{{"check", "zeros_pass"}, {"reason", "planted"}}})},
                                          {"device", "cpu"},
                                          {"dims", "small"}},
                                         {{"problem", "21_Sigmoid"},
                                          {"level", 1},
                                          {"max_abs_output", 0.5},
                                          {"flags", json::array({{{"check", "zeros_pass"}, {"reason", "planted"}}})},
                                          {"device", "cuda"},
                                          {"dims", "full"}}})
                                .dump();
  auto [rc, out] = run("audit 19_ReLU 21_Sigmoid --device cpu --dims small --resume " + earlier.string() + " --json " +
                       table.string());
  EXPECT_NE(out.find("zeros_pass  (resumed)"), std::string::npos) << out;
  EXPECT_NE(out.find("planted"), std::string::npos) << out;
  EXPECT_NE(out.find("2 problems audited (cpu, small dims, strict tolerance; 1 resumed)"), std::string::npos) << out;
  (void)rc;  // the planted flag has no decision in the spec; the exit status says nothing here
  const json rows = json::parse(std::ifstream(table));
  ASSERT_EQ(rows.size(), 2u) << rows.dump(2);
  EXPECT_EQ(rows[0]["problem"], "19_ReLU");
  EXPECT_EQ(rows[0]["flags"][0]["reason"], "planted");
  EXPECT_EQ(rows[1]["problem"], "21_Sigmoid");
  EXPECT_TRUE(rows[1]["flags"].empty()) << rows[1].dump();  // audited again: nothing to flag
  EXPECT_EQ(rows[1]["dims"], "small");
}

// A zero-mean-case flag is settled by the spec's centered_inputs, not an
// audit entry: a row resumed from before the spec left the case out still
// carries the flag, and counts as decided once the spec says false.
TEST_F(BaselineCliTest, ResumedCenteredFlagIsDecidedByTheSpec) {
  const fs::path earlier = dir_ / "audit-earlier.json", table = dir_ / "audit.json";
  auto row = [](const std::string& problem) {
    return json{{"problem", problem},
                {"level", 1},
                {"max_abs_output", 0.5},
                {"flags", json::array({{{"check", "centered_ill_conditioned"}, {"reason", "planted"}}})},
                {"device", "cpu"},
                {"dims", "small"}};
  };
  // 98_KLDivLoss's spec says centered_inputs: false; 19_ReLU's does not.
  std::ofstream(earlier) << json::array({row("19_ReLU"), row("98_KLDivLoss")}).dump();
  auto [rc, out] = run("audit 19_ReLU 98_KLDivLoss --device cpu --dims small --resume " + earlier.string() +
                       " --json " + table.string());
  (void)rc;
  const auto relu = out.find("19_ReLU"), kl = out.find("98_KLDivLoss");
  ASSERT_NE(relu, std::string::npos) << out;
  ASSERT_NE(kl, std::string::npos) << out;
  EXPECT_NE(out.substr(relu, kl - relu).find("decision: none yet (centered_inputs: false in"), std::string::npos) << out;
  EXPECT_NE(out.substr(kl).find("decision: centered_inputs: false (strict leaves the zero-mean case out)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("2 flagged, 1 without a decision"), std::string::npos) << out;
}

}  // namespace
}  // namespace kloop
