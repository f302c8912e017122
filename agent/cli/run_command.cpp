// kloop run CONFIG: an experiment from a YAML config; resumable. With
// --shards N one shard of it (a Slurm array task's); with --slurm, the
// whole run as a Slurm job array of its shards.
#include <fmt/format.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <memory>

#include "agent/cli/commands.h"
#include "agent/cluster/slurm.h"
#include "agent/llm/provider.h"
#include "agent/scaffold/run_config.h"
#include "agent/scaffold/sweep.h"
#include "agent/scaffold/turn_loop.h"
#include "agent/store/run_store.h"

namespace kloop::cli {
namespace {

namespace fs = std::filesystem;

// Interrupts (Ctrl-C, and SIGTERM as Slurm sends it on a cancel or a
// preemption) while a run goes on: the run follows the count
// (TurnLoop::set_interrupts); a third one ends the process at once.
std::atomic<int> interrupts{0};

extern "C" void on_interrupt(int signal) {
  if (++interrupts >= 3) {
    std::signal(signal, SIG_DFL);
    std::raise(signal);
  }
}

// Installed for the life of a run.
class InterruptHandler {
 public:
  InterruptHandler() {
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~InterruptHandler() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  InterruptHandler(const InterruptHandler&) = delete;
  InterruptHandler& operator=(const InterruptHandler&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

struct State {
  std::string config;
  std::string name;
  std::string runs_dir;
  bool check = false;
  bool no_provider_check = false;
  int shards = 0;
  std::optional<int> shard;
  bool slurm = false;
  bool dry_run = false;
  SlurmOptions slurm_options;
  int gpus_per_task = -1;
  ConfigOverrides overrides;  // --set, --problems
};

// `--slurm`: the run folder made, and an array of the shards with work left
// submitted (or, with --dry-run, only written).
int submit(const State& st, const RunConfig& config, LlmProvider& provider, const GlobalOptions& global) {
  TurnLoop loop(config, provider, std::cerr);
  const int problems = static_cast<int>(loop.selected_problems().size());
  const std::string run_path = fs::absolute(loop.prepare_run_folder()).lexically_normal().string();
  RunStore store(fs::path(run_path).parent_path().string(), fs::path(run_path).filename().string());
  int shards = st.shards;
  if (shards == 0) shards = store.shard_count().value_or(std::min(problems, 1000));
  shards = std::max(1, shards);
  store.check_shard_count(shards);

  SlurmArray array;
  array.run_path = run_path;
  array.run_name = config.name;
  array.shards = shards;
  array.cuda = config.device != "cpu";
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  array.command = {ec ? std::string("kloop") : self.string(), "run", fs::absolute(config.path).string(),
                   "--name", config.name, "--runs-dir", fs::path(run_path).parent_path().string(),
                   "--shards", std::to_string(shards)};
  if (global.problems_dir_set) {
    array.command.insert(array.command.begin() + 1, {"--problems", fs::absolute(global.problems_dir).string()});
  }
  if (st.no_provider_check) array.command.push_back("--no-provider-check");
  // Each task reads the config as this command did.
  for (const auto& set : st.overrides.sets) array.command.insert(array.command.end(), {"--set", set});
  if (!st.overrides.problems.empty()) array.command.insert(array.command.end(), {"--problems", st.overrides.problems});

  std::vector<int> work = loop.shards_with_work(shards);
  if (work.empty()) {
    std::cout << "kloop: run '" << config.name << "' (" << run_path << ") has no attempt left to make in any of its "
              << shards << " shard(s); nothing submitted\n";
    return 0;
  }
  // Tasks Slurm already holds, or whose driver is running, are not sent twice.
  const auto queued = slurm_queued_tasks(slurm_job_name(config.name));
  std::vector<int> busy;
  for (int t : work) {
    const bool held = (queued && std::find(queued->begin(), queued->end(), t) != queued->end()) ||
                      RunLock::shard_running(run_path, t);
    (held ? busy : array.tasks).push_back(t);
  }
  if (!busy.empty()) {
    std::cout << "kloop: shard(s) " << array_ranges(busy) << " already queued or running; not submitted again\n";
  }
  if (array.tasks.empty()) return 0;
  const SlurmSubmission sub = submit_slurm_array(array, st.slurm_options, st.dry_run);
  std::cout << "kloop: " << (st.dry_run ? "wrote" : "submitted") << " " << sub.script_path << ": shard(s) "
            << array_ranges(array.tasks) << " of " << shards << " (" << problems << " problem(s))";
  if (!st.dry_run) std::cout << " as job " << sub.job_id;
  std::cout << "\n";
  if (st.dry_run) {
    std::cout << "kloop: submit it with: sbatch " << sub.script_path << "\n";
    return 0;
  }
  std::cout << "kloop: logs in " << run_path << "/slurm/shard-K.log; `kloop report " << run_path
            << "` merges the shards; this command again resubmits what is left\n";
  if (!st.slurm_options.wait) return 0;
  const std::vector<int> left = loop.shards_with_work(shards);
  if (left.empty()) {
    std::cout << "kloop: every shard has finished\n";
    return sub.exit_code == 0 ? 0 : 1;
  }
  std::cout << "kloop: shard(s) " << array_ranges(left) << " have work left (failed, cancelled or preempted); "
            << "submit again to resume them\n";
  return 1;
}

// One run of a config (a sweep's point): --slurm, --check (what it found
// into `totals`), or the run itself, with Ctrl-C and SIGTERM followed. Its
// exit status.
int run_one(const State& st, const RunConfig& config, const GlobalOptions& global, CheckTotals& totals) {
  std::unique_ptr<LlmProvider> provider;
  try {
    provider = make_provider(config.provider);
  } catch (const std::invalid_argument& e) {  // "field 'provider.x': ...": the file it is in
    throw std::invalid_argument(config.path + ": " + e.what());
  }
  if (st.slurm) return submit(st, config, *provider, global);
  std::optional<Shard> shard;
  if (st.shards > 0) shard = Shard{shard_index(st.shard, st.shards), st.shards};
  if (st.check) {
    TurnLoop loop(config, *provider, std::cerr);
    loop.set_provider_check(!st.no_provider_check);
    if (shard) loop.set_shard(*shard);
    const int status = loop.check(std::cout);
    totals = loop.check_totals();
    return status;
  }
  std::cerr << "kloop: run '" << config.name << "'"
            << (shard ? " shard " + std::to_string(shard->index) + "/" + std::to_string(shard->count) : "") << " with "
            << provider->describe() << ", scaffold " << config.scaffold.kind << " (" << config.scaffold.samples
            << " sample(s) x " << config.scaffold.turns << " turn(s)), protocol " << config.protocol
            << (config.precision == "fp32" ? "" : " in " + config.precision) << " on " << config.device << "\n";
  TurnLoop loop(config, *provider, std::cout);
  loop.set_provider_check(!st.no_provider_check);
  if (shard) loop.set_shard(*shard);
  const InterruptHandler handler;
  loop.set_interrupts(&interrupts);
  LoopSummary summary = loop.run();
  std::cout << format_summary(summary);
  if (!summary.run_path.empty()) {
    std::cout << "kloop: `kloop report " << summary.run_path << "` shows fast_p, one-shot vs iterative, failures and "
              << "cost" << (shard ? " (merging the shards)" : "") << "; --html FILE draws them\n";
  }
  return !summary.fatal_error.empty() ? 2 : !summary.stopped.empty() ? 130 : summary.chains_incomplete ? 1 : 0;
}

}  // namespace

Runner add_run_command(CLI::App& app, const GlobalOptions& global) {
  auto st = std::make_shared<State>();
  app.add_option("config", st->config, "experiment config (YAML), e.g. configs/demo.yaml")->required()->check(CLI::ExistingFile);
  app.add_option("--name", st->name, "run name (default: the config's name); a run with this name resumes");
  app.add_option("--runs-dir", st->runs_dir, "where run folders go (default: the config's runs_dir)");
  app.add_option("--set", st->overrides.sets,
                 "FIELD=VALUE: change one config field for this run, by its dotted path (scaffold.turns=5, "
                 "provider.model=gpt-5, scaffold.feedback=[compiler]); stored in the run's config.json (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--problems", st->overrides.problems,
                 "a subset by level and KernelBench number, replacing the config's selection: L1 (a level), "
                 "L1:1-20, 'L1:3,7-9,L2:5' (the problems folder goes before the command: kloop --problems DIR run)");
  app.add_flag("--check", st->check,
               "check the config, problems, prompts, device, provider and run folder, and print the requests and "
               "the cost ceiling; sends nothing");
  app.add_flag("--no-provider-check", st->no_provider_check,
               "do not ask the provider for its model list before the first request (servers without one)");
  app.add_option("--shards", st->shards,
                 "split the run into N shards by problem; without --slurm, run one of them (--shard, or the Slurm "
                 "array task's SLURM_ARRAY_TASK_ID) into the run folder, its records in results.shard-K.jsonl")
      ->check(CLI::Range(1, 100000));
  app.add_option("--shard", st->shard, "with --shards: the shard this driver runs (0 to N-1)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--slurm", st->slurm,
               "submit the run to Slurm as a job array, one task per shard with work left (again: resubmit what "
               "is left)");
  app.add_flag("--dry-run", st->dry_run, "with --slurm: write the sbatch script (RUN/slurm/kloop.sbatch), submit nothing");
  app.add_flag("--wait", st->slurm_options.wait, "with --slurm: return when every task has ended (sbatch --wait)");
  app.add_option("--partition", st->slurm_options.partition, "with --slurm: the Slurm partition");
  app.add_option("--time", st->slurm_options.time, "with --slurm: each task's time limit (sbatch --time, e.g. 04:00:00)");
  app.add_option("--gpus-per-task", st->gpus_per_task,
                 "with --slurm: GPUs per task (default 1 for a CUDA run, none on cpu); each task evaluates on all "
                 "of its GPUs")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--cpus-per-task", st->slurm_options.cpus_per_task, "with --slurm: CPUs per task")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--mem", st->slurm_options.mem, "with --slurm: memory per task (sbatch --mem, e.g. 64G)");
  app.add_option("--sbatch-arg", st->slurm_options.extra,
                 "with --slurm: one more sbatch option for the script, e.g. --sbatch-arg=--account=abc (repeatable)");
  return [st, &global]() {
    if (st->gpus_per_task >= 0) st->slurm_options.gpus_per_task = st->gpus_per_task;
    const bool slurm_only = st->dry_run || st->slurm_options.wait || !st->slurm_options.partition.empty() ||
                            !st->slurm_options.time.empty() || st->gpus_per_task >= 0 ||
                            st->slurm_options.cpus_per_task > 0 || !st->slurm_options.mem.empty() ||
                            !st->slurm_options.extra.empty();
    if (slurm_only && !st->slurm) {
      throw std::invalid_argument("--dry-run, --wait, --partition, --time, --gpus-per-task, --cpus-per-task, --mem "
                                  "and --sbatch-arg go with --slurm");
    }
    if (st->shard && st->shards == 0) throw std::invalid_argument("--shard K needs --shards N (the number of shards)");
    if (st->slurm && st->shard) throw std::invalid_argument("--slurm submits every shard; leave out --shard");
    if (st->slurm && st->check) throw std::invalid_argument("--check and --slurm: run --check without --slurm first");

    // One run, or a sweep's runs one after another (each its own folder
    // under the sweep's, each resumable on its own).
    std::vector<SweepRun> runs = load_run_configs(st->config, st->overrides);
    for (auto& r : runs) {
      RunConfig& config = r.config;
      if (!st->name.empty()) config.name = r.point.empty() ? st->name : st->name + "/" + r.point;
      if (!st->runs_dir.empty()) config.runs_dir = st->runs_dir;
      if (global.problems_dir_set) config.problems_dir = global.problems_dir;
    }
    const bool sweep = !runs.front().point.empty();
    if (sweep) {
      if (!st->check) write_sweep_index(runs);
      std::cerr << "kloop: " << st->config << " is a sweep of " << runs.size() << " run(s):";
      for (const auto& r : runs) std::cerr << " " << r.point;
      std::cerr << "\n";
    }
    int status = 0;
    CheckTotals sum;
    int ready = 0;
    bool priced = true;
    for (const auto& r : runs) {
      CheckTotals one;
      status = std::max(status, run_one(*st, r.config, global, one));
      sum.problems += one.problems;
      sum.requests += one.requests;
      sum.input_tokens += one.input_tokens;
      sum.output_tokens += one.output_tokens;
      if (one.cost_usd) sum.cost_usd = sum.cost_usd.value_or(0) + *one.cost_usd;
      priced = priced && one.cost_usd.has_value();
      ready += one.ready ? 1 : 0;
      if (interrupts > 0) break;  // a sweep's later runs are not started
    }
    if (sweep && st->check) {
      std::cout << fmt::format("sweep total: {} run(s), {} ready; {} problem(s) over the runs; {} request(s) to send "
                               "(about {:.0f} input and at most {:.0f} output tokens)",
                               runs.size(), ready, sum.problems, sum.requests, sum.input_tokens, sum.output_tokens);
      if (sum.cost_usd && priced) {
        std::cout << fmt::format("; cost ceiling ${:.2f}\n", *sum.cost_usd);
      } else if (sum.cost_usd) {
        std::cout << fmt::format("; cost ceiling at least ${:.2f} (some runs have no provider.max_tokens or prices)\n",
                                 *sum.cost_usd);
      } else {
        std::cout << "; no cost ceiling (no run has provider.max_tokens and prices)\n";
      }
    }
    if (sweep && !st->check && !st->slurm) {
      const RunConfig& first = runs.front().config;
      const std::string parent = first.name.substr(0, first.name.size() - runs.front().point.size() - 1);
      std::cout << "kloop: sweep done; `kloop report " << (fs::path(first.runs_dir) / parent).string()
                << "` shows its runs side by side\n";
    }
    return status;
  };
}

}  // namespace kloop::cli
