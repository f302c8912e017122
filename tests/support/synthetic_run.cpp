// The synthetic run store of synthetic_run.h.
#include "tests/support/synthetic_run.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

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
  r.outcome = outcome_from_name(p.verdict).value();
  r.speedup = p.speedup;
  r.message = p.message;
  r.protocol = "strict";
  r.device = "cpu";
  r.model = "synthetic";
  r.input_tokens = 1000;
  r.output_tokens = 200;
  r.cost_usd = 0.01;
  r.finish_reason = "stop";
  r.provider_attempts = 1;
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
  store.seal_files("", {"config.json"});
  for (const Planned& p : kAttempts) {
    const std::string dir = store.attempt_dir(p.problem, 0, p.turn);
    RunStore::write_text(dir + "/candidate.cpp",
                         "// " + std::string(p.problem) + " turn " + std::to_string(p.turn) + "\n");
    RunStore::write_text(dir + "/feedback.txt", std::string("Your kernel: ") + p.verdict + "\n");
    RunStore::write_text(dir + "/verdict.json", verdict_json(p).dump(2) + "\n");
    const AttemptRecord r = record_of(p, name, store);
    store.seal_files(r.attempt_dir, {"candidate.cpp", "feedback.txt", "verdict.json"});
    store.append(r);
  }
  return store.path();
}

std::string write_synthetic_provider_run(const std::string& runs_dir, const std::string& name) {
  RunStore store(runs_dir, name);
  json config = config_json(name);
  config["scaffold"]["turns"] = 2;
  config["provider"]["prices"] = {{"input", 3.0}, {"output", 15.0}, {"cached_input", 0.3}, {"cache_write", 3.75}};
  RunStore::write_text(store.path() + "/config.json", config.dump(2) + "\n");
  store.seal_files("", {"config.json"});
  auto calls = [&](const char* problem, int turn, const std::vector<std::string>& lines) {
    std::string text;
    for (const auto& l : lines) text += l + "\n";
    RunStore::write_text(store.attempt_dir(problem, 0, turn) + "/calls.jsonl", text);
  };
  auto record = [&](const char* problem, int level, int turn, const char* verdict, const char* finish) {
    AttemptRecord r;
    r.run = name;
    r.problem = problem;
    r.level = level;
    r.turn = turn;
    r.outcome = outcome_from_name(verdict).value();
    r.protocol = "strict";
    r.device = "cpu";
    r.model = "synthetic";
    r.finish_reason = finish;
    r.provider_attempts = 1;
    r.attempt_dir = store.relative_attempt_dir(problem, 0, turn);
    r.timestamp = "2026-01-01T00:01:0" + std::to_string(turn) + "Z";
    return r;
  };

  calls("19_ReLU", 1,
        {R"({"attempt":1,"status":429,"latency_s":0.1,"error_class":"transient","retry_delay_s":2.0})",
         R"({"attempt":2,"status":503,"latency_s":0.2,"error_class":"transient","retry_delay_s":4.0})",
         R"({"attempt":3,"status":200,"latency_s":3.0,"request_id":"req-1","finish_reason":"stop",)"
         R"("tokens":{"input":1000,"cached_input":0,"cache_write":600,"output":200,"reasoning":50},"cost_usd":0.01})"});
  AttemptRecord relu1 = record("19_ReLU", 1, 1, "correct", "stop");
  relu1.speedup = 1.3;
  relu1.input_tokens = 1000;
  relu1.cache_write_tokens = 600;
  relu1.output_tokens = 200;
  relu1.reasoning_tokens = 50;
  relu1.provider_attempts = 3;
  relu1.cost_usd = 0.01;
  store.append(relu1);

  calls("19_ReLU", 2, {R"({"attempt":1,"status":400,"latency_s":0.1,"error_class":"context_overflow"})"});
  AttemptRecord relu2 = record("19_ReLU", 1, 2, "context_overflow", "context_overflow");
  relu2.chain_done = true;
  relu2.stop_reason = "context_overflow";
  store.append(relu2);

  calls("23_Softmax", 1, {R"({"attempt":1,"status":400,"latency_s":0.1,"error_class":"content_policy"})"});
  AttemptRecord softmax = record("23_Softmax", 1, 1, "refused", "content_filter");
  softmax.chain_done = true;
  softmax.stop_reason = "refused";
  store.append(softmax);

  calls("21_Sigmoid", 1,
        {R"({"attempt":1,"status":200,"latency_s":0.5,"error_class":"malformed","retry_delay_s":1.0})",
         R"({"attempt":2,"status":200,"latency_s":2.0,"finish_reason":"length",)"
         R"("tokens":{"input":1200,"cached_input":600,"cache_write":0,"output":300,"reasoning":0},"cost_usd":0.02})"});
  AttemptRecord sigmoid = record("21_Sigmoid", 1, 1, "compile_error", "length");
  sigmoid.input_tokens = 1200;
  sigmoid.cached_input_tokens = 600;
  sigmoid.output_tokens = 300;
  sigmoid.provider_attempts = 2;
  sigmoid.cost_usd = 0.02;
  store.append(sigmoid);
  calls("21_Sigmoid", 2,
        {R"({"attempt":1,"status":500,"latency_s":0.1,"error_class":"transient","retry_delay_s":1.0})", "",
         R"({"attempt":2,"status":502,"latency_s":0.1,"error_class":"transient"})", R"({"attempt":3,"status":5)"});

  calls("12_Gemm_Multiply_LeakyReLU", 1, {R"({"attempt":1,"status":429,"latency_s":0.1,"error_class":"quota"})"});
  return store.path();
}

void write_synthetic_rescore(const std::string& run_dir) {
  const fs::path folder(run_dir);
  RunStore store(folder.parent_path().string(), folder.filename().string());
  const std::string file = report::rescore_results_file("kernelbench");
  for (AttemptRecord r : store.load_results()) {
    r.protocol = "kernelbench";
    if (r.problem == "23_Softmax" && r.turn == 1) {
      r.outcome = Outcome::kCorrect;
      r.speedup = 1.05;
      r.message = "all 5 test calls passed";
    }
    store.append(r, file);
  }
}

}  // namespace kloop::testing
