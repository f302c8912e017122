// The scaffold loop: chains over (problem, sample), turns within a chain.
#include "agent/scaffold/turn_loop.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "agent/extract/code_extract.h"
#include "agent/prompt/prompt_builder.h"
#include "agent/scaffold/compile_pool.h"
#include "agent/scaffold/redaction.h"
#include "agent/scaffold/search.h"
#include "agent/scaffold/status_line.h"
#include "evaluator/build/content_hash.h"
#include "evaluator/build/environment.h"
#include "evaluator/evaluate.h"
#include "evaluator/problem/registry.h"
#include "evaluator/protocol.h"

namespace kloop {
namespace {

// Every provider call of an attempt, one JSON line each (calls.jsonl beside
// response.txt), failed calls included.
void write_calls(const std::string& dir, const nlohmann::json& calls) {
  if (!calls.is_array() || calls.empty()) return;
  std::string text;
  for (const auto& c : calls) text += c.dump() + "\n";
  RunStore::write_text(dir + "/calls.jsonl", text);
}

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct PastTurn {
  int turn = 0;
  std::string response;
  std::string feedback;
  Outcome outcome = Outcome::kRuntimeError;
  std::optional<double> speedup;
};

struct Chain {
  const ProblemSpec* spec = nullptr;
  int sample = 0;
  std::vector<PastTurn> history;
  bool done = false;
};

std::string read_or_empty(const fs::path& p) {
  try {
    return read_file(p.string());
  } catch (const std::exception&) {
    return "";
  }
}

// The conversation for the next turn under the scaffold's context strategy.
std::vector<ChatMessage> conversation(const std::string& task, const std::vector<PastTurn>& history,
                                      const ScaffoldConfig& sc) {
  std::vector<ChatMessage> m = {{"user", task}};
  if (history.empty()) return m;
  if (sc.context == "full") {
    for (const auto& h : history) {
      m.push_back({"assistant", h.response});
      m.push_back({"user", h.feedback});
    }
    return m;
  }
  const PastTurn* shown = &history.back();
  if (sc.keep_best) {
    for (const auto& h : history) {
      if (h.outcome == Outcome::kCorrect && h.speedup &&
          (!shown->speedup || shown->outcome != Outcome::kCorrect || *h.speedup > *shown->speedup)) {
        shown = &h;
      }
    }
  }
  m.push_back({"assistant", shown->response});
  m.push_back({"user", shown->feedback});
  return m;
}

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

// How far a chain got in the run store: its turns without a gap from turn
// 1, and whether it ended for good (early stop, refusal). Sorts `records`.
struct StoredChain {
  int turns = 0;
  bool stopped = false;
};
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

}  // namespace

TurnLoop::TurnLoop(RunConfig config, LlmProvider& provider, std::ostream& progress)
    : config_(std::move(config)), provider_(provider), progress_(progress) {}

// What changes earlier attempts; more turns, samples or problems extend a
// run instead.
const std::vector<std::string> kIdentityFields = {"model_identity",   "protocol",          "device",
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
    for (const auto& n : config_.problems.names) specs.push_back(registry.load(n));
  } else {
    for (const auto& e : registry.list(config_.problems.suite, config_.problems.level)) specs.push_back(registry.load(e));
  }
  if (specs.empty()) throw std::invalid_argument(config_.path + ": field 'problems': selects no problem");
  // Tasks the protocol leaves out: never sent to the model, not counted (as
  // the protocol defines its denominator).
  for (auto it = specs.begin(); it != specs.end();) {
    if (excluded_by_protocol(*it, config_.protocol)) {
      excluded->push_back(it->name);
      it = specs.erase(it);
    } else {
      ++it;
    }
  }
  if (specs.empty()) {
    throw std::invalid_argument(config_.path + ": field 'problems': every selected problem is excluded by the " +
                                config_.protocol + " protocol");
  }
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
  eval_opts.protocol = config_.protocol;
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

static std::string excluded_note(const std::vector<std::string>& excluded, const std::string& protocol) {
  std::string list;
  for (const auto& n : excluded) list += (list.empty() ? "" : ", ") + n;
  return std::to_string(excluded.size()) + " problem(s) excluded by the " + protocol +
         " protocol, left out of the run: " + list;
}

LoopSummary TurnLoop::run() {
  // Everything that can be wrong with the inputs fails here, before any LLM call.
  std::vector<std::string> excluded;
  std::vector<ProblemSpec> specs = select_problems(&excluded);
  if (!excluded.empty()) progress_ << "kloop: " << excluded_note(excluded, config_.protocol) << "\n";
  PromptBuilder prompts(config_.prompts);
  // Everything that goes back to the model or into the run folder from an
  // evaluation passes through this: the provider's key and header values
  // and the environment's credentials never reach a prompt.
  const Redactor redactor = feedback_redactor(provider_);
  const std::string system = redactor.redact(prompts.system());
  std::map<std::string, std::string> tasks;
  for (const auto& s : specs) tasks[s.name] = prompts.task(s);
  // The evolve prompt's files render now, not after the first generation.
  if (config_.scaffold.kind == "evolve") {
    (void)prompts.evolve("", {{"1", "correct", 1.0, "", ""}}, config_.scaffold.crossover, config_.scaffold.mutate_prompt);
  }

  // The devices and the worker are checked here, before the run folder or
  // any request exists. One evaluator (and its workers) per device.
  const std::vector<std::string> devices = evaluation_devices(config_);
  std::vector<std::unique_ptr<Builder>> eval_builders;
  std::vector<std::unique_ptr<Evaluator>> evaluators;
  for (const auto& device : devices) {
    EvalOptions options = eval_options();
    options.device = device;
    // CPU queues side by side share the cores.
    if (device == "cpu" && devices.size() > 1 && options.threads == 0) {
      options.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency() / devices.size()));
    }
    eval_builders.push_back(std::make_unique<Builder>(BuilderConfig::from_environment()));
    evaluators.push_back(std::make_unique<Evaluator>(*eval_builders.back(), options));
  }
  // The configurations the candidates are built for (one per distinct GPU
  // architecture), so the build each evaluation makes finds the cache filled.
  std::vector<BuilderConfig> build_configs;
  for (const auto& b : eval_builders) {
    const bool seen = std::any_of(build_configs.begin(), build_configs.end(),
                                  [&](const BuilderConfig& c) { return c.cuda_arch == b->config().cuda_arch; });
    if (!seen) build_configs.push_back(b->config());
  }
  DeviceQueues queues(devices);
  if (provider_check_) {
    const LlmProvider::Probe probe = provider_.probe();
    if (probe.checked) progress_ << "kloop: provider: " << probe.what << "\n";
    if (!probe.ok) {
      LoopSummary stopped;
      stopped.problems = static_cast<int>(specs.size());
      stopped.excluded = excluded;
      stopped.fatal_error = "provider check: " + probe.what + " (no request was sent; --no-provider-check skips this)";
      return stopped;
    }
  }

  RunStore store(config_.runs_dir, config_.name);
  const RunLock run_lock(store.path(), progress_, shard_ ? std::optional<int>(shard_->index) : std::nullopt);
  store.write_config(resolved_config(redactor), kIdentityFields);
  if (shard_) {
    store.check_shard_count(shard_->count);
    store.set_shard(shard_->index);
  }

  LoopSummary summary;
  summary.run_path = store.path();
  if (shard_) summary.shard = std::to_string(shard_->index) + "/" + std::to_string(shard_->count);
  summary.problems = static_cast<int>(specs.size());
  summary.excluded = excluded;

  // Resume: rebuild each chain's history from the run store.
  std::map<std::pair<std::string, int>, std::vector<AttemptRecord>> done;
  for (auto& r : store.load_results()) done[{r.problem, r.sample}].push_back(r);
  std::vector<Chain> chains;
  for (const auto& spec : specs) {
    for (int s = 0; s < config_.scaffold.samples; ++s) {
      Chain c;
      c.spec = &spec;
      c.sample = s;
      auto& recs = done[{spec.name, s}];
      std::sort(recs.begin(), recs.end(), [](const auto& a, const auto& b) { return a.turn < b.turn; });
      for (const auto& r : recs) {
        if (r.turn != static_cast<int>(c.history.size()) + 1) break;  // a gap: redo from there
        fs::path dir = fs::path(store.path()) / r.attempt_dir;
        c.history.push_back({r.turn, read_or_empty(dir / "response.txt"), read_or_empty(dir / "feedback.txt"),
                             r.outcome, r.speedup});
        ++summary.attempts_resumed;
        // A chain that ended on its turn budget goes on when the run now
        // has more turns; one that stopped early stays stopped.
        if (r.ends_chain_for_good()) c.done = true;
      }
      if (static_cast<int>(c.history.size()) >= config_.scaffold.turns) c.done = true;
      chains.push_back(std::move(c));
    }
  }
  summary.chains = static_cast<int>(chains.size());
  // A search's attempts so far, per problem (its rounds are planned from them).
  const bool search = config_.scaffold.kind == "beam" || config_.scaffold.kind == "evolve";
  std::vector<std::vector<SearchNode>> search_nodes(specs.size());
  if (search) {
    for (std::size_t i = 0; i < specs.size(); ++i) {
      for (int sample = 0; sample < config_.scaffold.samples; ++sample) {
        for (const auto& r : done[{specs[i].name, sample}]) {
          if (r.turn > config_.scaffold.turns) continue;
          const fs::path dir = fs::path(store.path()) / r.attempt_dir;
          std::string code = read_or_empty(dir / ("candidate" + candidate_extension()));
          search_nodes[i].push_back({{r.sample, r.turn}, r.outcome, r.speedup, read_or_empty(dir / "response.txt"),
                                     std::move(code), read_or_empty(dir / "feedback.txt"), r.parents});
        }
      }
    }
  }

  // The references of the problems with work left are built now, beside the
  // first requests, not when their first candidate comes to be evaluated
  // (the build cache's lock makes an evaluation that needs one wait for it).
  std::vector<const ProblemSpec*> to_build;
  const std::size_t per_problem = static_cast<std::size_t>(config_.scaffold.samples * config_.scaffold.turns);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const ProblemSpec& spec = specs[i];
    const bool pending = search ? search_nodes[i].size() < per_problem
                                : std::any_of(chains.begin(), chains.end(),
                                              [&](const Chain& c) { return c.spec == &spec && !c.done; });
    if (pending) to_build.push_back(&spec);
  }
  // Every compile of the run holds one of these while it runs.
  CompilePool compile_pool(config_.compile_jobs > 0 ? config_.compile_jobs : available_cores());
  std::atomic<std::size_t> next_reference{0};
  std::atomic<bool> stop_building{false};
  std::vector<std::thread> reference_builders;
  const int reference_threads =
      std::min<int>(static_cast<int>(to_build.size()), std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 4));
  for (int t = 0; t < reference_threads; ++t) {
    reference_builders.emplace_back([&] {
      for (std::size_t i = next_reference++; i < to_build.size() && !stop_building; i = next_reference++) {
        for (const auto& c : build_configs) {
          try {
            // The slot before the build's cache lock: whoever waits on
            // that lock waits for a build that already has its core.
            const CompilePool::Slot slot = compile_pool.acquire();
            Builder(c).build(to_build[i]->reference_path, ModuleRole::kReference,
                             config_.device == "cpu" ? BuildTarget::kCpu : BuildTarget::kCuda);
          } catch (const std::exception&) {
            // The evaluation builds it again and says what went wrong.
          }
        }
      }
    });
  }
  struct JoinAll {
    std::vector<std::thread>& threads;
    std::atomic<bool>& stop;
    ~JoinAll() {
      stop = true;
      for (auto& t : threads) t.join();
    }
  } join_reference_builders{reference_builders, stop_building};

  std::mutex progress_mutex;  // whole lines on the progress stream
  std::mutex summary_mutex;
  std::atomic<bool> fatal{false};
  std::atomic<std::size_t> next{0};
  // Enough chains that while `concurrency` wait for the model, every
  // device still has one to evaluate.
  int workers = config_.parallel_chains > 0 ? config_.parallel_chains
                                            : std::max(1, config_.provider.concurrency) + static_cast<int>(devices.size()) - 1;
  const int search_width = workers;  // a search's attempts of one round at once
  const std::string ext = candidate_extension();
  int total_attempts = 0;
  if (search) {
    for (const auto& nodes : search_nodes) total_attempts += static_cast<int>(per_problem - std::min(per_problem, nodes.size()));
  } else {
    for (const auto& c : chains) total_attempts += c.done ? 0 : config_.scaffold.turns - static_cast<int>(c.history.size());
  }
  std::atomic<int> attempt_counter{0};
  StatusLine status(total_attempts);
  // A phase of one attempt, on the status line while it lasts.
  struct Phase {
    StatusLine& line;
    const char* name;
    Phase(StatusLine& l, const char* n) : line(l), name(n) { line.begin(name); }
    ~Phase() { line.end(name); }
  };

  // One attempt: the request, the answer, its build and its verdict, all
  // stored, the record appended last. nullopt when it could not be made
  // (the provider failed, or kloop did; the summary says why and a rerun
  // makes it again).
  struct Made {
    AttemptRecord rec;
    std::string response;
    std::string feedback;
    std::string code;
  };
  auto make_attempt = [&](const ProblemSpec& spec, int sample, int turn, std::vector<ChatMessage> messages,
                          const std::vector<AttemptRef>& parents, const std::string& step,
                          bool last_turn) -> std::optional<Made> {
    // The evaluators' own configurations (the devices' architectures, the
    // sandbox), so the build that counts finds this one in the cache.
    std::vector<std::unique_ptr<Builder>> prebuilders;
    for (const auto& c : build_configs) prebuilders.push_back(std::make_unique<Builder>(c));
    {
      if (fatal) return std::nullopt;
      const std::string dir = store.attempt_dir(spec.name, sample, turn);
      AttemptRecord rec;
      rec.run = config_.name;
      rec.problem = spec.name;
      rec.level = spec.level;
      rec.sample = sample;
      rec.turn = turn;
      rec.parents = parents;
      rec.step = step;
      rec.protocol = config_.protocol;
      rec.device = config_.device == "cuda" ? devices.front() : config_.device;
      rec.model = config_.provider.model;
      rec.attempt_dir = store.relative_attempt_dir(spec.name, sample, turn);

      GenerationRequest req;
      req.system = system;
      req.messages = std::move(messages);
      // Again at sending: a resumed turn's feedback comes from the run folder.
      for (auto& m : req.messages) m.content = redactor.redact(std::move(m.content));
      req.key = {spec.name, sample, turn};
      json prompt_json = {{"system", req.system}, {"messages", json::array()}};
      for (const auto& m : req.messages) prompt_json["messages"].push_back({{"role", m.role}, {"content", m.content}});
      RunStore::write_text(dir + "/prompt.json", prompt_json.dump(2) + "\n");

      GenerationResult gen;
      // An outcome without an answer to evaluate: the conversation outgrew
      // the context window, or the provider refused. Either ends the chain,
      // stored, so a rerun does not send it again.
      std::optional<Outcome> outcome;
      std::string outcome_message;
      try {
        const Phase waiting(status, "model");
        gen = provider_.generate(req);
        if (!gen.refusal.empty() || (gen.finish_reason == "content_filter" && gen.text.empty())) {
          outcome = Outcome::kRefused;
          outcome_message = "the provider refused: " + (gen.refusal.empty() ? gen.finish_reason : gen.refusal);
        }
      } catch (const ContextOverflowError& e) {
        write_calls(dir, e.calls());
        outcome = Outcome::kContextOverflow;
        outcome_message = e.what();
        gen.finish_reason = "context_overflow";
      } catch (const FatalProviderError& e) {
        write_calls(dir, e.calls());
        fatal = true;
        std::lock_guard<std::mutex> lock(summary_mutex);
        summary.fatal_error = e.what();
        return std::nullopt;
      } catch (const ProviderFailure& e) {
        write_calls(dir, e.calls());
        std::lock_guard<std::mutex> lock(summary_mutex);
        summary.errors.push_back(spec.name + " sample " + std::to_string(sample) + " turn " +
                                 std::to_string(turn) + ": " + e.what());
        ++summary.chains_incomplete;
        return std::nullopt;
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(summary_mutex);
        summary.errors.push_back(spec.name + " sample " + std::to_string(sample) + " turn " +
                                 std::to_string(turn) + ": " + e.what());
        ++summary.chains_incomplete;
        return std::nullopt;
      }
      if (outcome != Outcome::kContextOverflow) {
        write_calls(dir, gen.calls);
        RunStore::write_text(dir + "/response.txt", gen.text);
        if (!gen.reasoning.empty()) RunStore::write_text(dir + "/reasoning.txt", gen.reasoning);
        RunStore::write_text(dir + "/raw_response.json", gen.raw_response.dump(2) + "\n");
      }
      rec.input_tokens = gen.input_tokens;
      rec.output_tokens = gen.output_tokens;
      rec.reasoning_tokens = gen.reasoning_tokens;
      rec.cached_input_tokens = gen.cached_input_tokens;
      rec.cache_write_tokens = gen.cache_write_tokens;
      rec.provider_attempts = gen.attempts;
      rec.cost_usd = gen.cost_usd;
      rec.llm_seconds = gen.total_seconds;
      rec.finish_reason = gen.finish_reason;

      std::string feedback;
      ExtractedCode code = !outcome ? extract_code(gen.text, python_candidates()) : ExtractedCode{};
      const auto eval_start = Clock::now();
      PhaseTimes phases;          // the evaluation's own, for the progress line
      std::string timing_cap;     // the candidate's timing loop, when a cap (not the noise target) ended it
      double reference_wait = 0;  // for the reference's build (inside eval_seconds)
      if (outcome) {
        rec.outcome = *outcome;
        rec.message = outcome_message;
      } else if (!code.found) {
        rec.outcome = Outcome::kNoCode;
        rec.message = "the response contained no code defining ModelNew";
        feedback = prompts.no_code();
      } else {
        const std::string source = dir + "/candidate" + ext;
        RunStore::write_text(source, code.code);
        try {
          // Compile outside the device lock so builds overlap evaluations.
          const BuildTarget target = config_.device == "cpu" ? BuildTarget::kCpu : BuildTarget::kCuda;
          {
            const Phase compiling(status, "compile");
            for (auto& prebuilder : prebuilders) {
              {
                const CompilePool::Slot slot = compile_pool.acquire();
                rec.compile_seconds += build_candidate_file(*prebuilder, source, config_.candidate_format, target).seconds;
              }
              // The reference too (built at run start; this waits for that
              // build when it is still running), so no evaluation holds a
              // device while a build finishes. No slot: this is a cache hit
              // or a wait on the run-start build, which holds one; holding
              // another would leave a core idle.
              const auto ref_start = Clock::now();
              prebuilder->build(spec.reference_path, ModuleRole::kReference, target);
              reference_wait += std::chrono::duration<double>(Clock::now() - ref_start).count();
            }
          }
          Verdict v;
          {
            const Phase evaluating(status, "eval");
            const auto wait_start = Clock::now();
            const DeviceQueues::Lease lease = queues.acquire();
            rec.queue_seconds = std::chrono::duration<double>(Clock::now() - wait_start).count();
            rec.queue = lease.index();
            rec.device = devices[static_cast<std::size_t>(lease.index())];
            v = evaluators[static_cast<std::size_t>(lease.index())]->evaluate(spec, source);
          }
          if (v.environment.contains("device") && v.environment["device"].is_object()) {
            rec.gpu = v.environment["device"].value("name", "");
          }
          v = redact_verdict(std::move(v), redactor);
          RunStore::write_text(dir + "/verdict.json", redactor.redact_json(v.to_json()).dump(2) + "\n");
          RunStore::write_text(dir + "/build.log", v.build.log);
          rec.build_cached = v.build.cached;
          phases = v.phases;
          if (v.candidate_time && !v.candidate_time->converged && !v.candidate_time->stop_reason.empty()) {
            const std::string t = fmt::format("; timing {} calls, {:.2f}s timed, {}", v.candidate_time->n,
                                              v.candidate_time->total, v.candidate_time->stop_reason.c_str());
            timing_cap = t;
          }
          rec.outcome = outcome_of(v.verdict);
          rec.speedup = v.speedup;
          rec.message = v.message;
          feedback = redactor.redact(prompts.feedback(v));
        } catch (const std::exception& e) {  // kloop-side: the reference, the spec, the machine
          std::lock_guard<std::mutex> lock(summary_mutex);
          summary.errors.push_back(spec.name + " sample " + std::to_string(sample) + " turn " +
                                   std::to_string(turn) + ": " + e.what());
          ++summary.chains_incomplete;
          return std::nullopt;
        }
      }
      rec.eval_seconds = std::chrono::duration<double>(Clock::now() - eval_start).count();
      RunStore::write_text(dir + "/feedback.txt", feedback);
      const bool early = config_.scaffold.early_stop_speedup && rec.outcome == Outcome::kCorrect && rec.speedup &&
                         *rec.speedup >= *config_.scaffold.early_stop_speedup;
      rec.chain_done = early || outcome || last_turn;
      rec.stop_reason = outcome ? outcome_name(*outcome) : early ? "early_stop" : (rec.chain_done ? "turns" : "");
      rec.timestamp = utc_timestamp();
      // What a rescore re-judges or re-evaluates, and what fed the next
      // turn, under the run's key before the record that points at it.
      store.seal_files(rec.attempt_dir, {"candidate.cpp", "candidate.cu", "candidate.py", "verdict.json", "build.log",
                                         "feedback.txt", "response.txt"});
      store.append(rec);
      {
        std::lock_guard<std::mutex> lock(summary_mutex);
        ++summary.attempts_run;
        summary.cost_usd += rec.cost_usd;
        summary.tokens += rec.input_tokens + rec.output_tokens;
      }
      std::string queue_wait;
      if (reference_wait >= 0.05) queue_wait = fmt::format(", reference build {:.1f}s", reference_wait);
      if (devices.size() > 1 || rec.queue_seconds >= 0.05)
        queue_wait += fmt::format(", queue {:.1f}s", rec.queue_seconds);
      // Where an evaluation's time went (builds it did itself, the
      // reference's and the candidate's processes, the judge), when it ran.
      std::string inside;
      if (phases.total > 0) {
        inside = fmt::format(": builds {:.1f}s, reference {:.1f}s, candidate {:.1f}s, judge {:.1f}s{}",
                             phases.build_candidate + phases.build_reference, phases.reference, phases.candidate,
                             phases.compare, timing_cap.c_str());
      }
      const std::string line = fmt::format(
          "[{}/{}] {} sample {} turn {}: {}{} (llm {:.1f}s, compile {:.1f}s{}, eval {:.1f}s{}){}\n", ++attempt_counter,
          total_attempts, spec.name.c_str(), sample, turn, outcome_name(rec.outcome),
          rec.speedup ? (" " + std::to_string(*rec.speedup).substr(0, 5) + "x").c_str() : "", rec.llm_seconds,
          rec.compile_seconds, queue_wait, rec.eval_seconds - rec.compile_seconds - reference_wait - rec.queue_seconds,
          inside, early ? " - early stop" : "");
      status.done(rec.cost_usd);
      {
        std::lock_guard<std::mutex> lock(progress_mutex);
        status.print(progress_, line);
      }
      return Made{rec, gen.text, feedback, code.code};
    }
  };

  auto run_chain = [&](Chain& chain) {
    for (int turn = static_cast<int>(chain.history.size()) + 1; turn <= config_.scaffold.turns && !chain.done; ++turn) {
      std::vector<AttemptRef> parents;
      if (!chain.history.empty()) parents.push_back({chain.sample, chain.history.back().turn});
      std::optional<Made> made =
          make_attempt(*chain.spec, chain.sample, turn, conversation(tasks.at(chain.spec->name), chain.history, config_.scaffold),
                       parents, turn == 1 ? "fresh" : "refine", turn == config_.scaffold.turns);
      if (!made) return;
      chain.history.push_back({turn, made->response, made->feedback, made->rec.outcome, made->rec.speedup});
      chain.done = made->rec.chain_done;
    }
  };

  // A beam or evolve search of one problem, round by round; a round's
  // attempts run side by side, and the next round is planned from all of
  // them (search.h). Rounds the store holds are not made again.
  auto run_search = [&](const ProblemSpec& spec, std::vector<SearchNode> nodes) {
    for (int round = 1; round <= config_.scaffold.turns && !fatal; ++round) {
      std::vector<PlannedAttempt> plan = plan_round(config_.scaffold, round, nodes, tasks.at(spec.name), prompts);
      std::vector<PlannedAttempt> missing;
      for (auto& p : plan) {
        const bool have = std::any_of(nodes.begin(), nodes.end(), [&](const SearchNode& n) { return n.at == p.at; });
        if (!have) missing.push_back(std::move(p));
      }
      std::mutex nodes_mutex;
      std::atomic<bool> failed{false};
      std::atomic<std::size_t> next_slot{0};
      std::vector<std::thread> slots;
      const std::size_t width = std::min<std::size_t>(missing.size(), static_cast<std::size_t>(std::max(1, search_width)));
      for (std::size_t t = 0; t < width; ++t) {
        slots.emplace_back([&] {
          for (std::size_t i = next_slot++; i < missing.size(); i = next_slot++) {
            PlannedAttempt& p = missing[i];
            std::optional<Made> made = make_attempt(spec, p.at.sample, p.at.turn, std::move(p.messages), p.parents, p.step,
                                                    round == config_.scaffold.turns);
            if (!made) {
              failed = true;
              continue;
            }
            std::lock_guard<std::mutex> lock(nodes_mutex);
            nodes.push_back({p.at, made->rec.outcome, made->rec.speedup, made->response, made->code, made->feedback,
                             p.parents});
          }
        });
      }
      for (auto& t : slots) t.join();
      // The next round needs every attempt of this one.
      if (failed) return;
    }
  };

  std::vector<std::thread> pool;
  if (search) {
    // Problems side by side, and within a problem a round's attempts.
    const int problem_workers = std::max(1, std::min<int>(workers, static_cast<int>(specs.size())));
    for (int w = 0; w < problem_workers; ++w) {
      pool.emplace_back([&] {
        for (std::size_t i = next++; i < specs.size(); i = next++) run_search(specs[i], std::move(search_nodes[i]));
      });
    }
  } else {
    workers = std::max(1, std::min<int>(workers, static_cast<int>(chains.size())));
    for (int w = 0; w < workers; ++w) {
      pool.emplace_back([&] {
        for (std::size_t i = next++; i < chains.size(); i = next++) {
          if (!chains[i].done) run_chain(chains[i]);
        }
      });
    }
  }
  for (auto& t : pool) t.join();
  summary.queues = queues.figures();
  summary.compiles = compile_pool.figures();
  summary.seconds = queues.seconds();

  // Best so far, per turn, over all samples (what fast_p at turn t
  // reports), from the store: what this driver and earlier ones made.
  std::map<std::string, std::vector<AttemptRecord>> by_problem;
  for (auto& r : store.load_results()) by_problem[r.problem].push_back(std::move(r));
  for (int t = 1; t <= config_.scaffold.turns; ++t) {
    TurnSummary ts;
    ts.turn = t;
    for (const auto& spec : specs) {
      bool correct = false;
      double best = 0;
      for (const auto& r : by_problem[spec.name]) {
        if (r.turn > t || r.sample >= config_.scaffold.samples || r.outcome != Outcome::kCorrect) continue;
        correct = true;
        if (r.speedup) best = std::max(best, *r.speedup);
      }
      ts.correct += correct ? 1 : 0;
      ts.fast_1 += (correct && best > 1.0) ? 1 : 0;
    }
    summary.by_turn.push_back(ts);
  }
  return summary;
}

int TurnLoop::check(std::ostream& out) {
  int problems_found = 0;
  auto bad = [&](const std::string& what, const std::string& why) {
    out << "  " << what << ": FAILED: " << why << "\n";
    ++problems_found;
  };
  out << "kloop run --check " << config_.path << " (run '" << config_.name << "' in " << config_.runs_dir << ")\n";
  std::vector<std::string> excluded;
  std::vector<ProblemSpec> specs;
  try {
    specs = select_problems(&excluded);
  } catch (const std::exception& e) {
    bad("problems", e.what());
    return 2;
  }
  out << "  problems: " << specs.size();
  for (std::size_t i = 0; i < specs.size() && i < 8; ++i) out << (i ? ", " : " (") << specs[i].name;
  out << (specs.size() > 8 ? ", ...)" : ")") << "\n";
  if (!excluded.empty()) out << "  " << excluded_note(excluded, config_.protocol) << "\n";

  PromptBuilder prompts(config_.prompts);
  const Redactor redactor = feedback_redactor(provider_);
  std::size_t prompt_chars = 0;
  try {
    const std::string system = prompts.system();
    const std::string task = prompts.task(specs.front());
    prompt_chars = system.size() + task.size();
    out << "  prompts: rendered for " << specs.front().name << ": " << system.size() << " + " << task.size()
        << " characters (about " << (prompt_chars + 3) / 4 << " tokens); the task begins:\n";
    std::istringstream lines(redactor.redact(task));
    std::string line;
    for (int n = 0; n < 4 && std::getline(lines, line); ++n) out << "    | " << line.substr(0, 96) << "\n";
  } catch (const std::exception& e) {
    bad("prompts", e.what());
  }

  try {
    const std::vector<std::string> devices = evaluation_devices(config_);
    out << "  device: " << config_.device;
    if (devices.size() > 1 || devices.front() != config_.device) {
      out << " (" << devices.size() << " evaluation queue(s):";
      for (const auto& d : devices) out << " " << d;
      out << ")";
    }
    for (const auto& d : devices) {
      Builder builder(BuilderConfig::from_environment());
      EvalOptions options = eval_options();
      options.device = d;
      Evaluator evaluator(builder, options);
      if (!builder.config().cuda_arch.empty()) out << (d == devices.front() ? " " : ", ") << d << ": " << builder.config().cuda_arch;
    }
    out << " usable by this build; protocol " << config_.protocol << ", isolation " << config_.isolation << "\n";
  } catch (const std::exception& e) {
    bad("device", e.what());
  }

  if (provider_check_) {
    const LlmProvider::Probe probe = provider_.probe();
    if (!probe.ok) {
      bad("provider", probe.what);
    } else {
      out << "  provider: " << provider_.describe() << ": " << probe.what << "\n";
    }
  } else {
    out << "  provider: " << provider_.describe() << " (not contacted: --no-provider-check)\n";
  }

  // What a run would still ask for: the chains' missing turns.
  std::map<std::pair<std::string, int>, std::vector<AttemptRecord>> stored;
  const fs::path run_path = fs::path(config_.runs_dir) / config_.name;
  if (fs::exists(run_path / "config.json")) {
    RunStore store(config_.runs_dir, config_.name);
    if (const std::string conflict = store.config_conflict(resolved_config(redactor), kIdentityFields);
        !conflict.empty()) {
      bad("run folder", conflict);
    }
    for (auto& r : store.load_results()) stored[{r.problem, r.sample}].push_back(r);
  }
  long long requests = 0, resumed = 0;
  double ceiling_input = 0, ceiling_output = 0;
  const double turn_tokens = (config_.provider.max_tokens ? *config_.provider.max_tokens : 0) +
                             static_cast<double>(config_.prompts.max_feedback_chars) / 4;
  for (const auto& spec : specs) {
    for (int s = 0; s < config_.scaffold.samples; ++s) {
      const StoredChain stored_so_far = stored_chain(stored[{spec.name, s}]);
      const int have = stored_so_far.turns;
      resumed += have;
      if (stored_so_far.stopped) continue;
      for (int t = have + 1; t <= config_.scaffold.turns; ++t) {
        ++requests;
        const int earlier = config_.scaffold.context == "full" ? t - 1 : (t > 1 ? 1 : 0);
        ceiling_input += static_cast<double>(prompt_chars) / 4 + earlier * turn_tokens;
        ceiling_output += config_.provider.max_tokens ? *config_.provider.max_tokens : 0;
      }
    }
  }
  out << "  requests: " << requests << " to send (" << specs.size() << " problem(s) x " << config_.scaffold.samples
      << " sample(s) x " << config_.scaffold.turns << " turn(s)";
  if (resumed) out << ", less " << resumed << " attempt(s) already stored";
  out << ")\n";
  const TokenPrices& price = config_.provider.prices;
  if (!config_.provider.max_tokens) {
    out << "  cost ceiling: none without provider.max_tokens (an answer's length is then the provider's limit)\n";
  } else if (price.input == 0 && price.output == 0) {
    out << "  cost ceiling: no provider.prices given (about " << static_cast<long long>(ceiling_input)
        << " input and at most " << static_cast<long long>(ceiling_output) << " output tokens)\n";
  } else {
    std::string line;
    line = fmt::format(
        "  cost ceiling: ${:.2f} (about {} input tokens at ${:.2f}/M, at most {} output tokens at ${:.2f}/M; "
        "before any prompt-cache discount)\n",
        (ceiling_input * price.input + ceiling_output * price.output) / 1e6, static_cast<long long>(ceiling_input),
        price.input, static_cast<long long>(ceiling_output), price.output);
    out << line;
  }
  out << (problems_found ? "not ready: " + std::to_string(problems_found) + " problem(s) above\n"
                         : "ready: nothing was sent and no run folder was made\n");
  return problems_found ? 2 : 0;
}

std::string format_summary(const LoopSummary& s) {
  std::ostringstream out;
  out << "run " << s.run_path << (s.shard.empty() ? "" : " shard " + s.shard) << ": " << s.problems << " problem(s), "
      << s.chains << " chain(s); " << s.attempts_run
      << " attempt(s) run now, " << s.attempts_resumed << " resumed from the run store";
  const std::string cost = fmt::format("; {} tokens, ${:.4f}\n", s.tokens, s.cost_usd);
  out << cost;
  out << "turn   correct   fast_1   (best so far over samples; of " << s.problems << " problems)\n";
  for (const auto& t : s.by_turn) {
    std::string line;
    line = fmt::format("{:4}   {:7}   {:6}\n", t.turn, t.correct, t.fast_1);
    out << line;
  }
  if (!s.by_turn.empty() && s.by_turn.size() > 1) {
    const auto& a = s.by_turn.front();
    const auto& b = s.by_turn.back();
    out << "one-shot -> iterative: correct " << a.correct << " -> " << b.correct << ", fast_1 " << a.fast_1 << " -> "
        << b.fast_1 << "\n";
  }
  if (!s.excluded.empty()) {
    out << s.excluded.size() << " problem(s) excluded by the protocol and not counted:";
    for (const auto& n : s.excluded) out << " " << n;
    out << "\n";
  }
  // How busy each device was over the run (several queues, or a GPU's).
  if (s.attempts_run > 0 && (s.queues.size() > 1 || (s.queues.size() == 1 && s.queues[0].device != "cpu"))) {
    for (std::size_t i = 0; i < s.queues.size(); ++i) {
      const auto& q = s.queues[i];
      std::string line;
      line = fmt::format("queue {} ({}): {} evaluation(s), busy {:.1f} s of {:.1f} s ({:.0f}%)\n", i, q.device.c_str(),
                         q.evaluations, q.busy_seconds, s.seconds,
                         s.seconds > 0 ? 100.0 * q.busy_seconds / s.seconds : 0.0);
      out << line;
    }
  }
  if (s.compiles.builds > 0) {
    const std::string line =
        fmt::format("compiles: {} on {} slot(s), at most {} at once, {:.1f} s waited for a slot\n", s.compiles.builds,
                    s.compiles.slots, s.compiles.most_in_flight, s.compiles.wait_seconds);
    out << line;
  }
  for (const auto& e : s.errors) out << "error: " << e << "\n";
  if (s.chains_incomplete) out << s.chains_incomplete << " chain(s) incomplete; run the same command again to resume\n";
  if (!s.fatal_error.empty()) out << "stopped: " << s.fatal_error << "\n";
  return out.str();
}

}  // namespace kloop
