// The search scaffolds end to end on CPU with a command provider that
// answers from the prompt (a fresh prompt gets a candidate that returns its
// input, a refinement or an evolve child the correct ReLU): the calls per
// problem are the budget, every attempt records its parents, and a run
// killed with SIGKILL mid-round resumes without redoing anything.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "agent/scaffold/run_config.h"
#include "evaluator/isolation/subprocess.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

class ScaffoldTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kloop-scaffold-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "answer.sh")
        << "#!/bin/bash\nin=$(cat)\nsleep \"${KLOOP_TEST_ANSWER_DELAY:-0}\"\n"
           "if printf '%s' \"$in\" | grep -q '=== ASSISTANT ===\\|The best candidates so far'; then\n"
           "printf '%s\\n' '```cpp' '#include <ATen/ops/empty_like.h>' '#include <kloop/kernel_api.h>' "
           "'struct ModelNew {' '  explicit ModelNew(const kloop::ModuleInit&) {}' "
           "'  at::Tensor forward(const at::Tensor& x) { at::Tensor y = at::empty_like(x); return y.copy_(x).clamp_min_(0); }' "
           "'};' 'KLOOP_REGISTER_CANDIDATE(ModelNew)' '```'\n"
           "else\n"
           "printf '%s\\n' '```cpp' '#include <kloop/kernel_api.h>' 'struct ModelNew {' "
           "'  explicit ModelNew(const kloop::ModuleInit&) {}' '  at::Tensor forward(const at::Tensor& x) { return x; }' "
           "'};' 'KLOOP_REGISTER_CANDIDATE(ModelNew)' '```'\n"
           "fi\n";
    fs::permissions(dir_ / "answer.sh", fs::perms::owner_all);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void config(const std::string& scaffold) {
    std::ofstream(dir_ / "s.yaml") << "name: s\nruns_dir: runs\nproblems: {names: [19_ReLU]}\ndevice: cpu\n"
                                      "provider: {kind: command, model: script, concurrency: 1, command: ['" +
                                          (dir_ / "answer.sh").string() + "']}\n"
                                      "scaffold: " + scaffold + "\n"
                                      "evaluation: {timeout_s: 30, max_timing_seconds: 0.02, threads: 1}\n";
  }
  CommandResult kloop_run() {
    return run_command({KLOOP_TEST_BINARY, "run", "s.yaml"}, dir_.string(), 600s);
  }
  // Every record line, in file order.
  std::vector<json> lines() {
    std::vector<json> out;
    std::ifstream in(dir_ / "runs/s/results.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty()) out.push_back(json::parse(line));
    }
    return out;
  }
  static std::string key(const json& r) {
    return std::to_string(r["sample"].get<int>()) + "/" + std::to_string(r["turn"].get<int>());
  }
  fs::path dir_;
};

TEST_F(ScaffoldTest, ABeamMakesItsBudgetOfCallsAndRecordsEachAttemptsParent) {
  config("{kind: beam, width: 2, expand: 2, depth: 2}");
  const CommandResult r = kloop_run();
  ASSERT_EQ(r.status.code, 0) << r.output;
  const auto recs = lines();
  ASSERT_EQ(recs.size(), 8u) << "width 2 x expand 2 x depth 2 calls";
  std::map<std::string, json> by_key;
  for (const auto& x : recs) by_key[key(x)] = x;
  for (int s = 0; s < 4; ++s) {
    const json& first = by_key.at(std::to_string(s) + "/1");
    EXPECT_EQ(first["step"], "fresh");
    EXPECT_FALSE(first.contains("parents"));
    EXPECT_EQ(first["verdict"], "integrity_violation");
    const json& second = by_key.at(std::to_string(s) + "/2");
    EXPECT_EQ(second["step"], "refine");
    // Round 1 tied: the beam is its first two attempts, two refinements each.
    EXPECT_EQ(second["parents"], json::array({json::array({s / 2, 1})})) << second.dump();
    EXPECT_EQ(second["verdict"], "correct");
  }
  // The refinement saw its parent's answer and feedback.
  const json prompt = json::parse(std::ifstream(dir_ / "runs/s/attempts/19_ReLU/sample3/turn2/prompt.json"));
  ASSERT_EQ(prompt["messages"].size(), 3u);
  EXPECT_NE(prompt["messages"][2]["content"].get<std::string>().find("output_aliases_input"), std::string::npos);
  const CommandResult report =
      run_command({KLOOP_TEST_BINARY, "report", "runs/s", "--bootstrap", "0"}, dir_.string(), 120s);
  EXPECT_NE(report.output.find("beam, width 2 x expand 2, depth 2 (8 calls per problem)"), std::string::npos)
      << report.output;
  EXPECT_EQ(report.output.find("pass@k"), std::string::npos) << "a beam's slots are not independent samples";
}

TEST_F(ScaffoldTest, EvolveMakesItsBudgetAndAKilledRunResumesWithoutRedoingAnything) {
  config("{kind: evolve, population: 3, generations: 2, parents: 2}");
  // Slow answers, and a SIGKILL as soon as the second generation has its
  // first record.
  const std::string script =
      "KLOOP_TEST_ANSWER_DELAY=1 '" + std::string(KLOOP_TEST_BINARY) +
      "' run s.yaml > kill.log 2>&1 & pid=$!; "
      "for i in $(seq 3000); do grep -q '\"turn\":2' runs/s/results.jsonl 2>/dev/null && break; sleep 0.1; done; "
      "kill -9 $pid; wait $pid; exit 0";
  const CommandResult killed = run_command({"bash", "-c", script}, dir_.string(), 600s);
  ASSERT_EQ(killed.status.code, 0) << killed.output;
  const auto before = lines();
  ASSERT_GE(before.size(), 4u);
  ASSERT_LT(before.size(), 6u) << "the run finished before it was killed";

  const CommandResult resumed = kloop_run();
  ASSERT_EQ(resumed.status.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find(std::to_string(6 - before.size()) + " attempt(s) run now, " +
                                std::to_string(before.size()) + " resumed"),
            std::string::npos)
      << resumed.output;
  const auto after = lines();
  ASSERT_EQ(after.size(), 6u) << "population 3 x 2 generations";
  std::set<std::string> keys;
  for (const auto& x : after) EXPECT_TRUE(keys.insert(key(x)).second) << "made twice: " << key(x);
  for (std::size_t i = 0; i < before.size(); ++i) EXPECT_EQ(after[i], before[i]) << "a stored record changed";
  for (const auto& x : after) {
    if (x["turn"] != 2) continue;
    EXPECT_EQ(x["step"], "crossover");
    // Generation 1 tied: parents rotate over its attempts.
    const int s = x["sample"];
    EXPECT_EQ(x["parents"], json::array({json::array({s, 1}), json::array({(s + 1) % 3, 1})})) << x.dump();
    EXPECT_EQ(x["verdict"], "correct");
  }
}

TEST_F(ScaffoldTest, SearchFieldsAreCheckedPerScaffold) {
  auto error = [&](const std::string& scaffold, const std::string& field) {
    config(scaffold);
    try {
      load_run_config((dir_ / "s.yaml").string());
      ADD_FAILURE() << "accepted " << scaffold;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("'" + field + "'"), std::string::npos) << e.what();
    }
  };
  error("{kind: iterative, width: 2}", "scaffold.width");
  error("{kind: beam, population: 2}", "scaffold.population");
  error("{kind: beam, turns: 3}", "scaffold.turns");
  error("{kind: beam, width: 0}", "scaffold.width");
  error("{kind: evolve, select: fastest}", "scaffold.select");
  error("{kind: evolve, crossover: false, parents: 3}", "scaffold.parents");
  error("{kind: tree}", "scaffold.kind");
  config("{kind: beam, width: 3, expand: 2, depth: 4}");
  const RunConfig c = load_run_config((dir_ / "s.yaml").string());
  EXPECT_EQ(c.scaffold.samples, 6);
  EXPECT_EQ(c.scaffold.turns, 4);
}

}  // namespace
}  // namespace kloop
