// kloop: the command-line driver. A thin layer over the evaluator library.
#include <cstdlib>
#include <iostream>
#include <map>

#include "agent/cli/commands.h"
#include "evaluator/build/environment.h"
#include "evaluator/problem/registry.h"

int main(int argc, char** argv) {
  CLI::App app{"kloop: an agentic feedback-loop runner for LLM-written GPU kernels"};
  app.require_subcommand(1);
  app.footer("docs: README.md, then docs/commands.md (every command) and a docs/ page per topic (`kloop COMMAND "
             "--help` names its page)");
  app.set_version_flag("--version", kloop::version_text(), "print kloop's version, commit, LibTorch and CUDA, then exit");
  kloop::cli::GlobalOptions global;
  global.problems_dir = kloop::ProblemRegistry::default_root();
  auto* problems_opt = app.add_option("--problems", global.problems_dir, "folder holding the problem suites")
                           ->capture_default_str()
                           ->envname("KLOOP_PROBLEMS_DIR");

  std::map<CLI::App*, kloop::cli::Runner> runners;
  // Each subcommand's help ends with the docs/ page that explains it.
  const std::map<std::string, std::string> pages = {
      {"problems", "docs/commands.md (parity: docs/kernelbench.md; spec format: problems/README.md)"},
      {"eval", "docs/protocols.md (verdicts, protocols, timing); the GPU: docs/gpu.md; Python: docs/kernelbench.md"},
      {"demo", "README.md"},
      {"run", "docs/configs.md (every config field); docs/commands.md (--set, --problems); resuming and Ctrl-C: "
              "docs/run-store.md; Slurm: docs/cluster.md"},
      {"audit", "docs/gpu.md"},
      {"calibrate", "docs/gpu.md"},
      {"baseline", "docs/gpu.md"},
      {"report", "docs/reports.md"},
      {"rescore", "docs/reports.md"},
      {"import", "docs/kernelbench.md"},
      {"mutate", "docs/mutation.md"}};
  auto add = [&](const char* name, const char* help, auto adder) {
    CLI::App* sub = app.add_subcommand(name, help);
    sub->footer("docs: " + pages.at(name));
    runners[sub] = adder(*sub, global);
  };
  add("problems", "list and show the task suites", kloop::cli::add_problems_command);
  add("eval", "evaluate one candidate file against a problem's reference", kloop::cli::add_eval_command);
  add("demo", "evaluate the shipped example candidates (offline, CPU)", kloop::cli::add_demo_command);
  add("run", "run an experiment config: LLM -> candidate -> verdict -> feedback, resumable", kloop::cli::add_run_command);
  add("audit", "flag degenerate tasks (zeros pass, constant, seed/input/weight-invariant outputs)",
      kloop::cli::add_audit_command);
  add("calibrate", "measure this GPU's copy bandwidth and GEMM rates (the speed-of-light floor)",
      kloop::cli::add_calibrate_command);
  add("baseline", "time references with TF32 off and on at upstream sizes; fills the baseline cache",
      kloop::cli::add_baseline_command);
  add("report", "metrics of finished runs: fast_p, one-shot vs iterative, failures, cost; Markdown, HTML, JSON, CSV",
      kloop::cli::add_report_command);
  add("rescore", "re-evaluate a run's stored candidates under another protocol (no LLM calls)",
      kloop::cli::add_rescore_command);
  add("import", "turn published kernels into a kloop run (kernelbench: a generation folder; release: a JSON or JSONL release)", kloop::cli::add_import_command);
  add("mutate", "measure the judge: mutate correct kernels by fault class, kill rates per protocol and class",
      kloop::cli::add_mutate_command);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  global.problems_dir_set = problems_opt->count() > 0 || std::getenv("KLOOP_PROBLEMS_DIR") != nullptr;
  for (auto* sub : app.get_subcommands()) {
    try {
      return runners.at(sub)();
    } catch (const std::exception& e) {
      std::cerr << "kloop: " << e.what() << "\n";
      return 2;
    }
  }
  return 2;
}
