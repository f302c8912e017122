// kloop mutate over the CPU mutation set (tests/fixtures/mutate/cpu.yaml):
// every mutant built and judged by the real evaluator under kernelbench,
// verified and strict, the fp64 oracle on the survivors, and the kill rates
// held to tests/fixtures/mutate/floors.json. A change to the judge that
// lets more mutants through fails here.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/support/python_support.h"
#include "tests/support/shell.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class MutateCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kloop-mutate-" + std::to_string(getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(MutateCliTest, CpuSetMeetsTheFloors) {
  KLOOP_NEED_PYTHON_CANDIDATES();
  const std::string fixtures = std::string(KLOOP_TEST_FIXTURES) + "/mutate";
  const auto r = test::shell(std::string(KLOOP_TEST_BINARY) + " mutate --seeds " + fixtures +
                             "/cpu.yaml --max-sites 1 --jobs 2 --threads 1 --out " + dir_.string() + " --floors " +
                             fixtures + "/floors.json 2>&1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("every floor of"), std::string::npos) << r.output;

  const json report = json::parse(std::ifstream(dir_ / "report.json"));
  std::stringstream md;
  md << std::ifstream(dir_ / "report.md").rdbuf();
  ASSERT_EQ(report["generated"].get<int>(), 21) << report.dump(1);
  // The oracle found the mutants that change nothing (TF32 has no effect on
  // the CPU; torch.empty for an output every batch overwrites).
  EXPECT_GE(report["equivalent"].get<int>(), 2) << md.str();
  // KernelBench's own check, the anchor, lets mutants through that strict kills.
  const auto& rates = report["kill_rates"];
  EXPECT_LT(rates["kernelbench"]["all"]["rate"].get<double>(), rates["strict"]["all"]["rate"].get<double>()) << md.str();
  // Every survivor is listed with its diff and verdicts.
  int survivors = 0;
  for (const auto& m : report["mutants"]) {
    if (m["stillborn"].get<bool>() || m["equivalence"] == "equivalent") continue;
    bool survived = false;
    for (const auto& [p, v] : m["verdicts"].items()) survived = survived || v["verdict"] == "correct";
    if (!survived) continue;
    ++survivors;
    EXPECT_NE(md.str().find("### " + m["id"].get<std::string>()), std::string::npos) << m.dump(1);
    EXPECT_TRUE(fs::exists(m["file"].get<std::string>())) << m.dump(1);
  }
  EXPECT_GT(survivors, 0) << "kernelbench kills everything: the set no longer measures the gap";
  EXPECT_NE(md.str().find("```diff\n@@ line "), std::string::npos) << md.str();
}

TEST_F(MutateCliTest, ASeedThatIsNotCorrectIsRefusedByName) {
  // A mutant of a seed cannot measure anything when the seed itself fails.
  fs::create_directories(dir_);
  std::ofstream(dir_ / "set.yaml") << "seeds:\n  - {problem: 19_ReLU, candidate: wrong.cpp}\n";
  fs::copy_file(std::string(KLOOP_TEST_FIXTURES) + "/relu/slightly_off.cpp", dir_ / "wrong.cpp");
  const auto r = test::shell(std::string(KLOOP_TEST_BINARY) + " mutate --seeds " + (dir_ / "set.yaml").string() +
                             " --protocol kernelbench,strict --max-sites 1 --out " + (dir_ / "out").string() + " 2>&1");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("wrong.cpp (19_ReLU) is not correct under"), std::string::npos) << r.output;
}

TEST_F(MutateCliTest, ABadSetFileNamesTheEntryAndField) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "set.yaml") << "seeds:\n  - {problem: 19_ReLU, candidate: missing.cpp}\n";
  const auto r = test::shell(std::string(KLOOP_TEST_BINARY) + " mutate --seeds " + (dir_ / "set.yaml").string() +
                             " --out " + (dir_ / "out").string() + " 2>&1");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("set.yaml: seeds[0].candidate: no file"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kloop
