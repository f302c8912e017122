// kloop import kernelbench: a KernelBench generation folder (what its
// scripts/generate_samples.py writes: level_L_problem_P_sample_S_kernel.py,
// generation_config.yaml, and eval_results.json once its
// eval_from_generations.py has run) turned into a kloop run, one attempt per
// kernel file (turn 1, its sample), so that `kloop rescore` evaluates every
// file under kernelbench and strict and `kloop report` puts them side by
// side. The run's own protocol is "kernelbench_published": its records carry
// KernelBench's own verdicts where eval_results.json has them (compiled ->
// compile_error, correctness -> incorrect or correct; no speedup, since that
// file holds no reference time), else "unevaluated". Importing again adds
// only files not imported yet.
#pragma once

#include <string>
#include <vector>

namespace kloop::report {

constexpr const char* kPublishedProtocol = "kernelbench_published";

struct KernelBenchImportOptions {
  std::string generations;     // the KernelBench run folder
  std::string runs_dir;        // where the kloop run goes
  std::string name;            // "" = the generation folder's name
  std::string device = "cpu";  // where rescoring evaluates (cuda for KernelBench's CUDA answers)
  std::string problems_dir;
};

struct KernelBenchImportSummary {
  std::string run_dir;
  int imported = 0;                  // attempts written now
  int present = 0;                   // already in the run
  int published = 0;                 // of those written now, with KernelBench's own verdict
  std::vector<std::string> skipped;  // "FILE: why"
};

// Throws std::runtime_error naming the folder or file and the fix when the
// folder holds no kernel file, or a file kloop needs does not parse.
KernelBenchImportSummary import_kernelbench(const KernelBenchImportOptions& options);

}  // namespace kloop::report
