// Chaos: runs against a provider that bills (fake_billing_provider.h:
// Anthropic's streamed Messages API with rate limits, overloads, 500s and
// streams that break after HTTP 200), killed 20 times with SIGKILL and
// SIGINT at stages picked at random (KLOOP_TEST_STOP_AT: the stage's own
// hook, never a moment of the clock), then finished. Three runs: one with
// concurrency, a sweep, and a run in shards (as Slurm array tasks when a
// Slurm cluster answers, else the shards' drivers side by side).
//
// It asserts: every billed call is in kloop's ledger once, or was in flight
// when its driver was killed (each such request is in the journal); billed
// calls = distinct attempts + the transport faults the ledger explains +
// those in flight; no attempt lost or duplicated; the report's bill = the
// provider's bill for the calls kloop saw; no transport fault evaluated or
// counted as the model's outcome (every stored answer is whole).
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "agent/scaffold/stage_journal.h"
#include "evaluator/build/content_hash.h"
#include "evaluator/isolation/subprocess.h"
#include "tests/support/fake_billing_provider.h"
#include "tests/support/relu_answers.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using test_support::kIdentityAnswer;
using test_support::kReluAnswer;


// What the model answers, the same for every resend of a request.
std::string answer(const std::string& problem, int turn) {
  const std::size_t h = std::hash<std::string>{}(problem + "/" + std::to_string(turn)) % 6;
  if (h == 0) return kReluAnswer;
  if (h == 1) return kIdentityAnswer;
  return "I would fuse the work of " + problem + " into one pass (turn " + std::to_string(turn) + "), but no code yet.";
}

struct Target {
  std::string config;              // the config file
  std::vector<std::string> runs;   // its run folders under runs/
  std::vector<std::string> problems;
  int samples = 1, turns = 1;
  bool sharded = false;
};

class ChaosTest : public ::testing::Test {
 protected:
  ChaosTest() : provider_(kSeed, answer, 3.0, 15.0) {}
  void SetUp() override {
    dir_ = fs::path("/tmp") / ("kloop-chaos-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::permissions(dir_, fs::perms::all);  // Slurm's jobs run as the submitting user
    const CommandResult info = run_command({"sinfo", "-h", "-o", "%T"}, "", 30s);
    slurm_ = info.status.exited && info.status.code == 0 && !info.output.empty() &&
             info.output.find("down") == std::string::npos;
    const char* require = std::getenv("KLOOP_REQUIRE_SLURM");
    if (!slurm_ && require && std::string(require) == "1") FAIL() << "KLOOP_REQUIRE_SLURM=1 but no Slurm cluster answers";
    const std::string provider = "provider: {kind: anthropic, model: claude-test, base_url: " + provider_.base_url() +
                                 ", api_key_env: KLOOP_CHAOS_KEY, max_tokens: 1000, concurrency: 3, "
                                 "idle_timeout_s: 1, first_token_timeout_s: 20, prices: {input: 3, output: 15}, "
                                 "retry: {max_attempts: 30, base_delay_s: 0.01, max_delay_s: 0.02, "
                                 "resend_broken_streams: 30}}\n"
                                 "evaluation: {timeout_s: 60, max_timing_seconds: 0.02, threads: 1}\n"
                                 "device: cpu\nruns_dir: runs\n";
    provider_block_ = provider;
    write_a(3);
    std::ofstream(dir_ / "b.yaml") << "name: b\nproblems: {names: [19_ReLU, 21_Sigmoid]}\n"
                                      "scaffold: {kind: best_of_k, samples: 2}\nsweep: {seed: [1, 2]}\n" << provider;
    std::ofstream(dir_ / "c.yaml") << "name: c\nproblems: {names: [19_ReLU, 20_LeakyReLU]}\n"
                                      "scaffold: {kind: iterative, turns: 3}\n" << provider;
    targets_ = {{"a.yaml", {"a"}, {"19_ReLU", "20_LeakyReLU", "21_Sigmoid"}, 2, 3, false},
                {"b.yaml", {"b/seed=1", "b/seed=2"}, {"19_ReLU", "21_Sigmoid"}, 2, 1, false},
                {"c.yaml", {"c"}, {"19_ReLU", "20_LeakyReLU"}, 1, 3, true}};
  }
  // The run with concurrency, `turns` long (more turns extend it).
  void write_a(int turns) {
    std::ofstream(dir_ / "a.yaml") << "name: a\nproblems: {names: [19_ReLU, 20_LeakyReLU, 21_Sigmoid]}\n"
                                      "parallel_chains: 3\nscaffold: {kind: iterative, samples: 2, turns: "
                                   << turns << "}\n" << provider_block_;
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  // One invocation of `kloop run` for the target, with a stop point or
  // none; returns how many drivers the stop point stopped.
  int run(const Target& t, const std::string& stop_at) {
    const std::string env = "KLOOP_CHAOS_KEY=chaos-key-0000" + (stop_at.empty() ? "" : " KLOOP_TEST_STOP_AT=" + stop_at);
    const std::string kloop = "'" + std::string(KLOOP_TEST_BINARY) + "' run " + t.config + " --no-provider-check";
    if (!t.sharded) return stops(command(env + " " + kloop));
    if (slurm_) {
      const int before = stops(slurm_logs());
      command(env + " " + kloop + " --slurm --shards 2 --wait");
      return stops(slurm_logs()) - before;
    }
    // The shards' drivers side by side, as two array tasks would run them.
    const std::string both = env + " " + kloop + " --shards 2 --shard 0 & " + env + " " + kloop +
                             " --shards 2 --shard 1; wait";
    return stops(command(both));
  }
  std::string command(const std::string& script) {
    const CommandResult r = run_command({"bash", "-c", script + " 2>&1; true"}, dir_.string(), 600s);
    log_ += r.output;
    return r.output;
  }
  std::string slurm_logs() {
    std::string all;
    for (int k = 0; k < 2; ++k) {
      std::ifstream in(dir_ / "runs/c/slurm" / ("shard-" + std::to_string(k) + ".log"));
      all += std::string(std::istreambuf_iterator<char>(in), {});
    }
    return all;
  }
  static int stops(const std::string& output) {
    int n = 0;
    for (std::size_t at = output.find("test stop point"); at != std::string::npos; at = output.find("test stop point", at + 1)) ++n;
    return n;
  }
  // Whether a target's runs have every record.
  bool finished(const Target& t) {
    for (const auto& run : t.runs) {
      if (keys(run).size() != t.problems.size() * static_cast<std::size_t>(t.samples * t.turns)) return false;
    }
    return true;
  }
  // Every record line of a run's files, as "problem/sample/turn", repeats kept.
  std::multiset<std::string> keys(const std::string& run) {
    std::multiset<std::string> out;
    if (!fs::exists(dir_ / "runs" / run)) return out;
    for (const auto& e : fs::directory_iterator(dir_ / "runs" / run)) {
      if (e.path().filename().string().rfind("results", 0) != 0) continue;
      std::ifstream in(e.path());
      std::string line;
      while (std::getline(in, line)) {
        const json j = json::parse(line, nullptr, false);
        if (j.is_object()) out.insert(j["problem"].get<std::string>() + "/" + std::to_string(j["sample"].get<int>()) + "/" +
                                      std::to_string(j["turn"].get<int>()));
      }
    }
    return out;
  }

  static constexpr std::uint64_t kSeed = 20240611;
  test_support::FakeBillingProvider provider_;
  fs::path dir_;
  bool slurm_ = false;
  std::vector<Target> targets_;
  std::string provider_block_;
  std::string log_;
};

TEST_F(ChaosTest, TwentyKillsLoseNothingRepeatNothingAndBillEveryCallOnce) {
  // 1. Twenty stops at stages picked at random, with SIGKILL or SIGINT.
  std::mt19937 rng(kSeed);
  const std::vector<std::string> events = {"planned", "requested", "call", "answered", "extracted", "built", "judged",
                                           "recorded"};
  std::map<std::string, int> stopped_at;
  int kills = 0;
  for (int tries = 0; kills < 20 && tries < 80; ++tries) {
    std::vector<const Target*> open;
    for (const auto& t : targets_) {
      if (!finished(t)) open.push_back(&t);
    }
    if (open.empty()) {  // all done before twenty stops: the run with concurrency gets a turn more
      write_a(++targets_[0].turns);
      open.push_back(&targets_[0]);
    }
    const Target& t = *open[rng() % open.size()];
    const std::string event = events[rng() % events.size()];
    const std::string signal = rng() % 3 == 0 ? "INT" : "KILL";
    const int n = run(t, event + ":" + std::to_string(1 + rng() % 2) + ":" + signal);
    kills += n;
    stopped_at[event + " " + signal] += n;
  }
  // 2. Then finished.
  for (const auto& t : targets_) {
    for (int i = 0; i < 4 && !finished(t); ++i) run(t, "");
    ASSERT_TRUE(finished(t)) << t.config << " did not finish:\n" << log_.substr(log_.size() > 6000 ? log_.size() - 6000 : 0);
  }
  for (int i = 0; i < 200 && !provider_.settled(); ++i) std::this_thread::sleep_for(50ms);  // stalled responses close

  // 3. No attempt lost or duplicated.
  int attempts = 0;
  for (const auto& t : targets_) {
    for (const auto& run : t.runs) {
      const std::multiset<std::string> k = keys(run);
      EXPECT_EQ(std::set<std::string>(k.begin(), k.end()).size(), k.size()) << run << ": an attempt recorded twice";
      attempts += static_cast<int>(k.size());
    }
  }

  // 4. Every billed call once in the ledger, or in flight at a kill.
  std::map<std::string, test_support::FakeBillingProvider::Bill> billed;
  double bill = 0;
  for (const auto& b : provider_.bills()) {
    if (!b.billed) continue;
    billed[b.request_id] = b;
    bill += b.cost_usd;
  }
  std::set<std::string> seen;
  int answered = 0, faults = 0, in_flight = 0;
  double report_bill = 0, ledger_bill = 0;
  for (const auto& t : targets_) {
    for (const auto& run : t.runs) {
      RunStore store((dir_ / "runs").string(), run);
      const StageJournal journal(store);
      const CallLedger ledger = journal.ledger();
      faults += ledger.transport_faults;
      in_flight += ledger.in_flight_at_stop;
      for (const auto& problem : t.problems) {
        for (int s = 0; s < t.samples; ++s) {
          for (int turn = 1; turn <= t.turns; ++turn) {
            const StoredAttempt a = journal.stored({problem, s, turn});
            for (const json& call : a.calls) {
              const std::string id = call.value("request_id", "");
              if (id.empty()) continue;  // no response: nothing billed
              EXPECT_TRUE(seen.insert(id).second) << id << " recorded twice";
              ASSERT_TRUE(billed.count(id) || !call.value("billed", false)) << id << " is not a call the provider billed";
              if (!billed.count(id)) continue;
              EXPECT_NEAR(call.value("cost_usd", 0.0), billed[id].cost_usd, 1e-12) << id << " " << call;
              ledger_bill += call.value("cost_usd", 0.0);
              answered += call.contains("transport_fault") ? 0 : 1;
            }
            // Never a partial answer: the stored answer is the whole one.
            const fs::path dir = dir_ / "runs" / run / "attempts" / problem / ("sample" + std::to_string(s)) /
                                 ("turn" + std::to_string(turn));
            EXPECT_EQ(read_file((dir / "response.txt").string()), answer(problem, turn)) << dir;
          }
        }
      }
      const fs::path report = dir_ / ("report-" + std::to_string(seen.size()) + ".json");
      const CommandResult r = run_command({KLOOP_TEST_BINARY, "report", (dir_ / "runs" / run).string(), "--bootstrap",
                                           "0", "--json", report.string()}, dir_.string(), 120s);
      ASSERT_EQ(r.status.code, 0) << r.output;
      const json j = json::parse(read_file(report.string()));
      const json& cost = j["views"][0]["cost"];
      report_bill += cost["provider_bill"]["cost_usd"].get<double>();
      for (const auto& item : j["views"][0]["failures"]["by_verdict"].items()) EXPECT_NE(item.key(), "interrupted");
    }
  }
  int unrecorded = 0;
  double unrecorded_bill = 0;
  for (const auto& [id, b] : billed) {
    if (seen.count(id)) continue;
    ++unrecorded;
    unrecorded_bill += b.cost_usd;
  }
  EXPECT_EQ(answered, attempts) << "each attempt's answer billed once";
  EXPECT_EQ(static_cast<int>(billed.size()), attempts + faults + unrecorded);
  EXPECT_LE(unrecorded, in_flight) << "every billed call kloop did not record was in flight when its driver was killed";
  EXPECT_NEAR(report_bill, ledger_bill, 1e-9);
  EXPECT_NEAR(report_bill + unrecorded_bill, bill, 1e-9);
  EXPECT_GE(kills, 20);
  const std::map<std::string, int> kinds = provider_.kinds();
  for (const char* kind : {"rate_limit", "overloaded", "server_error", "error_event", "reset", "stall", "no_final_event"}) {
    EXPECT_GT(kinds.count(kind) ? kinds.at(kind) : 0, 0) << kind << " never sent";
  }

  std::ostringstream figures;
  figures << "chaos figures (seed " << kSeed << (slurm_ ? ", shards as Slurm array tasks" : ", shards side by side")
          << "):\n  stops " << kills << ":";
  for (const auto& [at, n] : stopped_at) {
    if (n) figures << " " << at << " x" << n;
  }
  figures << "\n  provider responses:";
  for (const auto& [kind, n] : kinds) figures << " " << kind << " " << n;
  figures << "\n  billed calls " << billed.size() << " = distinct attempts " << attempts << " + transport faults "
          << faults << " + in flight at a kill " << unrecorded << " (journal: " << in_flight
          << " request(s) in flight at a stop)\n  provider's bill $" << bill << " = report $" << report_bill
          << " + in flight at a kill $" << unrecorded_bill << "\n";
  std::cout << figures.str();
  RecordProperty("figures", figures.str());
}

}  // namespace
}  // namespace kloop
