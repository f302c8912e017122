// kloop import kernelbench: a KernelBench generation folder as a kloop run.
#include <iostream>
#include <memory>

#include "agent/cli/commands.h"
#include "agent/report/kernelbench_import.h"

namespace kloop::cli {

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
  kb->add_option("--name", o->name, "the kloop run's name (default: the folder's)");
  kb->add_option("--runs-dir", o->runs_dir, "where the run folder goes")->capture_default_str();
  kb->add_option("--device", o->device,
                 "where kloop rescore evaluates the kernels: cpu, or cuda for KernelBench's CUDA answers")
      ->capture_default_str();
  return [o, &global]() {
    o->problems_dir = global.problems_dir;
    const report::KernelBenchImportSummary s = report::import_kernelbench(*o);
    std::cout << "imported " << s.imported << " kernel file(s) into " << s.run_dir << " (" << s.published
              << " with KernelBench's own verdict, " << s.present << " already there)\n";
    for (const auto& why : s.skipped) std::cout << "skipped " << why << "\n";
    std::cout << "next: kloop rescore " << s.run_dir << " --protocol kernelbench; kloop rescore " << s.run_dir
              << " --protocol strict; kloop report " << s.run_dir << "\n";
    return 0;
  };
}

}  // namespace kloop::cli
