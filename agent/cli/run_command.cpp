// kloop run CONFIG: an experiment from a YAML config; resumable.
#include <iostream>
#include <memory>

#include "agent/cli/commands.h"
#include "agent/llm/provider.h"
#include "agent/scaffold/run_config.h"
#include "agent/scaffold/turn_loop.h"

namespace kloop::cli {

Runner add_run_command(CLI::App& app, const GlobalOptions& global) {
  struct State {
    std::string config;
    std::string name;
    std::string runs_dir;
    bool check = false;
    bool no_provider_check = false;
  };
  auto st = std::make_shared<State>();
  app.add_option("config", st->config, "experiment config (YAML), e.g. configs/demo.yaml")->required()->check(CLI::ExistingFile);
  app.add_option("--name", st->name, "run name (default: the config's name); a run with this name resumes");
  app.add_option("--runs-dir", st->runs_dir, "where run folders go (default: the config's runs_dir)");
  app.add_flag("--check", st->check,
               "check the config, problems, prompts, device, provider and run folder, and print the requests and "
               "the cost ceiling; sends nothing");
  app.add_flag("--no-provider-check", st->no_provider_check,
               "do not ask the provider for its model list before the first request (servers without one)");
  return [st, &global]() {
    RunConfig config = load_run_config(st->config);
    if (!st->name.empty()) config.name = st->name;
    if (!st->runs_dir.empty()) config.runs_dir = st->runs_dir;
    if (global.problems_dir_set) config.problems_dir = global.problems_dir;
    std::unique_ptr<LlmProvider> provider = make_provider(config.provider);
    if (st->check) {
      TurnLoop loop(config, *provider, std::cerr);
      loop.set_provider_check(!st->no_provider_check);
      return loop.check(std::cout);
    }
    std::cerr << "kloop: run '" << config.name << "' with " << provider->describe() << ", scaffold "
              << config.scaffold.kind << " (" << config.scaffold.samples << " sample(s) x " << config.scaffold.turns
              << " turn(s)), protocol " << config.protocol << " on " << config.device << "\n";
    TurnLoop loop(config, *provider, std::cout);
    loop.set_provider_check(!st->no_provider_check);
    LoopSummary summary = loop.run();
    std::cout << format_summary(summary);
    if (!summary.fatal_error.empty()) return 2;
    return summary.chains_incomplete ? 1 : 0;
  };
}

}  // namespace kloop::cli
