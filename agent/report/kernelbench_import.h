// kloop import kernelbench | release: published KernelBench-format kernels
// turned into a kloop run, one attempt per kernel (turn 1, its sample), so
// that `kloop rescore` evaluates every one under kernelbench and strict and
// `kloop report` puts the published figures and kloop's side by side.
//
// Two inputs. A KernelBench generation folder (what its
// scripts/generate_samples.py writes: level_L_problem_P_sample_S_kernel.py,
// generation_config.yaml, and eval_results.json once its
// eval_from_generations.py has run), with the KernelBench checkout it was
// made with: each file's task is told by that version's reference file. A
// release file (JSON list, JSON object of levels, or JSONL; e.g. CUDA-L1's
// optimized_cuda_code/<gpu>.json) whose records carry level, task,
// reference code, kernel code and a claimed speedup: each record's task is
// told by the reference it carries.
//
// Either way a task is kloop's only when its reference's Model is the one
// kloop's port follows (kernelbench_tasks.h); another is listed with why and
// skipped. The run selects the whole of each level seen, as KernelBench's
// analysis counts it: a task without a kernel is a failure. The run's own
// protocol is "kernelbench_published": its records carry the published
// verdicts (eval_results.json's compiled and correctness; a release's
// claimed speedup) and speedups (eval_results.json's runtime against
// upstream's baseline timing file, or the release's claim), else
// "unevaluated". Importing again adds only kernels not imported yet.
#pragma once

#include <string>
#include <vector>

namespace kloop::report {

constexpr const char* kPublishedProtocol = "kernelbench_published";

struct KernelBenchImportOptions {
  std::string generations;     // the KernelBench run folder, or the release file (import_release)
  std::string kernelbench;     // the KernelBench checkout the kernels were made for (required for a folder)
  std::string baseline;        // upstream's results/timing/<hw>/baseline_time_torch.json ("" = none)
  std::string runs_dir;        // where the kloop run goes
  std::string name;            // "" = the folder's (the file's stem)
  std::string device = "cpu";  // where rescoring evaluates (cuda for KernelBench's CUDA answers)
  std::string problems_dir;
};

struct KernelBenchImportSummary {
  std::string run_dir;
  int imported = 0;                  // attempts written now
  int present = 0;                   // already in the run
  int published = 0;                 // of those written now, with a published verdict
  int without_kernel = 0;            // release records with no kernel (failures in the level's count)
  int level_tasks = 0;               // the denominator: every kloop task of the levels seen
  std::vector<std::string> skipped;  // "FILE: why" / "level L task P: why"
  std::vector<std::string> notes;    // kernels whose version draws its inputs otherwise
};

// Throws std::runtime_error naming the folder or file and the fix when the
// folder holds no kernel file, no KernelBench checkout is named, or a file
// kloop needs does not parse.
KernelBenchImportSummary import_kernelbench(const KernelBenchImportOptions& options);

// The release file at options.generations; options.kernelbench (optional)
// gives the reference of records that carry none.
KernelBenchImportSummary import_release(const KernelBenchImportOptions& options);

}  // namespace kloop::report
