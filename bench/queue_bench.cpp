// kloop_queue_bench: evaluation throughput of `kloop run` against its number
// of evaluation queues, side by side in one process. The same experiment
// (one problem, `--samples` independent one-turn chains, a command provider
// that answers every request with the same candidate) runs once per queue
// count into a fresh run folder; the build cache is warmed first, so every
// run compiles nothing and the figures are the queues' own.
//
//   kloop_queue_bench [--device cpu|cuda] [--queues 1,2] [--samples 8]
//                     [--problem 19_ReLU] [--candidate examples/cpu/19_ReLU_loop.cpp]
//
// Prints, per queue count: wall time, evaluations per hour, each queue's
// evaluations and busy fraction, and the speed-up over the first count.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "agent/llm/provider.h"
#include "agent/scaffold/run_config.h"
#include "agent/scaffold/turn_loop.h"
#include "evaluator/build/environment.h"

namespace fs = std::filesystem;

namespace {

std::vector<int> parse_counts(const std::string& s) {
  std::vector<int> out;
  std::istringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoi(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device = "cpu", problem = "19_ReLU";
  std::string candidate = kloop::data_dir() + "/examples/cpu/19_ReLU_loop.cpp";
  std::vector<int> counts = {1, 2};
  int samples = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--device") device = value;
    else if (flag == "--queues") counts = parse_counts(value);
    else if (flag == "--samples") samples = std::stoi(value);
    else if (flag == "--problem") problem = value;
    else if (flag == "--candidate") candidate = fs::absolute(value).string();
    else {
      std::cerr << "kloop_queue_bench: unknown option " << flag << "\n";
      return 2;
    }
  }
  const fs::path dir = fs::temp_directory_path() / ("kloop-queue-bench-" + std::to_string(getpid()));
  fs::create_directories(dir);
  {
    std::ifstream in(candidate);
    if (!in) {
      std::cerr << "kloop_queue_bench: cannot read " << candidate << "\n";
      return 2;
    }
    std::stringstream code;
    code << in.rdbuf();
    std::ofstream(dir / "answer.txt") << "```cpp\n" << code.str() << "\n```\n";
  }
  auto config_for = [&](int queues, const std::string& name) {
    const fs::path p = dir / (name + ".yaml");
    std::ofstream(p) << "name: " << name << "\nruns_dir: runs\nproblems: {names: [" << problem << "]}\n"
                     << "device: " << device << "\ndevices: " << queues << "\nprotocol: strict\n"
                     << "provider: {kind: command, model: fixed, concurrency: 16, command: [cat, "
                     << (dir / "answer.txt").string() << "]}\n"
                     << "scaffold: {kind: best_of_k, samples: " << samples << "}\n"
                     << "evaluation: {timeout_s: 300}\n";
    return kloop::load_run_config(p.string());
  };
  std::ostringstream quiet;
  auto run = [&](const kloop::RunConfig& c) {
    auto provider = kloop::make_provider(c.provider);
    kloop::TurnLoop loop(c, *provider, quiet);
    return loop.run();
  };
  std::cout << "kloop_queue_bench: " << problem << " on " << device << ", " << samples
            << " one-turn chains per run, one run per queue count (" << kloop::machine_environment(device).dump()
            << ")\n";
  // Warm: the reference's and the candidate's builds, and the baseline cache.
  {
    kloop::RunConfig warm = config_for(1, "warm");
    warm.scaffold.samples = 1;
    const auto s = run(warm);
    if (!s.errors.empty()) {
      std::cerr << "kloop_queue_bench: " << s.errors.front() << "\n";
      return 1;
    }
  }
  double first = 0;
  std::printf("%8s %10s %14s %10s  %s\n", "queues", "wall_s", "evals/hour", "vs_first", "per queue: evaluations, busy");
  for (int q : counts) {
    const kloop::LoopSummary s = run(config_for(q, "q" + std::to_string(q)));
    if (!s.errors.empty()) {
      std::cerr << "kloop_queue_bench: " << s.errors.front() << "\n";
      return 1;
    }
    const double per_hour = s.seconds > 0 ? 3600.0 * s.attempts_run / s.seconds : 0;
    if (first == 0) first = per_hour;
    std::printf("%8d %10.2f %14.0f %9.2fx ", q, s.seconds, per_hour, first > 0 ? per_hour / first : 0.0);
    for (const auto& f : s.queues) {
      std::printf(" [%s: %d, %.0f%%]", f.device.c_str(), f.evaluations, s.seconds > 0 ? 100 * f.busy_seconds / s.seconds : 0.0);
    }
    std::printf("\n");
  }
  fs::remove_all(dir);
  return 0;
}
