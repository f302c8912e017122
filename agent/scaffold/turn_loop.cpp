// The run: its problems, its folder, and the attempts carried through their
// stages by the scheduler (turn_loop.h).
#include "agent/scaffold/turn_loop.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "agent/prompt/prompt_builder.h"
#include "agent/scaffold/attempt_stages.h"
#include "agent/scaffold/planners.h"
#include "agent/scaffold/redaction.h"
#include "agent/scaffold/run_driver.h"
#include "agent/scaffold/scheduler.h"
#include "agent/scaffold/stage_journal.h"
#include "agent/scaffold/status_line.h"
#include "agent/scaffold/turn_loop_parts.h"
#include "evaluator/build/content_hash.h"
#include "evaluator/build/environment.h"
#include "evaluator/evaluate.h"
#include "evaluator/problem/registry.h"
#include "evaluator/protocol.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The prompt templates' contents: a run resumed or extended with other
// prompts would mix two experiments.
std::string prompts_digest(const std::string& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec)) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  ContentHash h;
  for (const auto& f : files) {
    h.add(f.filename().string());
    h.add_file(f.string());
  }
  return h.hex();
}

}  // namespace

StoredChain stored_chain(std::vector<AttemptRecord>& records) {
  std::sort(records.begin(), records.end(), [](const auto& a, const auto& b) { return a.turn < b.turn; });
  StoredChain c;
  for (const auto& r : records) {
    if (r.turn != c.turns + 1) break;  // a gap: redone from there
    ++c.turns;
    c.stopped = c.stopped || r.ends_chain_for_good();
  }
  return c;
}

TurnLoop::TurnLoop(RunConfig config, LlmProvider& provider, std::ostream& progress)
    : config_(std::move(config)), provider_(provider), progress_(progress) {}

// What changes earlier attempts; more turns, samples or problems extend a
// run instead.
const std::vector<std::string> kIdentityFields = {"model_identity",   "protocol",          "precision",        "device",
                                                  "seed",             "scaffold.kind",     "scaffold.feedback",
                                                  "scaffold.context", "scaffold.keep_best", "prompts_digest",
                                                  // a search's shape (more rounds extend it; these change it)
                                                  "scaffold.width", "scaffold.expand", "scaffold.population",
                                                  "scaffold.parents", "scaffold.crossover", "scaffold.mutate_prompt",
                                                  "scaffold.select"};

std::vector<ProblemSpec> TurnLoop::select_problems(std::vector<std::string>* excluded) const {
  ProblemRegistry registry(config_.problems_dir);
  std::vector<ProblemSpec> specs;
  if (!config_.problems.names.empty()) {
    for (const auto& n : config_.problems.names) {
      specs.push_back(registry.load(n));
      if (!config_.problems.suite.empty() && specs.back().suite != config_.problems.suite) {
        throw std::invalid_argument(config_.path + ": field 'problems.names': '" + n + "' is in suite '" +
                                    specs.back().suite + "', not in problems.suite '" + config_.problems.suite +
                                    "'; fix the suite or leave it out");
      }
    }
  } else if (!config_.problems.select.empty()) {
    try {
      for (const auto& e : registry.select_numbered(config_.problems.select, config_.problems.suite)) {
        specs.push_back(registry.load(e));
      }
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(config_.path + ": field 'problems.select': " + e.what());
    }
  } else {
    for (const auto& e : registry.list(config_.problems.suite, config_.problems.level)) specs.push_back(registry.load(e));
  }
  if (specs.empty()) throw std::invalid_argument(config_.path + ": field 'problems': selects no problem");
  // The run's precision: the prompt shows the inputs in it, the evaluator runs them in it.
  const Precision precision = parse_precision(config_.precision).value_or(Precision::kFp32);
  // Tasks the protocol leaves out at that precision: never sent to the
  // model, not counted (as the protocol defines its denominator).
  for (auto it = specs.begin(); it != specs.end();) {
    if (excluded_by_protocol(*it, config_.protocol, precision)) {
      excluded->push_back(it->name);
      it = specs.erase(it);
    } else {
      ++it;
    }
  }
  if (specs.empty()) {
    throw std::invalid_argument(config_.path + ": field 'problems': every selected problem is excluded by the " +
                                config_.protocol + " protocol at " + precision_name(precision));
  }
  for (auto& s : specs) s = spec_at_precision(s, precision);
  if (shard_) {
    std::vector<ProblemSpec> mine;
    for (std::size_t i = 0; i < specs.size(); ++i) {
      if (shard_->holds(i)) mine.push_back(std::move(specs[i]));
    }
    return mine;
  }
  return specs;
}

std::vector<ProblemSpec> TurnLoop::selected_problems() const {
  std::vector<std::string> excluded;
  return select_problems(&excluded);
}

std::string TurnLoop::prepare_run_folder() {
  std::vector<std::string> excluded;
  const std::vector<ProblemSpec> specs = select_problems(&excluded);
  PromptBuilder prompts(config_.prompts);
  if (!specs.empty()) (void)prompts.task(specs.front());  // the templates render
  RunStore store(config_.runs_dir, config_.name);
  store.write_config(resolved_config(feedback_redactor(provider_)), kIdentityFields);
  return store.path();
}

std::vector<int> TurnLoop::shards_with_work(int count) const {
  std::vector<std::string> excluded;
  TurnLoop whole(config_, provider_, progress_);
  const std::vector<ProblemSpec> specs = whole.select_problems(&excluded);
  std::map<std::pair<std::string, int>, std::vector<AttemptRecord>> stored;
  const fs::path run_path = fs::path(config_.runs_dir) / config_.name;
  if (fs::exists(run_path / "config.json")) {
    const RunStore store(config_.runs_dir, config_.name);
    for (auto& r : store.load_results()) stored[{r.problem, r.sample}].push_back(std::move(r));
  }
  std::set<int> pending;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    for (int s = 0; s < config_.scaffold.samples; ++s) {
      const StoredChain c = stored_chain(stored[{specs[i].name, s}]);
      if (!c.stopped && c.turns < config_.scaffold.turns) pending.insert(static_cast<int>(i % static_cast<std::size_t>(count)));
    }
  }
  return {pending.begin(), pending.end()};
}

EvalOptions TurnLoop::eval_options() const {
  EvalOptions eval_opts;
  eval_opts.device = config_.device;
  eval_opts.protocol = canonical_protocol_name(config_.protocol);
  eval_opts.precision = *parse_precision(config_.precision);
  eval_opts.seed = config_.seed;
  eval_opts.run_timeout = std::chrono::milliseconds(static_cast<long long>(config_.eval_timeout_s * 1000));
  eval_opts.threads = config_.threads;
  eval_opts.isolation = *parse_isolation(config_.isolation);
  eval_opts.candidate_format = config_.candidate_format;
  eval_opts.activity_audit = config_.activity_audit;
  if (config_.max_timing_seconds > 0) eval_opts.max_timing_seconds = config_.max_timing_seconds;
  // Counters cost a replay phase per candidate: only when the model sees them.
  eval_opts.profile = config_.scaffold.feedback.count(FeedbackKind::kProfiler) > 0 && config_.device != "cpu";
  return eval_opts;
}

json TurnLoop::resolved_config(const Redactor& redactor) const {
  json resolved = config_.to_json();
  resolved["model_identity"] = config_.provider.kind + ":" + config_.provider.model;
  resolved["prompts_digest"] = prompts_digest(config_.prompts.dir);
  // What this driver runs with (the latest one's, on a resumed run).
  resolved["environment"] = {{"build", build_environment()}, {"machine", machine_environment(config_.device)},
                             {"started_at", utc_timestamp()}};
  // Redacted like everything else in the folder (extra_body, stop words).
  return redactor.redact_json(resolved);
}

std::string excluded_note(const std::vector<std::string>& excluded, const std::string& protocol,
                          const std::string& precision) {
  std::string list;
  for (const auto& n : excluded) list += (list.empty() ? "" : ", ") + n;
  return std::to_string(excluded.size()) + " problem(s) excluded by the " + protocol + " protocol" +
         (precision.empty() || precision == "fp32" ? "" : " at " + precision) + ", left out of the run: " + list;
}

// The evaluation queues: one evaluator (and its workers) per device, and
// the configurations candidates are built for (one per GPU architecture).
struct TurnLoop::Evaluation {
  std::vector<std::string> devices;
  std::vector<std::unique_ptr<Builder>> builders;
  std::vector<std::unique_ptr<Evaluator>> evaluators;
  std::vector<BuilderConfig> build_configs;
};

TurnLoop::Evaluation TurnLoop::prepare_evaluation() const {
  Evaluation e;
  e.devices = evaluation_devices(config_);
  for (const auto& device : e.devices) {
    EvalOptions options = eval_options();
    options.device = device;
    // CPU queues side by side share the cores.
    if (device == "cpu" && e.devices.size() > 1 && options.threads == 0) {
      options.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency() / e.devices.size()));
    }
    e.builders.push_back(std::make_unique<Builder>(BuilderConfig::from_environment()));
    e.evaluators.push_back(std::make_unique<Evaluator>(*e.builders.back(), options));
  }
  for (const auto& b : e.builders) {
    const bool seen = std::any_of(e.build_configs.begin(), e.build_configs.end(),
                                  [&](const BuilderConfig& c) { return c.cuda_arch == b->config().cuda_arch; });
    if (!seen) e.build_configs.push_back(b->config());
  }
  return e;
}

namespace {

// Every problem's attempts the run folder holds with a verdict.
std::vector<ProblemState> resume_problems(const std::vector<ProblemSpec>& specs, const RunStore& store,
                                          const std::map<std::string, std::string>& tasks, const RunConfig& config,
                                          const std::string& extension) {
  std::map<std::string, std::vector<AttemptRecord>> by_problem;
  for (auto& r : store.load_results()) by_problem[r.problem].push_back(std::move(r));
  std::vector<ProblemState> problems;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    ProblemState p;
    p.spec = &specs[i];
    p.index = static_cast<int>(i);
    p.progress.task = tasks.at(specs[i].name);
    add_recorded_attempts(p.progress, by_problem[specs[i].name], store.path(), extension, config.scaffold);
    problems.push_back(std::move(p));
  }
  return problems;
}

// The references of the problems with work left are built now, beside the
// first requests, not when their first candidate comes to be evaluated
// (the build cache's lock makes an evaluation that needs one wait for it).
void build_references(Scheduler& scheduler, const std::vector<const ProblemSpec*>& specs,
                      const std::vector<BuilderConfig>& configs, BuildTarget target) {
  for (const ProblemSpec* spec : specs) {
    scheduler.submit_background([&scheduler, spec, &configs, target] {
      for (const auto& c : configs) {
        try {
          // The slot before the build's cache lock: whoever waits on that
          // lock waits for a build that already has its core.
          const CompilePool::Slot slot = scheduler.compile_slot();
          Builder(c).build(spec->reference_path, ModuleRole::kReference, target);
        } catch (const std::exception&) {
          // The evaluation builds it again and says what went wrong.
        }
      }
    });
  }
}

// Best so far, per turn, over all samples (what fast_p at turn t reports),
// from the store: what this driver and earlier ones made.
std::vector<TurnSummary> turns_so_far(const RunStore& store, const std::vector<ProblemSpec>& specs,
                                      const ScaffoldConfig& scaffold) {
  std::map<std::string, std::vector<AttemptRecord>> by_problem;
  for (auto& r : store.load_results()) by_problem[r.problem].push_back(std::move(r));
  std::vector<TurnSummary> out;
  for (int t = 1; t <= scaffold.turns; ++t) {
    TurnSummary ts;
    ts.turn = t;
    for (const auto& spec : specs) {
      bool correct = false;
      double best = 0;
      for (const auto& r : by_problem[spec.name]) {
        if (r.turn > t || r.sample >= scaffold.samples || r.outcome != Outcome::kCorrect) continue;
        correct = true;
        if (r.speedup) best = std::max(best, *r.speedup);
      }
      ts.correct += correct ? 1 : 0;
      ts.fast_1 += (correct && best > 1.0) ? 1 : 0;
    }
    out.push_back(ts);
  }
  return out;
}

// What the invocation did, from its tally and its scheduler.
void add_tally(LoopSummary& s, RunTally& tally, const Scheduler& scheduler) {
  std::lock_guard<std::mutex> lock(tally.mutex);
  s.attempts_run = tally.attempts_run;
  s.chains_incomplete = tally.attempts_failed;
  s.cost_usd = tally.cost_usd;
  s.tokens = tally.tokens;
  s.errors = tally.errors;
  s.fatal_error = tally.fatal_error;
  s.answers_kept = tally.answers_kept;
  s.requests_cut = tally.requests_cut;
  s.transport_faults = tally.transport_faults;
  s.transport_fault_cost_usd = tally.transport_fault_cost_usd;
  s.kloop_errors = tally.kloop_errors;
  if (scheduler.stopped() && tally.fatal_error.empty()) s.stopped = scheduler.stop_reason();
  s.queues = scheduler.device_figures();
  s.compiles = scheduler.compile_figures();
  s.seconds = scheduler.device_seconds();
}

// Enough attempts at once that while `concurrency` wait for the model,
// every device still has one to evaluate; the references built beside them.
Scheduler::Limits scheduler_limits(const RunConfig& config, const std::vector<std::string>& devices,
                                   std::size_t references) {
  Scheduler::Limits limits;
  limits.workers = config.parallel_chains > 0
                       ? config.parallel_chains
                       : std::max(1, config.provider.concurrency) + static_cast<int>(devices.size()) - 1;
  limits.background_workers = std::min<int>(static_cast<int>(references),
                                            std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 4));
  limits.requests = std::max(1, config.provider.concurrency);
  limits.compile_slots = config.compile_jobs > 0 ? config.compile_jobs : available_cores();
  limits.devices = devices;
  return limits;
}

}  // namespace

LoopSummary TurnLoop::run() {
  // Everything that can be wrong with the inputs fails here, before any LLM call.
  std::vector<std::string> excluded;
  std::vector<ProblemSpec> specs = select_problems(&excluded);
  if (!excluded.empty()) progress_ << "kloop: " << excluded_note(excluded, config_.protocol, config_.precision) << "\n";
  PromptBuilder prompts(config_.prompts);
  // Everything that goes back to the model or into the run folder from an
  // evaluation passes through this: the provider's key and header values
  // and the environment's credentials never reach a prompt.
  const Redactor redactor = feedback_redactor(provider_);
  std::map<std::string, std::string> tasks;
  for (const auto& s : specs) tasks[s.name] = prompts.task(s);
  // The evolve prompt's files render now, not after the first generation.
  if (config_.scaffold.kind == "evolve") {
    (void)prompts.evolve("", {{"1", "correct", 1.0, "", ""}}, config_.scaffold.crossover, config_.scaffold.mutate_prompt);
  }
  // The devices and the worker are checked here, before the run folder or
  // any request exists.
  Evaluation evaluation = prepare_evaluation();
  // The torch.compile baselines the run asks for: checked here, before any
  // request, and a run that cannot have them does not start.
  CompileBaselineOptions compile_options;
  compile_options.upstream_root = config_.upstream;
  compile_options.python = config_.python;
  CompileBaselines compile_baselines(config_.baselines, compile_options);
  if (const std::string why = compile_baselines.unavailable(); !why.empty()) {
    throw std::invalid_argument(config_.path + ": field 'evaluation.baselines': " + why +
                                " (no request was sent; leave the compile-* baselines out, or set evaluation.python "
                                "to a python3 with torch >= 2.0)");
  }
  LoopSummary summary;
  summary.problems = static_cast<int>(specs.size());
  summary.excluded = excluded;
  if (provider_check_) {
    const LlmProvider::Probe probe = provider_.probe();
    if (probe.checked) progress_ << "kloop: provider: " << probe.what << "\n";
    if (!probe.ok) {
      summary.fatal_error = "provider check: " + probe.what + " (no request was sent; --no-provider-check skips this)";
      return summary;
    }
  }

  RunStore store(config_.runs_dir, config_.name);
  const RunLock run_lock(store.path(), progress_, shard_ ? std::optional<int>(shard_->index) : std::nullopt);
  store.write_config(resolved_config(redactor), kIdentityFields);
  if (shard_) {
    store.check_shard_count(shard_->count);
    store.set_shard(shard_->index);
  }
  summary.run_path = store.path();
  if (shard_) summary.shard = std::to_string(shard_->index) + "/" + std::to_string(shard_->count);
  StageJournal journal(store);
  const std::unique_ptr<Planner> planner = make_planner(config_.scaffold, prompts);
  std::vector<ProblemState> problems = resume_problems(specs, store, tasks, config_, candidate_extension());
  int total_attempts = 0;
  std::vector<const ProblemSpec*> to_build;
  for (const ProblemState& p : problems) {
    summary.attempts_resumed += static_cast<int>(p.progress.done.size());
    const int left = planner->attempts_left(p.progress);
    total_attempts += left;
    if (left > 0) to_build.push_back(p.spec);
  }
  summary.chains = static_cast<int>(specs.size()) * config_.scaffold.samples;

  const Scheduler::Limits limits = scheduler_limits(config_, evaluation.devices, to_build.size());
  StatusLine status(total_attempts);
  RunTally tally;
  {
    Scheduler scheduler(limits);
    scheduler.follow_interrupts(interrupts_, [&](const std::string& note) { status.print(std::cerr, note + "\n"); });
    build_references(scheduler, to_build, evaluation.build_configs,
                     config_.device == "cpu" ? BuildTarget::kCpu : BuildTarget::kCuda);
    StageContext context{config_,  provider_, prompts,   redactor,       redactor.redact(prompts.system()),
                         store,    journal,   scheduler, evaluation.devices, evaluation.evaluators,
                         evaluation.build_configs, status, progress_, tally, total_attempts, &compile_baselines};
    AttemptStages stages(context);
    RunDriver driver(context, stages, *planner, problems, config_.scaffold.kind == "beam" || config_.scaffold.kind == "evolve");
    driver.start();
    scheduler.wait();
    add_tally(summary, tally, scheduler);
  }
  summary.by_turn = turns_so_far(store, specs, config_.scaffold);
  return summary;
}

}  // namespace kloop
