// kloop demo: evaluates the example candidates listed in configs/examples.yaml
// (offline, on CPU) and prints a verdict table. Exit 1 when a verdict differs
// from the one the config expects.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "agent/cli/commands.h"
#include "evaluator/build/build_config.h"
#include "evaluator/build/environment.h"
#include "evaluator/problem/registry.h"

namespace kloop::cli {

Runner add_demo_command(CLI::App& app, const GlobalOptions& global) {
  struct State {
    std::string config = data_dir() + "/configs/examples.yaml";
    EvalCliOptions eval;
  };
  auto st = std::make_shared<State>();
  st->eval.max_timing_s = 0.5;
  app.add_option("--config", st->config, "demo config listing candidates and expected verdicts")
      ->capture_default_str();
  add_eval_options(app, st->eval);
  return [st, &global]() {
    namespace fs = std::filesystem;
    YAML::Node root;
    try {
      root = YAML::LoadFile(st->config);
    } catch (const YAML::Exception& e) {
      throw std::runtime_error(st->config + ": " + e.what());
    }
    if (!root["candidates"] || !root["candidates"].IsSequence()) {
      throw std::runtime_error(st->config + ": field 'candidates': expected a list of {problem, candidate, expect}");
    }
    const fs::path base = fs::path(st->config).parent_path();
    ProblemRegistry reg(global.problems_dir);
    Builder builder(BuilderConfig::from_environment());
    Evaluator evaluator(builder, make_eval_options(st->eval));
    int mismatched = 0, index = 0;
    std::printf("%-22s %-34s %-20s %-9s %-9s %s\n", "problem", "candidate", "verdict", "expected", "speedup", "time");
    for (const auto& item : root["candidates"]) {
      const std::string problem = item["problem"].as<std::string>();
      const fs::path candidate = base / item["candidate"].as<std::string>();
      const std::string expect = item["expect"] ? item["expect"].as<std::string>() : "";
      // Said first: a cold evaluation builds the reference (about a minute).
      std::fprintf(stderr, "kloop: [%d/%d] %s: %s ...\n", ++index, static_cast<int>(root["candidates"].size()),
                   problem.c_str(), candidate.filename().c_str());
      Verdict v = evaluator.evaluate(reg.load(problem), candidate.lexically_normal().string());
      const bool ok = expect.empty() || expect == verdict_name(v.verdict);
      mismatched += ok ? 0 : 1;
      std::string speed = "-";
      if (v.speedup) speed = fmt::format("{:.2f}x", *v.speedup);
      std::printf("%-22s %-34s %-20s %-9s %-9s %.1fs\n", problem.c_str(), candidate.filename().c_str(),
                  verdict_name(v.verdict), ok ? "yes" : expect.c_str(), speed.c_str(), v.phases.total);
      if (v.verdict != VerdictClass::kCorrect) std::printf("    %s\n", v.message.substr(0, 160).c_str());
      std::fflush(stdout);
    }
    std::printf("%d candidates, %d with an unexpected verdict\n", static_cast<int>(root["candidates"].size()),
                mismatched);
    return mismatched ? 1 : 0;
  };
}

}  // namespace kloop::cli
