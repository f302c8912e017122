// The kloop subcommands. Each registers its options on the CLI app and
// returns a runner giving the process exit code: 0 when it did its job
// (whatever the verdict), 1 when some items failed, 2 for bad input or a
// kloop-side error.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <string>

#include "evaluator/evaluate.h"

namespace kloop::cli {

// Options every command shares.
struct GlobalOptions {
  std::string problems_dir;
  bool problems_dir_set = false;  // given on the command line or in the environment
};

using Runner = std::function<int()>;

// Evaluation settings shared by `eval` and `demo`.
struct EvalCliOptions {
  std::string device = "cpu";
  std::string protocol = "strict";
  std::string precision = "fp32";  // KernelBench's precision: fp32, fp16 or bf16
  uint64_t seed = 1;
  double timeout_s = kDefaultRunTimeoutSeconds;
  double memory_limit_gb = kDefaultMemoryLimitGb;
  uint64_t process_limit = 512;
  int threads = 0;
  bool no_timing = false;
  bool no_activity_audit = false;
  bool profile = false;
  bool fp64_reference = false;
  double max_timing_s = 0;
  bool keep_work_dir = false;
  bool no_network_isolation = false;
  std::string isolation = "strict";
  std::string dims = "full";  // GPU: full (upstream sizes) or small (the cpu dims)
};
void add_eval_options(CLI::App& app, EvalCliOptions& o);
// Checks the values and builds the Evaluator's options; throws
// std::invalid_argument naming the bad option.
EvalOptions make_eval_options(const EvalCliOptions& o);
// A precision option's value (fp32, fp16, bf16); std::invalid_argument
// naming `option` and the choices otherwise.
Precision parse_precision_option(const std::string& option, const std::string& value);

Runner add_problems_command(CLI::App& app, const GlobalOptions& global);
Runner add_eval_command(CLI::App& app, const GlobalOptions& global);
Runner add_demo_command(CLI::App& app, const GlobalOptions& global);
Runner add_run_command(CLI::App& app, const GlobalOptions& global);
Runner add_audit_command(CLI::App& app, const GlobalOptions& global);
Runner add_calibrate_command(CLI::App& app, const GlobalOptions& global);
Runner add_baseline_command(CLI::App& app, const GlobalOptions& global);
Runner add_report_command(CLI::App& app, const GlobalOptions& global);
Runner add_rescore_command(CLI::App& app, const GlobalOptions& global);
Runner add_import_command(CLI::App& app, const GlobalOptions& global);
Runner add_mutate_command(CLI::App& app, const GlobalOptions& global);

}  // namespace kloop::cli
