// kloop_parity_bench: the time of `kloop problems parity` per task with one
// python3 started for each task against one kept for all (UpstreamHost),
// side by side: the tasks alternate between the two ways, so drift hits
// both alike; and where the kept host's time goes (ParityResult's phases). A program that prints figures, not a test: it asserts nothing.
//
//   kloop_parity_bench --upstream KERNELBENCH [--level N] [--tasks N] [--device cpu|cuda] [--dims small|full]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "evaluator/build/builder.h"
#include "evaluator/parity.h"
#include "evaluator/problem/registry.h"
#include "evaluator/timing/sample_stats.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

int main(int argc, char** argv) {
  std::string upstream, device = "cpu", dims = "small";
  int level = 1, tasks = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--upstream") upstream = value;
    else if (flag == "--level") level = std::atoi(value.c_str());
    else if (flag == "--tasks") tasks = std::atoi(value.c_str());
    else if (flag == "--device") device = value;
    else if (flag == "--dims") dims = value;
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (upstream.empty()) {
    std::fprintf(stderr, "usage: kloop_parity_bench --upstream KERNELBENCH [--level N] [--tasks N] [--device D] "
                         "[--dims small|full]\n");
    return 2;
  }
  kloop::ProblemRegistry registry(kloop::ProblemRegistry::default_root());
  std::vector<kloop::ProblemSpec> specs;
  for (const auto& e : registry.select({}, "kernelbench", level)) {
    if (static_cast<int>(specs.size()) >= tasks) break;
    specs.push_back(registry.load(e));
  }
  kloop::Builder builder(kloop::BuilderConfig::from_environment());
  kloop::EvalOptions options;
  options.measure_time = false;
  options.device = device;
  options.small_dims = dims == "small";
  kloop::Evaluator evaluator(builder, options);
  kloop::ParityOptions po;
  po.upstream_root = upstream;
  po.python = kloop::find_python_with_torch("");
  // References built first (and the host started on a first task), so
  // neither way pays them inside the figures.
  kloop::UpstreamHost host(po.python, (std::filesystem::temp_directory_path() /
                                       ("kloop-parity-bench-" + std::to_string(getpid()) + ".log"))
                                          .string());
  for (const auto& spec : specs) builder.build(spec.reference_path, kloop::ModuleRole::kReference,
                                               device == "cpu" ? kloop::BuildTarget::kCpu : kloop::BuildTarget::kCuda);
  po.host = &host;
  (void)kloop::check_parity(evaluator, specs.front(), po);

  std::vector<double> per_task[2];
  std::vector<double> phases[3];  // the kept host's: reference, upstream, judging
  std::printf("%-48s %-10s %-10s %s\n", "task", "one-shot", "kept", "parity");
  for (std::size_t i = 0; i < specs.size(); ++i) {
    double took[2] = {0, 0};
    std::string status;
    // Alternate which way goes first.
    for (int k = 0; k < 2; ++k) {
      const int way = (static_cast<int>(i) + k) % 2;  // 0: a python3 per task, 1: the kept host
      po.host = way == 1 ? &host : nullptr;
      const auto start = Clock::now();
      const kloop::ParityResult r = kloop::check_parity(evaluator, specs[i], po);
      took[way] = seconds_since(start);
      per_task[way].push_back(took[way]);
      if (way == 1) {
        phases[0].push_back(r.reference_seconds);
        phases[1].push_back(r.upstream_seconds);
        phases[2].push_back(r.compare_seconds);
      }
      status = r.status;
    }
    std::printf("%-48s %8.2f s %8.2f s %s\n", specs[i].name.c_str(), took[0], took[1], status.c_str());
  }
  const double one_shot = kloop::summarize(per_task[0]).median, kept = kloop::summarize(per_task[1]).median;
  std::printf("\nmedian per task over %zu tasks (%s, %s dims): a python3 per task %.2f s, one kept %.2f s: %.2fx\n",
              specs.size(), device.c_str(), dims.c_str(), one_shot, kept, kept > 0 ? one_shot / kept : 0.0);
  std::printf("the kept host's median phases: reference %.2f s, upstream %.2f s, judging %.2f s\n",
              kloop::summarize(phases[0]).median, kloop::summarize(phases[1]).median,
              kloop::summarize(phases[2]).median);
  std::printf("the kept host started %d time(s)\n", host.starts());
  return 0;
}
