// kloop mutate: how good kloop's judge is, measured. Correct seed kernels
// are mutated by fault class, every mutant is evaluated under each protocol
// as `kloop eval` would, and the kill rates (per class and protocol) and
// every survivor are written as JSON and Markdown (README: Mutation testing).
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "agent/cli/commands.h"
#include "agent/mutate/campaign.h"

namespace kloop::cli {

namespace {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace

Runner add_mutate_command(CLI::App& app, const GlobalOptions& global) {
  struct State {
    std::string seeds_file;
    std::string problem;
    std::string candidate;
    std::string protocols = "kernelbench,verified,strict";
    EvalCliOptions eval;
    bool timing = false;
    int max_sites = 0;
    int jobs = 1;
    bool no_oracle = false;
    double oracle_factor = 2.0;
    std::string out = "mutate-out";
    std::string floors;
    bool list = false;
    std::vector<std::string> set_dims;
  };
  auto st = std::make_shared<State>();
  app.add_option("--seeds", st->seeds_file,
                 "a set file (YAML): seeds: [{problem: NAME, candidate: FILE}], files relative to it "
                 "(e.g. tests/fixtures/mutate/cpu.yaml)")
      ->check(CLI::ExistingFile);
  app.add_option("--problem,-p", st->problem, "with --candidate: one seed's problem instead of a set file");
  app.add_option("--candidate,-c", st->candidate,
                 "with --problem: one correct kernel (.cpp, .cu or KernelBench's Python .py) to mutate")
      ->check(CLI::ExistingFile);
  app.add_option("--protocol", st->protocols, "protocols to measure, comma-separated")->capture_default_str();
  app.add_option("--device", st->eval.device, "cpu, or cuda / cuda:N where kloop was built with CUDA")
      ->capture_default_str();
  app.add_option("--dims", st->eval.dims, "GPU problem sizes: full (upstream's) or small (the spec's cpu dims)")
      ->capture_default_str()
      ->check(CLI::IsMember({"full", "small"}));
  app.add_option("--seed", st->eval.seed, "base seed for weights and inputs")->capture_default_str();
  app.add_option("--timeout", st->eval.timeout_s, "seconds allowed per worker step")->capture_default_str();
  app.add_option("--threads", st->eval.threads, "intra-op CPU threads for both models (0: LibTorch default)")
      ->capture_default_str();
  app.add_option("--memory-limit-gb", st->eval.memory_limit_gb, "the candidate's (and its build's) memory limit")
      ->capture_default_str();
  app.add_option("--isolation", st->eval.isolation, "the candidate's sandbox: strict or weak")
      ->capture_default_str()
      ->check(CLI::IsMember({"strict", "weak"}));
  app.add_flag("--timing", st->timing,
               "time each mutant as well (the timed phase's integrity checks then count too; slower). Off: "
               "correctness only, as --no-timing");
  app.add_option("--max-timing-seconds", st->eval.max_timing_s, "with --timing: cap the timing budget per model")
      ->capture_default_str();
  app.add_option("--max-sites", st->max_sites, "mutants per operator and seed, first sites first (0: every site)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--jobs,-j", st->jobs, "mutants evaluated at once")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_flag("--no-oracle", st->no_oracle,
               "skip the fp64 oracle (no mutant is then found equivalent; every survivor stays in the denominator)");
  app.add_option("--oracle-factor", st->oracle_factor,
                 "a mutant is equivalent when its max and RMS errors against fp64 are within this factor of the "
                 "fp32 reference's own (or 4 fp32 units of the output) on every call of every case")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--out", st->out, "folder for mutants/, report.json and report.md")->capture_default_str();
  app.add_option("--floors", st->floors,
                 "a floors file (JSON: generated count, kill-rate floors per protocol and class); exit 1 below one")
      ->check(CLI::ExistingFile);
  app.add_flag("--list", st->list, "print the mutants (id, class, diff) and stop; evaluates nothing");
  app.add_option("--set-dim", st->set_dims, "override a dim of the seeds' problems, NAME=VALUE (repeatable)");
  return [st, &global]() {
    std::vector<mutate::Seed> seeds;
    if (!st->seeds_file.empty()) {
      if (!st->problem.empty() || !st->candidate.empty()) {
        throw std::invalid_argument("--seeds and --problem/--candidate: give a set file or one seed, not both");
      }
      seeds = mutate::load_seed_set(st->seeds_file);
    } else if (!st->problem.empty() && !st->candidate.empty()) {
      seeds.push_back({st->problem, st->candidate, {}});
    } else {
      throw std::invalid_argument("kloop mutate: give --seeds FILE, or --problem NAME with --candidate FILE");
    }
    if (st->list) {
      for (const auto& s : seeds) {
        for (const auto& m : mutate::seed_mutants(s, st->max_sites)) {
          std::cout << m.id << "  [" << m.fault_class << "] " << m.edit << "\n" << m.diff() << "\n";
        }
      }
      return 0;
    }
    mutate::CampaignOptions o;
    o.protocols = split_commas(st->protocols);
    st->eval.protocol = "strict";  // validated per protocol by the campaign
    st->eval.no_timing = !st->timing;
    o.eval = make_eval_options(st->eval);
    o.max_sites = st->max_sites;
    o.jobs = st->jobs;
    o.oracle = !st->no_oracle;
    o.oracle_factor = st->oracle_factor;
    o.out_dir = st->out;
    for (const auto& kv : st->set_dims) {
      const auto eq = kv.find('=');
      if (eq == std::string::npos) throw std::invalid_argument("--set-dim " + kv + ": expected NAME=VALUE");
      try {
        o.set_dims[kv.substr(0, eq)] = std::stoll(kv.substr(eq + 1));
      } catch (const std::exception&) {
        throw std::invalid_argument("--set-dim " + kv + ": the value must be a whole number");
      }
    }
    const mutate::CampaignReport report = mutate::run_campaign(seeds, o, global.problems_dir, [](const std::string& line) {
      std::cerr << "kloop mutate: " << line << "\n";
    });
    const std::string md = report.to_markdown();
    std::ofstream(st->out + "/report.json") << report.to_json().dump(2) << "\n";
    std::ofstream(st->out + "/report.md") << md;
    std::cout << md;
    std::cerr << "kloop mutate: wrote " << st->out << "/report.json and " << st->out << "/report.md\n";
    if (!st->floors.empty()) {
      const auto shortfalls = mutate::check_floors(report, st->floors);
      for (const auto& s : shortfalls) std::cerr << "kloop mutate: below the floors (" << st->floors << "): " << s << "\n";
      if (!shortfalls.empty()) return 1;
      std::cerr << "kloop mutate: every floor of " << st->floors << " met\n";
    }
    return 0;
  };
}

}  // namespace kloop::cli
