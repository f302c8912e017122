// The synthetic run store of synthetic_run.h.
#include "tests/support/synthetic_run.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "agent/report/run_view.h"
#include "agent/store/run_store.h"

namespace kloop::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct Planned {
  const char* problem;
  int level;
  int turn;
  const char* verdict;
  std::optional<double> speedup;
  const char* message;
};

const Planned kAttempts[] = {
    {"19_ReLU", 1, 1, "integrity_violation", std::nullopt,
     "output_aliases_input: output 0 shares memory with input 0 (x); return a new tensor"},
    {"19_ReLU", 1, 2, "correct", 0.9, "all 24 test calls passed"},
    {"19_ReLU", 1, 3, "correct", 1.6, "all 24 test calls passed"},
    {"23_Softmax", 1, 1, "incorrect", std::nullopt,
     "8 of 24 test calls failed; first: seed 9, inputs x1, shape variant 'odd': output0 differs"},
    {"23_Softmax", 1, 2, "correct", 1.2, "all 24 test calls passed"},
    {"23_Softmax", 1, 3, "correct", 1.1, "all 24 test calls passed"},
    {"12_Gemm_Multiply_LeakyReLU", 2, 1, "compile_error", std::nullopt, "candidate.cpp:9:5: error: expected ';'"},
    {"12_Gemm_Multiply_LeakyReLU", 2, 2, "runtime_error", std::nullopt, "SIGSEGV during forward, case 0 call 0"},
    {"12_Gemm_Multiply_LeakyReLU", 2, 3, "correct", 2.5, "all 24 test calls passed"},
};

json config_json(const std::string& name) {
  return {{"name", name},
          {"problems",
           {{"suite", "kernelbench"},
            {"level", nullptr},
            {"names", {"19_ReLU", "21_Sigmoid", "23_Softmax", "12_Gemm_Multiply_LeakyReLU"}}}},
          {"device", "cpu"},
          {"protocol", "strict"},
          {"seed", 1},
          {"provider", {{"kind", "replay"}, {"model", "synthetic"}}},
          {"scaffold", {{"kind", "iterative"}, {"samples", 1}, {"turns", 3}}},
          {"evaluation", {{"timeout_s", 60}, {"max_timing_seconds", 0.05}, {"threads", 0}}}};
}

// A verdict.json whose failing tests say what went wrong.
json verdict_json(const Planned& p) {
  json v = {{"verdict", p.verdict},
            {"message", p.message},
            {"problem", p.problem},
            {"tests", json::array()},
            {"integrity", json::array()}};
  if (std::string(p.verdict) == "incorrect") {
    v["tests"].push_back({{"label", "seed 1, inputs x1"}, {"passed", true}, {"outputs", json::array()}});
    v["tests"].push_back({{"label", "seed 9, inputs x1, shape variant 'odd'"},
                          {"passed", false},
                          {"outputs", {{{"passed", false}, {"non_finite", 0}}}}});
  }
  if (std::string(p.verdict) == "integrity_violation") {
    v["integrity"].push_back({{"check", "output_aliases_input"}, {"message", p.message}});
  }
  return v;
}

AttemptRecord record_of(const Planned& p, const std::string& run, RunStore& store) {
  AttemptRecord r;
  r.run = run;
  r.problem = p.problem;
  r.level = p.level;
  r.turn = p.turn;
  r.verdict = p.verdict;
  r.speedup = p.speedup;
  r.message = p.message;
  r.protocol = "strict";
  r.device = "cpu";
  r.model = "synthetic";
  r.input_tokens = 1000;
  r.output_tokens = 200;
  r.cost_usd = 0.01;
  r.llm_seconds = 2;
  r.eval_seconds = 3;
  r.chain_done = p.turn == 3;
  r.stop_reason = r.chain_done ? "turns" : "";
  r.attempt_dir = store.relative_attempt_dir(p.problem, 0, p.turn);
  r.timestamp = "2026-01-01T00:00:" + std::to_string(10 + 5 * p.turn) + "Z";
  return r;
}

}  // namespace

std::string write_synthetic_run(const std::string& runs_dir, const std::string& name) {
  RunStore store(runs_dir, name);
  RunStore::write_text(store.path() + "/config.json", config_json(name).dump(2) + "\n");
  for (const Planned& p : kAttempts) {
    const std::string dir = store.attempt_dir(p.problem, 0, p.turn);
    RunStore::write_text(dir + "/candidate.cpp",
                         "// " + std::string(p.problem) + " turn " + std::to_string(p.turn) + "\n");
    RunStore::write_text(dir + "/feedback.txt", std::string("Your kernel: ") + p.verdict + "\n");
    RunStore::write_text(dir + "/verdict.json", verdict_json(p).dump(2) + "\n");
    store.append(record_of(p, name, store));
  }
  return store.path();
}

void write_synthetic_rescore(const std::string& run_dir) {
  const fs::path folder(run_dir);
  RunStore store(folder.parent_path().string(), folder.filename().string());
  const std::string file = report::rescore_results_file("kernelbench");
  for (AttemptRecord r : store.load_results()) {
    r.protocol = "kernelbench";
    if (r.problem == "23_Softmax" && r.turn == 1) {
      r.verdict = "correct";
      r.speedup = 1.05;
      r.message = "all 5 test calls passed";
    }
    store.append(r, file);
  }
}

}  // namespace kloop::testing
