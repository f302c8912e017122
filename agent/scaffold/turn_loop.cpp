// The scaffold loop: chains over (problem, sample), turns within a chain.
#include "agent/scaffold/turn_loop.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "agent/extract/code_extract.h"
#include "agent/prompt/prompt_builder.h"
#include "agent/scaffold/redaction.h"
#include "evaluator/build/content_hash.h"
#include "evaluator/build/environment.h"
#include "evaluator/evaluate.h"
#include "evaluator/problem/registry.h"
#include "evaluator/protocol.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct PastTurn {
  int turn = 0;
  std::string response;
  std::string feedback;
  std::string verdict;
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
      if (h.verdict == "correct" && h.speedup && (!shown->speedup || shown->verdict != "correct" || *h.speedup > *shown->speedup)) {
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

}  // namespace

TurnLoop::TurnLoop(RunConfig config, LlmProvider& provider, std::ostream& progress)
    : config_(std::move(config)), provider_(provider), progress_(progress) {}

LoopSummary TurnLoop::run() {
  // Everything that can be wrong with the inputs fails here, before any LLM call.
  ProblemRegistry registry(config_.problems_dir);
  std::vector<ProblemSpec> specs;
  if (!config_.problems.names.empty()) {
    for (const auto& n : config_.problems.names) specs.push_back(registry.load(n));
  } else {
    for (const auto& e : registry.list(config_.problems.suite, config_.problems.level)) specs.push_back(registry.load(e));
  }
  if (specs.empty()) throw std::invalid_argument(config_.path + ": field 'problems': selects no problem");
  // Tasks the protocol leaves out: said once, never sent to the model, not
  // counted (as the protocol defines its denominator).
  std::vector<std::string> excluded;
  for (auto it = specs.begin(); it != specs.end();) {
    if (excluded_by_protocol(*it, config_.protocol)) {
      excluded.push_back(it->name);
      it = specs.erase(it);
    } else {
      ++it;
    }
  }
  if (!excluded.empty()) {
    std::string list;
    for (const auto& n : excluded) list += (list.empty() ? "" : ", ") + n;
    progress_ << "kloop: " << excluded.size() << " problem(s) excluded by the " << config_.protocol
              << " protocol, left out of the run: " << list << "\n";
  }
  if (specs.empty()) {
    throw std::invalid_argument(config_.path + ": field 'problems': every selected problem is excluded by the " +
                                config_.protocol + " protocol");
  }
  PromptBuilder prompts(config_.prompts);
  // Everything that goes back to the model or into the run folder from an
  // evaluation passes through this: the provider's key and header values
  // and the environment's credentials never reach a prompt.
  const Redactor redactor = feedback_redactor(provider_);
  const std::string system = redactor.redact(prompts.system());
  std::map<std::string, std::string> tasks;
  for (const auto& s : specs) tasks[s.name] = prompts.task(s);

  EvalOptions eval_opts;
  eval_opts.device = config_.device;
  eval_opts.protocol = config_.protocol;
  eval_opts.seed = config_.seed;
  eval_opts.run_timeout = std::chrono::milliseconds(static_cast<long long>(config_.eval_timeout_s * 1000));
  eval_opts.threads = config_.threads;
  eval_opts.isolation = *parse_isolation(config_.isolation);
  if (config_.max_timing_seconds > 0) eval_opts.max_timing_seconds = config_.max_timing_seconds;
  // Counters cost a replay phase per candidate: only when the model sees them.
  eval_opts.profile = config_.scaffold.feedback.count(FeedbackKind::kProfiler) > 0 && config_.device != "cpu";
  // The device and the worker are checked here, before the run folder or
  // any request exists.
  Builder eval_builder(BuilderConfig::from_environment());
  Evaluator evaluator(eval_builder, eval_opts);

  RunStore store(config_.runs_dir, config_.name);
  const RunLock run_lock(store.path(), progress_);
  json resolved = config_.to_json();
  resolved["model_identity"] = config_.provider.kind + ":" + config_.provider.model;
  resolved["prompts_digest"] = prompts_digest(config_.prompts.dir);
  // What this driver runs with (the latest one's, on a resumed run).
  resolved["environment"] = {{"build", build_environment()}, {"machine", machine_environment(config_.device)},
                             {"started_at", utc_timestamp()}};
  // What changes earlier attempts; more turns, samples or problems extend
  // the run instead.
  // Redacted like everything else in the folder (extra_body, stop words).
  resolved = redactor.redact_json(resolved);
  store.write_config(resolved, {"model_identity", "protocol", "device", "seed", "scaffold.kind", "scaffold.feedback",
                                "scaffold.context", "scaffold.keep_best", "prompts_digest"});

  LoopSummary summary;
  summary.run_path = store.path();
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
                             r.verdict, r.speedup});
        ++summary.attempts_resumed;
        // A chain that ended on its turn budget goes on when the run now
        // has more turns; one that stopped early stays stopped.
        if (r.chain_done && r.stop_reason != "turns") c.done = true;
      }
      if (static_cast<int>(c.history.size()) >= config_.scaffold.turns) c.done = true;
      chains.push_back(std::move(c));
    }
  }
  summary.chains = static_cast<int>(chains.size());

  std::mutex eval_mutex;      // one evaluation at a time on the device
  std::mutex progress_mutex;  // whole lines on the progress stream
  std::mutex summary_mutex;
  std::atomic<bool> fatal{false};
  std::atomic<std::size_t> next{0};
  const std::string ext = config_.device == "cpu" ? ".cpp" : ".cu";
  int total_attempts = 0;
  for (const auto& c : chains) total_attempts += c.done ? 0 : config_.scaffold.turns - static_cast<int>(c.history.size());
  std::atomic<int> attempt_counter{0};

  auto run_chain = [&](Chain& chain) {
    const ProblemSpec& spec = *chain.spec;
    BuilderConfig prebuild_config = BuilderConfig::from_environment();
    prebuild_config.isolation = eval_opts.isolation;
    Builder prebuilder(prebuild_config);
    for (int turn = static_cast<int>(chain.history.size()) + 1; turn <= config_.scaffold.turns && !chain.done; ++turn) {
      if (fatal) return;
      const std::string dir = store.attempt_dir(spec.name, chain.sample, turn);
      AttemptRecord rec;
      rec.run = config_.name;
      rec.problem = spec.name;
      rec.level = spec.level;
      rec.sample = chain.sample;
      rec.turn = turn;
      rec.protocol = config_.protocol;
      rec.device = config_.device;
      rec.model = config_.provider.model;
      rec.attempt_dir = store.relative_attempt_dir(spec.name, chain.sample, turn);

      GenerationRequest req;
      req.system = system;
      req.messages = conversation(tasks.at(spec.name), chain.history, config_.scaffold);
      // Again at sending: a resumed turn's feedback comes from the run folder.
      for (auto& m : req.messages) m.content = redactor.redact(std::move(m.content));
      req.key = {spec.name, chain.sample, turn};
      json prompt_json = {{"system", req.system}, {"messages", json::array()}};
      for (const auto& m : req.messages) prompt_json["messages"].push_back({{"role", m.role}, {"content", m.content}});
      RunStore::write_text(dir + "/prompt.json", prompt_json.dump(2) + "\n");

      GenerationResult gen;
      try {
        gen = provider_.generate(req);
      } catch (const FatalProviderError& e) {
        fatal = true;
        std::lock_guard<std::mutex> lock(summary_mutex);
        summary.fatal_error = e.what();
        return;
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(summary_mutex);
        summary.errors.push_back(spec.name + " sample " + std::to_string(chain.sample) + " turn " +
                                 std::to_string(turn) + ": " + e.what());
        ++summary.chains_incomplete;
        return;
      }
      RunStore::write_text(dir + "/response.txt", gen.text);
      if (!gen.reasoning.empty()) RunStore::write_text(dir + "/reasoning.txt", gen.reasoning);
      RunStore::write_text(dir + "/raw_response.json", gen.raw_response.dump(2) + "\n");
      rec.input_tokens = gen.input_tokens;
      rec.output_tokens = gen.output_tokens;
      rec.reasoning_tokens = gen.reasoning_tokens;
      rec.cost_usd = gen.cost_usd;
      rec.llm_seconds = gen.total_seconds;
      rec.finish_reason = gen.finish_reason;

      std::string feedback;
      ExtractedCode code = extract_code(gen.text);
      const auto eval_start = Clock::now();
      if (!code.found) {
        rec.verdict = "no_code";
        rec.message = "the response contained no code defining ModelNew";
        feedback = prompts.no_code();
      } else {
        const std::string source = dir + "/candidate" + ext;
        RunStore::write_text(source, code.code);
        try {
          // Compile outside the device lock so builds overlap evaluations.
          prebuilder.build(source, ModuleRole::kCandidate, config_.device == "cpu" ? BuildTarget::kCpu : BuildTarget::kCuda);
          Verdict v;
          {
            std::lock_guard<std::mutex> lock(eval_mutex);
            v = evaluator.evaluate(spec, source);
          }
          v = redact_verdict(std::move(v), redactor);
          RunStore::write_text(dir + "/verdict.json", redactor.redact_json(v.to_json()).dump(2) + "\n");
          RunStore::write_text(dir + "/build.log", v.build.log);
          rec.verdict = verdict_name(v.verdict);
          rec.speedup = v.speedup;
          rec.message = v.message;
          feedback = redactor.redact(prompts.feedback(v));
        } catch (const std::exception& e) {  // kloop-side: the reference, the spec, the machine
          std::lock_guard<std::mutex> lock(summary_mutex);
          summary.errors.push_back(spec.name + " sample " + std::to_string(chain.sample) + " turn " +
                                   std::to_string(turn) + ": " + e.what());
          ++summary.chains_incomplete;
          return;
        }
      }
      rec.eval_seconds = std::chrono::duration<double>(Clock::now() - eval_start).count();
      RunStore::write_text(dir + "/feedback.txt", feedback);
      const bool early = config_.scaffold.early_stop_speedup && rec.verdict == "correct" && rec.speedup &&
                         *rec.speedup >= *config_.scaffold.early_stop_speedup;
      rec.chain_done = early || turn == config_.scaffold.turns;
      rec.stop_reason = early ? "early_stop" : (rec.chain_done ? "turns" : "");
      rec.timestamp = utc_timestamp();
      store.append(rec);
      chain.history.push_back({turn, gen.text, feedback, rec.verdict, rec.speedup});
      chain.done = rec.chain_done;
      {
        std::lock_guard<std::mutex> lock(summary_mutex);
        ++summary.attempts_run;
        summary.cost_usd += rec.cost_usd;
        summary.tokens += rec.input_tokens + rec.output_tokens;
      }
      char line[512];
      std::snprintf(line, sizeof(line), "[%d/%d] %s sample %d turn %d: %s%s (llm %.1fs, eval %.1fs)%s\n",
                    ++attempt_counter, total_attempts, spec.name.c_str(), chain.sample, turn, rec.verdict.c_str(),
                    rec.speedup ? (" " + std::to_string(*rec.speedup).substr(0, 5) + "x").c_str() : "",
                    rec.llm_seconds, rec.eval_seconds, early ? " - early stop" : "");
      std::lock_guard<std::mutex> lock(progress_mutex);
      progress_ << line << std::flush;
    }
  };

  int workers = config_.parallel_chains > 0 ? config_.parallel_chains : std::max(1, config_.provider.concurrency);
  workers = std::max(1, std::min<int>(workers, static_cast<int>(chains.size())));
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w) {
    pool.emplace_back([&] {
      for (std::size_t i = next++; i < chains.size(); i = next++) {
        if (!chains[i].done) run_chain(chains[i]);
      }
    });
  }
  for (auto& t : pool) t.join();

  // Best so far, per turn, over all samples (what fast_p at turn t reports).
  for (int t = 1; t <= config_.scaffold.turns; ++t) {
    TurnSummary ts;
    ts.turn = t;
    for (const auto& spec : specs) {
      bool correct = false;
      double best = 0;
      for (int s = 0; s < config_.scaffold.samples; ++s) {
        for (const auto& c : chains) {
          if (c.spec != &spec || c.sample != s) continue;
          for (const auto& h : c.history) {
            if (h.turn > t || h.verdict != "correct") continue;
            correct = true;
            if (h.speedup) best = std::max(best, *h.speedup);
          }
        }
      }
      ts.correct += correct ? 1 : 0;
      ts.fast_1 += (correct && best > 1.0) ? 1 : 0;
    }
    summary.by_turn.push_back(ts);
  }
  return summary;
}

std::string format_summary(const LoopSummary& s) {
  std::ostringstream out;
  out << "run " << s.run_path << ": " << s.problems << " problem(s), " << s.chains << " chain(s); " << s.attempts_run
      << " attempt(s) run now, " << s.attempts_resumed << " resumed from the run store";
  char cost[64];
  std::snprintf(cost, sizeof(cost), "; %lld tokens, $%.4f\n", s.tokens, s.cost_usd);
  out << cost;
  out << "turn   correct   fast_1   (best so far over samples; of " << s.problems << " problems)\n";
  for (const auto& t : s.by_turn) {
    char line[128];
    std::snprintf(line, sizeof(line), "%4d   %7d   %6d\n", t.turn, t.correct, t.fast_1);
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
  for (const auto& e : s.errors) out << "error: " << e << "\n";
  if (s.chains_incomplete) out << s.chains_incomplete << " chain(s) incomplete; run the same command again to resume\n";
  if (!s.fatal_error.empty()) out << "stopped: " << s.fatal_error << "\n";
  return out.str();
}

}  // namespace kloop
