// Sweeps: a config's matrix expanded into named runs, run one after another
// by `kloop run`, and reported side by side by `kloop report` of the
// sweep's folder; with the replay and command providers, on CPU.
#include "agent/scaffold/sweep.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "evaluator/build/content_hash.h"
#include "evaluator/isolation/subprocess.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class SweepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kloop-sweep-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& yaml) {
    const fs::path p = dir_ / "sweep.yaml";
    std::ofstream(p) << yaml;
    return p;
  }
  void expect_error(const std::string& yaml, const std::string& field, const std::string& words) {
    try {
      load_run_configs(write(yaml).string());
      ADD_FAILURE() << "accepted:\n" << yaml;
    } catch (const std::invalid_argument& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("sweep.yaml"), std::string::npos) << m;
      EXPECT_NE(m.find("'" + field + "'"), std::string::npos) << m;
      EXPECT_NE(m.find(words), std::string::npos) << m;
    }
  }
  fs::path dir_;
};

const char* kBase =
    "name: abl\nruns_dir: runs\nproblems: {names: [19_ReLU]}\ndevice: cpu\n"
    "provider: {kind: replay, model: demo, transcript: t.jsonl}\nscaffold: {kind: iterative, turns: 2}\n";

TEST_F(SweepTest, AMatrixExpandsIntoOneNamedRunPerPoint) {
  const auto runs = load_run_configs(write(std::string(kBase) +
                                           "sweep:\n"
                                           "  scaffold.feedback: [[], [compiler, correctness]]\n"
                                           "  protocol: [strict, verified, kernelbench]\n")
                                         .string());
  ASSERT_EQ(runs.size(), 6u);
  // Keys in alphabetical order, the last one fastest.
  EXPECT_EQ(runs[0].point, "protocol=strict/feedback=none");
  EXPECT_EQ(runs[1].point, "protocol=strict/feedback=compiler+correctness");
  EXPECT_EQ(runs[5].point, "protocol=kernelbench/feedback=compiler+correctness");
  EXPECT_EQ(runs[0].config.name, "abl/protocol=strict/feedback=none");
  EXPECT_TRUE(runs[0].config.scaffold.feedback.empty());
  EXPECT_EQ(runs[1].config.scaffold.feedback.size(), 2u);
  EXPECT_EQ(runs[2].config.protocol, "verified");
  EXPECT_EQ(runs[3].config.scaffold.turns, 2) << "the rest of the config is the base's";
  EXPECT_EQ(runs[3].config.runs_dir, (dir_ / "runs").string());

  // Whole blocks, labelled by `label`, model or kind.
  const auto blocks = load_run_configs(write(std::string(kBase) +
                                             "sweep:\n"
                                             "  scaffold: [{kind: one_shot}, {kind: iterative, turns: 4, label: it4}]\n"
                                             "  provider: [{kind: replay, model: a, transcript: t.jsonl}, "
                                             "{kind: command, model: b/c, command: [cat]}]\n")
                                           .string());
  ASSERT_EQ(blocks.size(), 4u);
  EXPECT_EQ(blocks[0].point, "provider=a/scaffold=one_shot");
  EXPECT_EQ(blocks[3].point, "provider=b_c/scaffold=it4") << "a label is one folder name";
  EXPECT_EQ(blocks[3].config.scaffold.turns, 4);
  EXPECT_EQ(blocks[3].config.provider.kind, "command");

  // A config without a sweep is one run, named as before.
  const auto plain = load_run_configs(write(kBase).string());
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].point, "");
  EXPECT_EQ(plain[0].config.name, "abl");
}

TEST_F(SweepTest, BadSweepsNameTheFieldAndThePoint) {
  const std::string base = kBase;
  expect_error(base + "sweep: [a, b]\n", "sweep", "expected a map");
  expect_error(base + "sweep: {protocol: strict}\n", "sweep.protocol", "expected a list");
  expect_error(base + "sweep: {protocol: []}\n", "sweep.protocol", "expected a list");
  expect_error(base + "sweep: {name: [a, b]}\n", "sweep.name", "cannot vary");
  expect_error(base + "sweep: {scaffold: [{kind: one_shot, label: x}, {kind: best_of_k, label: x}]}\n", "sweep.scaffold",
               "distinct");
  expect_error(base + "sweep: {protocol: [strict, sloppy]}\n", "protocol", "sweep point protocol=sloppy");
  expect_error(base + "sweep: {scaffold.turnz: [1, 2]}\n", "scaffold.turnz", "unknown field");
  // Attack (issue 48): names are data. A sweep named ../.. once wrote its
  // sweep.json outside runs_dir; a key with a blank names runs that are
  // #SBATCH syntax.
  std::string escaping = base;
  escaping.replace(escaping.find("name: abl"), 9, "name: ../..");
  expect_error(escaping + "sweep: {protocol: [strict, verified]}\n", "name", "cannot name a sweep");
  EXPECT_FALSE(fs::exists(dir_.parent_path().parent_path() / "sweep.json"));
  expect_error(base + "sweep: {\"scaffold.turns --hold\": [1, 2]}\n", "name", "holds a space");
  expect_error(std::string(kBase).replace(0, 9, "name: \"a b\"") , "name", "cannot name a run");
  // One run's loader refuses a sweep rather than running one point of it.
  try {
    load_run_config(write(base + "sweep: {protocol: [strict, verified]}\n").string());
    ADD_FAILURE() << "a sweep loaded as one run";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'sweep'"), std::string::npos) << e.what();
  }
}

TEST_F(SweepTest, TheShippedComparisonsExpand) {
  // On a machine without CUDA the shipped configs' device is swapped for cpu.
  auto load = [&](const std::string& name) {
    std::string text = read_file((fs::path(KLOOP_TEST_PROBLEMS) / "../configs" / name).string());
    text = std::regex_replace(text, std::regex("\ndevice: cuda\n"), "\ndevice: cpu\n");
    fs::create_directories(dir_ / "configs");
    const fs::path p = dir_ / "configs" / name;
    std::ofstream(p) << text;
    return load_run_configs(p.string());
  };
  const auto ablation = load("feedback-ablation.yaml");
  ASSERT_EQ(ablation.size(), 3u);
  EXPECT_EQ(ablation[0].point, "feedback=none");
  EXPECT_TRUE(ablation[0].config.scaffold.feedback.empty());
  EXPECT_EQ(ablation[1].config.scaffold.feedback.size(), 3u);
  EXPECT_EQ(ablation[2].config.scaffold.feedback.size(), 4u);
  const auto scaffolds = load("one-shot-vs-iterative.yaml");
  ASSERT_EQ(scaffolds.size(), 3u);
  EXPECT_EQ(scaffolds[0].config.scaffold.kind, "one_shot");
  EXPECT_EQ(scaffolds[1].point, "scaffold=best_of_5");
  EXPECT_EQ(scaffolds[1].config.scaffold.samples, 5);
  EXPECT_EQ(scaffolds[2].config.scaffold.turns, 5);
  // Equal budgets: 16 calls per problem for each scaffold.
  const auto searches = load("search-equal-budget.yaml");
  ASSERT_EQ(searches.size(), 3u);
  for (const auto& r : searches) {
    EXPECT_EQ(r.config.scaffold.samples * r.config.scaffold.turns, 16) << r.point;
  }
  EXPECT_EQ(searches[1].config.scaffold.kind, "beam");
  EXPECT_EQ(searches[2].config.scaffold.kind, "evolve");
}

// The replay provider and a command provider as the two points of one
// sweep: both run, a rerun resumes both, and the sweep's folder reports
// them side by side.
// One form for every settings error, whoever reads the field (the run
// config, the provider block, the sweep, a provider when kloop run makes
// it): FILE: field 'PATH': what is wrong and what to do.
TEST_F(SweepTest, SettingsErrorsOfEveryReaderReadAlike) {
  const std::regex form(R"(^\S*sweep\.yaml: field '[a-z_.]+': \S.*)");
  const std::string base = kBase;
  for (const std::string& yaml :
       {base + "seed: 1.5\n", base + "scaffold: {kind: iterative, turns: [2]}\n", base + "evaluation: {timeout: 3}\n",
        std::string(kBase).replace(std::string(kBase).find("transcript: t.jsonl"), 19, "transcript: t.jsonl, temprature: 1"),
        std::string(kBase).replace(std::string(kBase).find("transcript: t.jsonl"), 19, "transcript: t.jsonl, retry: {tries: 2}"),
        base + "sweep: {protocol: strict}\n"}) {
    try {
      load_run_configs(write(yaml).string());
      ADD_FAILURE() << "accepted:\n" << yaml;
    } catch (const std::invalid_argument& e) {
      EXPECT_TRUE(std::regex_match(std::string(e.what()), form)) << e.what();
    }
  }
  // A provider's own check, when kloop run makes it, names the file too.
  write("name: k\nruns_dir: runs\nproblems: {names: [19_ReLU]}\ndevice: cpu\n"
        "provider: {kind: openai, model: m, api_key_env: KLOOP_TEST_SURELY_UNSET_KEY}\n");
  const CommandResult run = run_command({KLOOP_TEST_BINARY, "run", "sweep.yaml"}, dir_.string(), 60s);
  EXPECT_NE(run.status.code, 0);
  EXPECT_NE(run.output.find("sweep.yaml: field 'provider.api_key_env': environment variable KLOOP_TEST_SURELY_UNSET_KEY "
                            "is not set"),
            std::string::npos)
      << run.output;
}

TEST_F(SweepTest, KloopRunRunsEveryPointAndReportShowsThemSideBySide) {
  const std::string good = "```cpp\n#include <ATen/ops/empty_like.h>\n#include <kloop/kernel_api.h>\n"
                           "struct ModelNew {\n  explicit ModelNew(const kloop::ModuleInit&) {}\n"
                           "  at::Tensor forward(const at::Tensor& x) { at::Tensor y = at::empty_like(x); "
                           "return y.copy_(x).clamp_min_(0); }\n};\nKLOOP_REGISTER_CANDIDATE(ModelNew)\n```\n";
  std::ofstream(dir_ / "good.txt") << good;
  std::ofstream(dir_ / "t.jsonl") << nlohmann::json{{"problem", "19_ReLU"}, {"sample", 0}, {"turn", 1},
                                                    {"response", "No code today."}}
                                         .dump()
                                  << "\n";
  write("name: pair\nruns_dir: runs\nproblems: {names: [19_ReLU]}\ndevice: cpu\n"
        "provider: {kind: replay, model: r, transcript: t.jsonl}\nscaffold: {kind: one_shot}\n"
        "evaluation: {timeout_s: 30, max_timing_seconds: 0.05, threads: 1}\n"
        "sweep:\n  provider:\n    - {kind: replay, model: replayed, transcript: t.jsonl}\n"
        "    - {kind: command, model: scripted, command: [cat, " +
        (dir_ / "good.txt").string() + "]}\n");
  auto kloop = [&](std::vector<std::string> args) {
    args.insert(args.begin(), KLOOP_TEST_BINARY);
    return run_command(args, dir_.string(), 300s);
  };
  const CommandResult run = kloop({"run", "sweep.yaml"});
  ASSERT_EQ(run.status.code, 0) << run.output;
  EXPECT_NE(run.output.find("sweep of 2 run(s)"), std::string::npos) << run.output;
  EXPECT_TRUE(fs::exists(dir_ / "runs/pair/sweep.json"));
  const std::string replayed = read_file((dir_ / "runs/pair/provider=replayed/results.jsonl").string());
  const std::string scripted = read_file((dir_ / "runs/pair/provider=scripted/results.jsonl").string());
  EXPECT_NE(replayed.find("\"no_code\""), std::string::npos) << replayed;
  EXPECT_NE(scripted.find("\"correct\""), std::string::npos) << scripted;
  EXPECT_NE(scripted.find("\"run\":\"pair/provider=scripted\""), std::string::npos) << scripted;

  const CommandResult again = kloop({"run", "sweep.yaml"});
  ASSERT_EQ(again.status.code, 0) << again.output;
  EXPECT_EQ(again.output.find("1 attempt(s) run now"), std::string::npos) << "a rerun resumes: " << again.output;

  const CommandResult report = kloop({"report", (dir_ / "runs/pair").string(), "--bootstrap", "0", "--format", "markdown"});
  ASSERT_EQ(report.status.code, 0) << report.output;
  EXPECT_NE(report.output.find("side by side"), std::string::npos) << report.output;
  EXPECT_NE(report.output.find("pair/provider=replayed [strict]"), std::string::npos) << report.output;
  EXPECT_NE(report.output.find("pair/provider=scripted [strict]"), std::string::npos) << report.output;
  // The replayed point made nothing correct, the scripted one did.
  EXPECT_TRUE(std::regex_search(report.output, std::regex(R"(replayed \[strict\] \| replay:replayed \|[^\n]*\| 0\.0% \|)")))
      << report.output;
  EXPECT_TRUE(std::regex_search(report.output, std::regex(R"(scripted \[strict\] \| command:scripted \|[^\n]*\| 100\.0% \|)")))
      << report.output;
}

}  // namespace
}  // namespace kloop
