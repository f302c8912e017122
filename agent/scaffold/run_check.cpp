// `kloop run --check` (TurnLoop::check): what a run would do, sending
// nothing and making no folder.
#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "agent/scaffold/redaction.h"
#include "agent/scaffold/run_baselines.h"
#include "agent/scaffold/stage_journal.h"
#include "agent/scaffold/turn_loop.h"
#include "agent/scaffold/turn_loop_parts.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;

struct Checker {
  std::ostream& out;
  int problems = 0;
  void bad(const std::string& what, const std::string& why) {
    out << "  " << what << ": FAILED: " << why << "\n";
    ++problems;
  }
};

// The prompts rendered for the first problem; their length in characters.
std::size_t check_prompts(Checker& c, const PromptSettings& settings, const ProblemSpec& first, const Redactor& redactor) {
  try {
    PromptBuilder prompts(settings);
    const std::string system = prompts.system();
    const std::string task = prompts.task(first);
    const std::size_t chars = system.size() + task.size();
    c.out << "  prompts: rendered for " << first.name << ": " << system.size() << " + " << task.size()
          << " characters (about " << (chars + 3) / 4 << " tokens); the task begins:\n";
    std::istringstream lines(redactor.redact(task));
    std::string line;
    for (int n = 0; n < 4 && std::getline(lines, line); ++n) c.out << "    | " << line.substr(0, 96) << "\n";
    return chars;
  } catch (const std::exception& e) {
    c.bad("prompts", e.what());
    return 0;
  }
}

void check_devices(Checker& c, const RunConfig& config, const EvalOptions& base) {
  try {
    const std::vector<std::string> devices = evaluation_devices(config);
    c.out << "  device: " << config.device;
    if (devices.size() > 1 || devices.front() != config.device) {
      c.out << " (" << devices.size() << " evaluation queue(s):";
      for (const auto& d : devices) c.out << " " << d;
      c.out << ")";
    }
    for (const auto& d : devices) {
      Builder builder(BuilderConfig::from_environment());
      EvalOptions options = base;
      options.device = d;
      Evaluator evaluator(builder, options);
      if (!builder.config().cuda_arch.empty()) c.out << (d == devices.front() ? " " : ", ") << d << ": " << builder.config().cuda_arch;
    }
    c.out << " usable by this build; protocol " << config.protocol << ", precision " << config.precision << ", isolation "
          << config.isolation << "\n";
  } catch (const std::exception& e) {
    c.bad("device", e.what());
  }
}

// The baselines beside the protocol's: a torch.compile one needs a python3
// with torch >= 2.0, asked here as the run itself would.
void check_baselines(Checker& c, const RunConfig& config) {
  if (config.baselines.empty()) return;
  std::string list;
  for (const auto& b : config.baselines) list += (list.empty() ? "" : ", ") + b;
  CompileBaselineOptions options;
  options.upstream_root = config.upstream;
  options.python = config.python;
  if (const std::string why = CompileBaselines(config.baselines, options).unavailable(); !why.empty()) {
    c.bad("evaluation.baselines", why);
    return;
  }
  c.out << "  baselines: the protocol's, and " << list << "\n";
}

void check_provider(Checker& c, LlmProvider& provider, bool probe_it) {
  if (!probe_it) {
    c.out << "  provider: " << provider.describe() << " (not contacted: --no-provider-check)\n";
    return;
  }
  const LlmProvider::Probe probe = provider.probe();
  if (!probe.ok) {
    c.bad("provider", probe.what);
  } else {
    c.out << "  provider: " << provider.describe() << ": " << probe.what << "\n";
  }
}

// What a run would still ask for: the chains' missing turns, less the
// attempts whose answer the folder holds (evaluated without a request).
struct Requests {
  long long requests = 0, resumed = 0, answered = 0;
  double input_tokens = 0, output_tokens = 0;
};
Requests count_requests(const RunConfig& config, const std::vector<ProblemSpec>& specs, RunStore* store,
                        std::size_t prompt_chars) {
  std::map<std::pair<std::string, int>, std::vector<AttemptRecord>> stored;
  std::optional<StageJournal> journal;
  if (store) {
    for (auto& r : store->load_results()) stored[{r.problem, r.sample}].push_back(r);
    journal.emplace(*store);
  }
  Requests r;
  const long long answer = config.provider.max_tokens.value_or(0);
  const long long billed = max_billed_output_tokens(config.provider).value_or(0);
  const double turn_tokens = static_cast<double>(answer) + static_cast<double>(config.prompts.max_feedback_chars) / 4;
  for (const auto& spec : specs) {
    for (int s = 0; s < config.scaffold.samples; ++s) {
      const StoredChain so_far = stored_chain(stored[{spec.name, s}]);
      r.resumed += so_far.turns;
      if (so_far.stopped) continue;
      for (int t = so_far.turns + 1; t <= config.scaffold.turns; ++t) {
        const Stage reached = journal ? journal->stored({spec.name, s, t}).reached : Stage::kNone;
        if (static_cast<int>(reached) >= static_cast<int>(Stage::kAnswered)) {
          ++r.answered;
          continue;
        }
        ++r.requests;
        const int earlier = config.scaffold.context == "full" ? t - 1 : (t > 1 ? 1 : 0);
        r.input_tokens += static_cast<double>(prompt_chars) / 4 + earlier * turn_tokens;
        r.output_tokens += static_cast<double>(billed);
      }
    }
  }
  return r;
}

// The ceiling in dollars: none without max_tokens or prices.
std::optional<double> cost_ceiling(const RunConfig& config, const Requests& r) {
  const TokenPrices& price = config.provider.prices;
  if (!max_billed_output_tokens(config.provider) || (price.input == 0 && price.output == 0)) return std::nullopt;
  return (r.input_tokens * price.input + r.output_tokens * price.output) / 1e6;
}

void print_cost_ceiling(Checker& c, const RunConfig& config, const Requests& r) {
  const TokenPrices& price = config.provider.prices;
  const std::optional<long long> billed = max_billed_output_tokens(config.provider);
  if (!billed) {
    c.out << "  cost ceiling: none without provider.max_tokens (an answer's length is then the provider's limit)\n";
    return;
  }
  const std::string thinking =
      *billed > config.provider.max_tokens.value_or(0)
          ? fmt::format(" ({} a request: the answer's budget plus the thinking budget)", *billed)
          : "";
  if (price.input == 0 && price.output == 0) {
    c.out << "  cost ceiling: no provider.prices given (about " << static_cast<long long>(r.input_tokens)
          << " input and at most " << static_cast<long long>(r.output_tokens) << " output tokens" << thinking << ")\n";
  } else {
    c.out << fmt::format(
        "  cost ceiling: ${:.2f} (about {} input tokens at ${:.2f}/M, at most {} output tokens{} at ${:.2f}/M; "
        "before any prompt-cache discount)\n",
        (r.input_tokens * price.input + r.output_tokens * price.output) / 1e6, static_cast<long long>(r.input_tokens),
        price.input, static_cast<long long>(r.output_tokens), thinking, price.output);
  }
  if (config.provider.resend_broken_streams > 0 && config.provider.kind != "command" && config.provider.kind != "replay") {
    c.out << "  resends: a request whose answer breaks after HTTP 200 is sent again up to "
          << config.provider.resend_broken_streams
          << " time(s) (provider.retry.resend_broken_streams); each resend may be billed up to this again\n";
  }
}

}  // namespace

int TurnLoop::check(std::ostream& out) {
  Checker c{out};
  check_totals_ = {};
  out << "kloop run --check " << config_.path << " (run '" << config_.name << "' in " << config_.runs_dir << ")\n";
  std::vector<std::string> excluded;
  std::vector<ProblemSpec> specs;
  try {
    specs = select_problems(&excluded);
  } catch (const std::exception& e) {
    c.bad("problems", e.what());
    return 2;
  }
  out << "  problems: " << specs.size();
  for (std::size_t i = 0; i < specs.size() && i < 8; ++i) out << (i ? ", " : " (") << specs[i].name;
  out << (specs.size() > 8 ? ", ...)" : ")") << "\n";
  if (!excluded.empty()) out << "  " << excluded_note(excluded, config_.protocol, config_.precision) << "\n";
  const Redactor redactor = feedback_redactor(provider_);
  const std::size_t prompt_chars = check_prompts(c, config_.prompts, specs.front(), redactor);
  check_devices(c, config_, eval_options());
  check_baselines(c, config_);
  check_provider(c, provider_, provider_check_);
  std::optional<RunStore> store;
  if (fs::exists(fs::path(config_.runs_dir) / config_.name / "config.json")) {
    store.emplace(config_.runs_dir, config_.name);
    if (const std::string conflict = store->config_conflict(resolved_config(redactor), kIdentityFields); !conflict.empty()) {
      c.bad("run folder", conflict);
    }
  }
  const Requests r = count_requests(config_, specs, store ? &*store : nullptr, prompt_chars);
  out << "  requests: " << r.requests << " to send (" << specs.size() << " problem(s) x " << config_.scaffold.samples
      << " sample(s) x " << config_.scaffold.turns << " turn(s)";
  if (r.resumed) out << ", less " << r.resumed << " attempt(s) already stored";
  if (r.answered) out << ", less " << r.answered << " answer(s) stored and not yet evaluated";
  out << ")\n";
  print_cost_ceiling(c, config_, r);
  check_totals_ = {static_cast<long long>(specs.size()), r.requests, r.input_tokens, r.output_tokens,
                   cost_ceiling(config_, r), c.problems == 0};
  out << (c.problems ? "not ready: " + std::to_string(c.problems) + " problem(s) above\n"
                     : "ready: nothing was sent and no run folder was made\n");
  return c.problems ? 2 : 0;
}

}  // namespace kloop
