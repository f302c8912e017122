// kloop import kernelbench | release: published KernelBench-format kernels as a kloop run.
#include <iostream>
#include <memory>

#include "agent/cli/commands.h"
#include "agent/report/kernelbench_import.h"

namespace kloop::cli {
namespace {

void print_summary(const report::KernelBenchImportSummary& s, const char* what) {
  std::cout << "imported " << s.imported << " " << what << " into " << s.run_dir << " (" << s.published
            << " with a published verdict, " << s.present << " already there)\n";
  // One line for the kernels whose version draws its inputs otherwise (a
  // release of an older KernelBench has one for nearly every task).
  if (!s.notes.empty()) {
    std::cout << "note: " << s.notes.size() << " kernel(s) come from a KernelBench version whose get_inputs or "
              << "get_init_inputs differ from kloop's upstream file (other sizes or distributions); kloop judges "
                 "them on the inputs its specs draw (first: "
              << s.notes.front().substr(0, s.notes.front().find(':')) << ")\n";
  }
  for (const auto& why : s.skipped) std::cout << "skipped " << why << "\n";
  std::cout << "the report counts all " << s.level_tasks
            << " kloop tasks of the levels seen (a task without a kernel is a failure, as KernelBench's analysis "
               "counts it)";
  if (s.without_kernel) std::cout << "; " << s.without_kernel << " record(s) of the release carry no kernel";
  std::cout << "\nnext: kloop rescore " << s.run_dir << " --protocol kernelbench; kloop rescore " << s.run_dir
            << " --protocol strict; kloop report " << s.run_dir << "\n";
}

}  // namespace

Runner add_import_command(CLI::App& app, const GlobalOptions& global) {
  app.require_subcommand(1);
  auto* kb = app.add_subcommand("kernelbench",
                                "a KernelBench generation folder (level_L_problem_P_sample_S_kernel.py files, "
                                "eval_results.json when present) as a kloop run, one attempt per kernel file");
  auto o = std::make_shared<report::KernelBenchImportOptions>();
  o->runs_dir = "runs";
  kb->add_option("folder", o->generations, "KernelBench's runs/RUN_NAME folder")
      ->required()
      ->check(CLI::ExistingDirectory);
  kb->add_option("--kernelbench", o->kernelbench,
                 "the KernelBench checkout, at the version the kernels were generated with (holds "
                 "KernelBench/level1/...): each kernel's task is told by that version's reference file")
      ->required();
  kb->add_option("--baseline", o->baseline,
                 "KernelBench's results/timing/<hardware>/baseline_time_torch.json: published speedups from "
                 "eval_results.json's runtimes, as KernelBench's analysis computes fast_p");
  kb->add_option("--name", o->name, "the kloop run's name (default: the folder's)");
  kb->add_option("--runs-dir", o->runs_dir, "where the run folder goes")->capture_default_str();
  kb->add_option("--device", o->device,
                 "where kloop rescore evaluates the kernels: cpu, or cuda for KernelBench's CUDA answers")
      ->capture_default_str();

  auto* rel = app.add_subcommand("release",
                                 "a published release (JSON list, object of levels, or JSONL; records with level, "
                                 "task, reference code, kernel code and a claimed speedup) as a kloop run");
  auto r = std::make_shared<report::KernelBenchImportOptions>();
  r->runs_dir = "runs";
  rel->add_option("file", r->generations, "the release file (e.g. CUDA-L1's optimized_cuda_code/h100.json)")
      ->required()
      ->check(CLI::ExistingFile);
  rel->add_option("--kernelbench", r->kernelbench,
                  "a KernelBench checkout giving the reference of records that carry none (default: such records "
                  "are skipped)");
  rel->add_option("--name", r->name, "the kloop run's name (default: the file's name without its extension)");
  rel->add_option("--runs-dir", r->runs_dir, "where the run folder goes")->capture_default_str();
  rel->add_option("--device", r->device,
                  "where kloop rescore evaluates the kernels: cpu, or cuda for CUDA kernels")
      ->capture_default_str();
  return [o, r, kb, &global]() {
    if (kb->parsed()) {
      o->problems_dir = global.problems_dir;
      print_summary(report::import_kernelbench(*o), "kernel file(s)");
    } else {
      r->problems_dir = global.problems_dir;
      print_summary(report::import_release(*r), "kernel(s)");
    }
    return 0;
  };
}

}  // namespace kloop::cli
