// kloop run --slurm against a real Slurm cluster (scripts/start-slurm: one
// node, CPU only; .ci/run starts it): a run submitted as a job array of its
// shards reports the same as the run made locally; an array task killed
// mid-way and resubmitted with the same command loses and repeats nothing
// (one test: the local run it compares with is made once).
//
// Without a cluster (no sinfo answering) the tests skip, unless
// KLOOP_REQUIRE_SLURM=1 (CI), where they fail.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "agent/store/run_store.h"
#include "evaluator/build/content_hash.h"
#include "evaluator/isolation/subprocess.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

// The file's text; "" when it cannot be read.
std::string read_all(const fs::path& p) {
  try {
    return read_file(p.string());
  } catch (const std::runtime_error&) {
    return "";
  }
}

class SlurmRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const CommandResult info = run_command({"sinfo", "-h", "-o", "%T"}, "", 30s);
    const bool up = info.status.exited && info.status.code == 0 && !info.output.empty() &&
                    info.output.find("down") == std::string::npos;
    if (!up) {
      const char* require = std::getenv("KLOOP_REQUIRE_SLURM");
      if (require && std::string(require) == "1") {
        FAIL() << "KLOOP_REQUIRE_SLURM=1 but no Slurm cluster answers (sinfo: " << info.output
               << "); start one with scripts/start-slurm and export its SLURM_CONF";
      }
      GTEST_SKIP() << "no Slurm cluster here (scripts/start-slurm starts one as root)";
    }
    dir_ = fs::path("/tmp") / ("kloop-slurm-" + std::to_string(getpid()) + "-" +
                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "answers");
    // Jobs run as the submitting user, from any node: the folder is theirs.
    fs::permissions(dir_, fs::perms::all);

    // The model: the demo transcript, one file per (problem, turn), served
    // by a command provider that can be told to take its time.
    std::ifstream transcript(std::string(KLOOP_TEST_PROBLEMS) + "/../examples/transcripts/demo.jsonl");
    std::string line;
    while (std::getline(transcript, line)) {
      const json j = json::parse(line);
      std::ofstream(dir_ / "answers" / (j["problem"].get<std::string>() + ".turn" + std::to_string(j["turn"].get<int>())))
          << j["response"].get<std::string>();
    }
    std::ofstream(dir_ / "answer.sh") << "#!/bin/bash\n"
                                         "in=$(cat)\n"
                                         "problem=$(printf '%s\\n' \"$in\" | sed -n 's/^# Task: //p' | head -n 1)\n"
                                         "turn=$(( $(printf '%s\\n' \"$in\" | grep -c '^=== ASSISTANT ===$') + 1 ))\n"
                                         "sleep \"${KLOOP_TEST_ANSWER_DELAY:-0}\"\n"
                                         "cat \"" + (dir_ / "answers").string() + "/$problem.turn$turn\"\n";
    fs::permissions(dir_ / "answer.sh", fs::perms::owner_all | fs::perms::group_all | fs::perms::others_all);
    std::ofstream(dir_ / "exp.yaml") << "name: exp\nruns_dir: runs\n"
                                        "problems: {names: [19_ReLU, 23_Softmax, 33_BatchNorm]}\n"
                                        "device: cpu\nprotocol: strict\n"
                                        "provider: {kind: command, model: demo-answers, command: ['" +
                                            (dir_ / "answer.sh").string() + "']}\n"
                                        "scaffold: {kind: iterative, turns: 2}\n"
                                        "evaluation: {timeout_s: 60, max_timing_seconds: 0.05, threads: 1}\n";
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) fs::remove_all(dir_);
  }

  CommandResult kloop(std::vector<std::string> args, std::chrono::milliseconds timeout = 600s) {
    args.insert(args.begin(), KLOOP_TEST_BINARY);
    return run_command(args, dir_.string(), timeout);
  }

  // A run's attempts as the report has them: one CSV row per attempt, the
  // columns that do not depend on timing, sorted.
  std::vector<std::string> report_rows(const std::string& run) {
    const fs::path csv = dir_ / (run + ".csv");
    const CommandResult r = kloop({"report", (dir_ / "runs" / run).string(), "--bootstrap", "0", "--csv", csv.string()});
    EXPECT_EQ(r.status.code, 0) << r.output;
    std::vector<std::string> rows;
    std::istringstream lines(read_all(csv));
    std::string line;
    std::getline(lines, line);  // header
    while (std::getline(lines, line)) {
      std::vector<std::string> cells;
      std::istringstream c(line);
      std::string cell;
      while (std::getline(c, cell, ',')) cells.push_back(cell);
      // problem, level, sample, turn, verdict, failure_kind, compiled, correct
      if (cells.size() > 12) {
        rows.push_back(cells[5] + " " + cells[6] + " " + cells[7] + " " + cells[8] + " " + cells[9] + " " + cells[10] +
                       " " + cells[11] + " " + cells[12]);
      }
    }
    std::sort(rows.begin(), rows.end());
    return rows;
  }

  // Every record line of a run's files, as (problem, sample, turn) keys.
  std::multiset<std::string> record_lines(const std::string& run) {
    std::multiset<std::string> keys;
    for (const auto& e : fs::directory_iterator(dir_ / "runs" / run)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("results", 0) != 0) continue;
      std::istringstream lines(read_all(e.path()));
      std::string line;
      while (std::getline(lines, line)) {
        if (line.empty()) continue;
        try {
          const json j = json::parse(line);
          keys.insert(j["problem"].get<std::string>() + "/" + std::to_string(j["sample"].get<int>()) + "/" +
                      std::to_string(j["turn"].get<int>()));
        } catch (const json::exception&) {
          keys.insert("torn line in " + name);
        }
      }
    }
    return keys;
  }

  bool wait_until(const std::function<bool()>& done, std::chrono::seconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (done()) return true;
      std::this_thread::sleep_for(200ms);
    }
    return done();
  }

  fs::path dir_;
};

// One local run serves both comparisons: the array's and the resubmitted one's.
TEST_F(SlurmRunTest, AJobArrayReportsWhatTheLocalRunReportsAndAKilledTaskResubmittedLosesNothing) {
  const CommandResult local = kloop({"run", "exp.yaml", "--name", "local"});
  ASSERT_EQ(local.status.code, 0) << local.output;
  const auto rows = report_rows("local");
  ASSERT_EQ(rows.size(), 6u);

  // 1. The run as a job array of 3 shards, waited for.
  const CommandResult dry = kloop({"run", "exp.yaml", "--name", "sharded", "--slurm", "--shards", "3", "--dry-run"});
  ASSERT_EQ(dry.status.code, 0) << dry.output;
  const std::string script = read_all(dir_ / "runs/sharded/slurm/kloop.sbatch");
  EXPECT_NE(script.find("#SBATCH --array=0-2"), std::string::npos) << script;
  const CommandResult sharded = kloop({"run", "exp.yaml", "--name", "sharded", "--slurm", "--shards", "3", "--wait"});
  ASSERT_EQ(sharded.status.code, 0) << sharded.output;
  EXPECT_NE(sharded.output.find("every shard has finished"), std::string::npos) << sharded.output;
  for (int k = 0; k < 3; ++k) {
    EXPECT_TRUE(fs::exists(dir_ / "runs/sharded" / ("results.shard-" + std::to_string(k) + ".jsonl"))) << k;
    EXPECT_NE(read_all(dir_ / "runs/sharded/slurm" / ("shard-" + std::to_string(k) + ".log")).find("array task"),
              std::string::npos);
  }
  EXPECT_FALSE(fs::exists(dir_ / "runs/sharded/results.jsonl")) << "no driver of the whole run wrote";
  EXPECT_EQ(report_rows("sharded"), rows);
  EXPECT_EQ(record_lines("sharded").size(), 6u);
  const CommandResult again = kloop({"run", "exp.yaml", "--name", "sharded", "--slurm", "--shards", "3"});
  EXPECT_EQ(again.status.code, 0) << again.output;
  EXPECT_NE(again.output.find("nothing submitted"), std::string::npos) << again.output;

  // 2. Slow answers (the submission's environment travels with the job), so
  // that a shard is mid-way when its task is cancelled; then the same
  // command again.
  setenv("KLOOP_TEST_ANSWER_DELAY", "2", 1);
  const CommandResult sub = kloop({"run", "exp.yaml", "--name", "killed", "--slurm", "--shards", "3"});
  unsetenv("KLOOP_TEST_ANSWER_DELAY");
  ASSERT_EQ(sub.status.code, 0) << sub.output;
  const std::size_t at = sub.output.find("as job ");
  ASSERT_NE(at, std::string::npos) << sub.output;
  const std::string job = sub.output.substr(at + 7, sub.output.find_first_not_of("0123456789", at + 7) - at - 7);
  const fs::path shard1 = dir_ / "runs/killed/results.shard-1.jsonl";
  ASSERT_TRUE(wait_until([&] { return fs::exists(shard1) && !read_all(shard1).empty(); }, 300s))
      << "shard 1 made no attempt";
  const CommandResult cancel = run_command({"scancel", job + "_1"}, "", 60s);
  ASSERT_EQ(cancel.status.code, 0) << cancel.output;
  ASSERT_TRUE(wait_until(
      [&] {
        const CommandResult q = run_command({"squeue", "-h", "-j", job}, "", 60s);
        return q.status.exited && q.status.code == 0 && q.output.find_first_not_of(" \n") == std::string::npos;
      },
      600s))
      << "the job did not end";
  EXPECT_LT(record_lines("killed").size(), 6u) << "shard 1 finished before it was cancelled";
  const CommandResult resubmit = kloop({"run", "exp.yaml", "--name", "killed", "--slurm", "--shards", "3", "--wait"});
  ASSERT_EQ(resubmit.status.code, 0) << resubmit.output;
  EXPECT_NE(resubmit.output.find("shard(s) 1 of 3"), std::string::npos) << "only the killed shard: " << resubmit.output;
  const auto lines = record_lines("killed");
  EXPECT_EQ(lines.size(), 6u) << "nothing lost, nothing repeated";
  EXPECT_EQ(std::set<std::string>(lines.begin(), lines.end()).size(), lines.size()) << "a repeated attempt";
  EXPECT_EQ(report_rows("killed"), rows);
  EXPECT_NE(read_all(dir_ / "runs/killed/slurm/submissions.jsonl").find(job), std::string::npos);
}

}  // namespace
}  // namespace kloop
