// kloop rescore: every stored candidate of a run through the Evaluator again.
#include "agent/report/rescore.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "agent/report/metrics.h"
#include "agent/report/run_view.h"
#include "agent/scaffold/status_line.h"
#include "agent/store/run_store.h"
#include "evaluator/evaluate.h"
#include "evaluator/problem/registry.h"

namespace kloop::report {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using Key = std::tuple<std::string, int, int>;

Key key_of(const AttemptRecord& r) { return {r.problem, r.sample, r.turn}; }

// The evaluation settings the run used (turn_loop.cpp), under `protocol`.
EvalOptions eval_options(const json& config, const RescoreOptions& o) {
  const json ev = config.value("evaluation", json::object());
  EvalOptions e;
  e.device = config.value("device", std::string("cpu"));
  e.protocol = o.protocol;
  e.seed = config.value("seed", 1ull);
  const double timeout = o.timeout_s.value_or(ev.value("timeout_s", kDefaultRunTimeoutSeconds));
  e.run_timeout = std::chrono::milliseconds(static_cast<long long>(timeout * 1000));
  e.threads = o.threads.value_or(ev.value("threads", 0));
  const double max_timing = o.max_timing_seconds.value_or(ev.value("max_timing_seconds", 0.0));
  if (max_timing > 0) e.max_timing_seconds = max_timing;
  e.worker_path = o.worker_path;
  e.isolation = parse_isolation(ev.value("isolation", std::string("strict"))).value_or(Isolation::kStrict);
  e.candidate_format = config.value("candidate_format", std::string("auto"));
  return e;
}

std::string outcome_text(Outcome outcome, const std::optional<double>& speedup) {
  if (!speedup) return outcome_name(outcome);
  const std::string buf = fmt::format(" {:.2f}x", *speedup);
  return outcome_name(outcome) + std::string(buf);
}

// Evaluates one stored attempt; its record and verdict are written by the caller.
class AttemptRescorer {
 public:
  AttemptRescorer(const std::string& run_dir, const ProblemRegistry& registry, Evaluator& evaluator)
      : run_dir_(run_dir), registry_(registry), evaluator_(evaluator) {}

  // The rescored record; throws std::runtime_error (kloop-side) naming the attempt.
  AttemptRecord rescore(const AttemptRecord& original, const std::string& protocol) {
    AttemptRecord r = original;
    r.protocol = protocol;
    r.timestamp = utc_timestamp();
    // No code (none in the answer, or no answer): it fails under any protocol.
    if (codeless(original.outcome)) return r;
    const std::string code = code_file(original);
    const auto start = Clock::now();
    Verdict v = evaluator_.evaluate(spec(original.problem), code);
    r.eval_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    r.outcome = outcome_of(v.verdict);
    r.speedup = v.speedup;
    r.message = v.message;
    const fs::path dir = fs::path(run_dir_) / rescore_verdict_root(protocol) / original.attempt_dir;
    fs::create_directories(dir);
    RunStore::write_text((dir / "verdict.json").string(), v.to_json().dump(2) + "\n");
    return r;
  }

  bool excluded(const std::string& problem, const std::string& protocol) {
    return excluded_by_protocol(spec(problem), protocol);
  }

 private:
  std::string code_file(const AttemptRecord& r) const {
    for (const char* name : {"candidate.cu", "candidate.cpp", "candidate.py"}) {
      const fs::path p = fs::path(run_dir_) / r.attempt_dir / name;
      if (fs::exists(p)) return p.string();
    }
    throw std::runtime_error(
        (fs::path(run_dir_) / r.attempt_dir).string() +
        ": no candidate.cpp or candidate.cu (nor candidate.py); the attempt's code is gone, so it cannot be rescored");
  }

  const ProblemSpec& spec(const std::string& name) {
    auto it = specs_.find(name);
    if (it == specs_.end()) it = specs_.emplace(name, registry_.load(name)).first;
    return it->second;
  }

  std::string run_dir_;
  const ProblemRegistry& registry_;
  Evaluator& evaluator_;
  std::map<std::string, ProblemSpec> specs_;
};

}  // namespace

RescoreSummary rescore_run(const std::string& run_dir, const RescoreOptions& options, std::ostream& progress) {
  const json config = load_run_config_json(run_dir);
  protocol_by_name(options.protocol);  // throws naming the protocols
  const std::string own = config.value("protocol", std::string("strict"));
  if (options.protocol == own) {
    throw std::invalid_argument((fs::path(run_dir) / "config.json").string() + ": '" + own +
                                "' is the run's own protocol, whose results are results.jsonl; rescore under another "
                                "one (kernelbench, verified, strict)");
  }
  fs::path folder = fs::absolute(run_dir).lexically_normal();
  if (folder.filename().empty()) folder = folder.parent_path();
  RunStore store(folder.parent_path().string(), folder.filename().string());
  const std::string file = rescore_results_file(options.protocol);
  const std::vector<AttemptRecord> records = store.load_results();
  if (records.empty()) {
    throw std::runtime_error((folder / RunStore::kResultsFile).string() +
                             ": no records; there is nothing to rescore until the run has finished attempts");
  }
  std::set<Key> done;
  for (const auto& r : store.load_results(file)) done.insert(key_of(r));

  RescoreSummary s;
  s.results_file = (folder / file).string();
  s.attempts = static_cast<int>(records.size());
  ProblemRegistry registry(options.problems_dir);
  Builder builder(BuilderConfig::from_environment());
  Evaluator evaluator(builder, eval_options(config, options));
  AttemptRescorer rescorer(folder.string(), registry, evaluator);
  int index = 0;
  StatusLine status(s.attempts);  // on a terminal: done, in flight, ETA
  for (const auto& original : records) {
    ++index;
    if (done.count(key_of(original))) {
      ++s.resumed;
      status.done(0);
      continue;
    }
    const std::string what =
        original.problem + " sample " + std::to_string(original.sample) + " turn " + std::to_string(original.turn);
    try {
      if (rescorer.excluded(original.problem, options.protocol)) {
        ++s.excluded;
        progress << "[" << index << "/" << s.attempts << "] " << what << ": excluded by " << options.protocol
                 << " as degenerate; not rescored\n";
        continue;
      }
      status.begin("eval");
      AttemptRecord r;
      try {
        r = rescorer.rescore(original, options.protocol);
      } catch (...) {
        status.end("eval");
        throw;
      }
      status.end("eval");
      status.done(0);
      store.append(r, file);
      ++(codeless(original.outcome) ? s.copied : s.rescored);
      const std::string line = fmt::format("[{}/{}] {}: {} -> {} ({:.1f}s)\n", index, s.attempts, what.c_str(),
                                           outcome_text(original.outcome, original.speedup).c_str(),
                                           outcome_text(r.outcome, r.speedup).c_str(), r.eval_seconds);
      status.print(progress, line);
    } catch (const std::exception& e) {  // kloop-side: the spec, the reference, the machine, a lost file
      s.errors.push_back(what + ": " + e.what());
      progress << "[" << index << "/" << s.attempts << "] " << what << ": not rescored: " << e.what() << "\n";
    }
  }
  std::map<Key, Outcome> before;
  for (const auto& r : records) before[key_of(r)] = r.outcome;
  for (const auto& r : store.load_results(file)) {
    auto it = before.find(key_of(r));
    if (it != before.end()) ++s.transitions[{it->second, r.outcome}];
  }
  return s;
}

std::string format_rescore_summary(const RescoreSummary& s, const std::string& run_dir, const std::string& protocol) {
  std::ostringstream out;
  out << "rescored " << run_dir << " under " << protocol << ": " << s.rescored << " attempt(s) evaluated now, "
      << s.resumed << " resumed, " << s.copied << " without code copied, " << s.excluded
      << " of tasks the protocol excludes skipped; " << s.attempts << " in the run\n";
  out << "wrote " << s.results_file << " (results.jsonl is unchanged)\n";
  if (!s.transitions.empty()) {
    out << "verdicts (run's protocol -> " << protocol << "):\n";
    for (const auto& [t, n] : s.transitions) {
      out << "  " << outcome_name(t.first) << " -> " << outcome_name(t.second) << ": " << n << (t.first == t.second ? "" : "  (changed)") << "\n";
    }
  }
  for (const auto& e : s.errors) out << "error: " << e << "\n";
  if (!s.errors.empty()) out << s.errors.size() << " attempt(s) not rescored; run the same command again to retry\n";
  out << "compare: kloop report " << run_dir << "\n";
  return out.str();
}

}  // namespace kloop::report
