// kloop rescore: every stored candidate of a run through the Evaluator again.
#include "agent/report/rescore.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "agent/report/metrics.h"
#include "agent/report/run_view.h"
#include "agent/scaffold/environment_retry.h"
#include "agent/scaffold/status_line.h"
#include "agent/store/run_store.h"
#include "evaluator/evaluate.h"
#include "evaluator/judge.h"
#include "evaluator/protocol.h"
#include "evaluator/problem/registry.h"

namespace kloop::report {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using Key = std::tuple<std::string, int, int>;

Key key_of(const AttemptRecord& r) { return {r.problem, r.sample, r.turn}; }

// The precision the run evaluated at (fp32 for a run made before precisions).
Precision run_precision(const json& config) {
  return parse_precision(config.value("precision", std::string("fp32"))).value_or(Precision::kFp32);
}

// The evaluation settings the run used (turn_loop.cpp), under `protocol`.
EvalOptions eval_options(const json& config, const RescoreOptions& o) {
  const json ev = config.value("evaluation", json::object());
  EvalOptions e;
  e.device = config.value("device", std::string("cpu"));
  e.protocol = canonical_protocol_name(o.protocol);
  e.precision = run_precision(config);
  e.seed = config.value("seed", 1ull);
  const double timeout = o.timeout_s.value_or(ev.value("timeout_s", kDefaultRunTimeoutSeconds));
  e.run_timeout = std::chrono::milliseconds(static_cast<long long>(timeout * 1000));
  e.threads = o.threads.value_or(ev.value("threads", 0));
  const double max_timing = o.max_timing_seconds.value_or(ev.value("max_timing_seconds", 0.0));
  if (max_timing > 0) e.max_timing_seconds = max_timing;
  e.worker_path = o.worker_path;
  e.isolation = parse_isolation(ev.value("isolation", std::string("strict"))).value_or(Isolation::kStrict);
  // The candidates are model-written code: a config never runs them
  // unsandboxed (none is for kloop's own children).
  if (e.isolation == Isolation::kNone) e.isolation = Isolation::kStrict;
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
  // `make_evaluator` is called at the first candidate that must be
  // evaluated: a rescore that only re-judges needs no device or worker.
  AttemptRescorer(const RunStore& store, const ProblemRegistry& registry,
                  std::function<std::unique_ptr<Evaluator>()> make_evaluator, int environment_retries)
      : store_(store),
        registry_(registry),
        make_evaluator_(std::move(make_evaluator)),
        environment_retries_(environment_retries) {}

  // The rescored record; throws std::runtime_error (kloop-side) naming the
  // attempt. With `judging_only` (the protocols differ only in judging
  // rules) the stored verdict is judged again when it keeps its
  // observations (`rejudged` says so); otherwise, or when it keeps none, the
  // candidate is evaluated again and `note` says why it was not re-judged.
  // `as_named`: the protocol as the command named it (an alias stays the
  // alias: rescore-kernelbench.jsonl and its verdicts' folder keep the
  // names older runs have).
  AttemptRecord rescore(const AttemptRecord& original, const Protocol& protocol, const std::string& as_named,
                        bool judging_only, bool& rejudged, std::string& note) {
    AttemptRecord r = original;
    r.protocol = as_named;
    r.timestamp = utc_timestamp();
    rejudged = false;
    // No code (none in the answer, or no answer): it fails under any protocol.
    if (codeless(original.outcome)) return r;
    // Where the record points, checked to stay inside the run; what is read
    // there, checked against the run's seal (RunStore::read_sealed).
    store_.attempt_path(original.attempt_dir);
    const std::string out_rel = rescore_verdict_root(as_named) + "/" + original.attempt_dir;
    const fs::path dir = store_.attempt_path(out_rel);
    if (judging_only && !store_.verifiable()) {
      note = "the run's files cannot be verified here, so its observations are not re-judged; evaluated again";
    } else if (judging_only) {
      try {
        json j;
        try {
          j = json::parse(store_.read_sealed(original.attempt_dir, "verdict.json"));
        } catch (const json::exception& e) {
          throw std::invalid_argument(std::string("its verdict.json cannot be read: ") + e.what());
        } catch (const std::runtime_error& e) {
          throw std::invalid_argument(e.what());
        }
        const Rejudged again = rejudge(j, protocol);
        r.outcome = outcome_of(again.verdict);
        r.speedup = again.speedup;
        r.message = again.message;
        r.eval_seconds = 0;
        fs::create_directories(dir);
        RunStore::write_text((dir / "verdict.json").string(), again.verdict_json.dump(2) + "\n");
        store_.seal_files(out_rel, {"verdict.json"});
        rejudged = true;
        return r;
      } catch (const std::invalid_argument& e) {
        note = std::string(e.what()) + "; evaluated again";
      }
    }
    const std::string code = code_file(original);
    const auto start = Clock::now();
    if (!evaluator_) evaluator_ = make_evaluator_();
    // The machine's faults are evaluated again, never the candidate's verdict.
    Verdict v = evaluate_retrying_environment([&] { return evaluator_->evaluate(spec(original.problem), code); },
                                              environment_retries_,
                                              [&](const std::string& why) { note += (note.empty() ? "" : "; ") + why; })
                    .verdict;
    r.eval_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    r.outcome = outcome_of(v.verdict);
    r.speedup = v.speedup;
    r.message = v.message;
    fs::create_directories(dir);
    RunStore::write_text((dir / "verdict.json").string(), v.to_json().dump(2) + "\n");
    store_.seal_files(out_rel, {"verdict.json"});
    return r;
  }

  bool excluded(const std::string& problem, const std::string& protocol, Precision precision) {
    return excluded_by_protocol(spec(problem), protocol, precision);
  }

 private:
  // The attempt's code, once it matches its seal (throws when it does not).
  std::string code_file(const AttemptRecord& r) const {
    const fs::path dir = store_.attempt_path(r.attempt_dir);
    for (const char* name : {"candidate.cu", "candidate.cpp", "candidate.py"}) {
      const fs::path p = dir / name;
      std::error_code ec;
      if (!fs::exists(fs::symlink_status(p, ec))) continue;
      store_.read_sealed(r.attempt_dir, name);
      return p.string();
    }
    throw std::runtime_error(
        dir.string() +
        ": no candidate.cpp or candidate.cu (nor candidate.py); the attempt's code is gone, so it cannot be rescored");
  }

  const ProblemSpec& spec(const std::string& name) {
    auto it = specs_.find(name);
    if (it == specs_.end()) it = specs_.emplace(name, registry_.load(name)).first;
    return it->second;
  }

  const RunStore& store_;
  const ProblemRegistry& registry_;
  std::function<std::unique_ptr<Evaluator>()> make_evaluator_;
  int environment_retries_;
  std::unique_ptr<Evaluator> evaluator_;
  std::map<std::string, ProblemSpec> specs_;
};

// One attempt rescored, its record appended and its line printed; a
// kloop-side failure (the spec, the reference, the machine, a lost file) is
// counted in the summary's errors, and a rerun tries it again.
void rescore_attempt(const AttemptRecord& original, int index, AttemptRescorer& rescorer, const Protocol& target,
                     const RescoreOptions& options, RunStore& store, const std::string& file, StatusLine& status,
                     std::ostream& progress, RescoreSummary& s) {
  const std::string what =
      original.problem + " sample " + std::to_string(original.sample) + " turn " + std::to_string(original.turn);
  try {
    if (rescorer.excluded(original.problem, options.protocol, target.precision)) {
      ++s.excluded;
      progress << "[" << index << "/" << s.attempts << "] " << what << ": excluded by " << options.protocol
               << (target.precision == Precision::kFp32 ? "" : std::string(" at ") + precision_name(target.precision))
               << " as degenerate; not rescored\n";
      return;
    }
    status.begin("eval");
    AttemptRecord r;
    bool rejudged = false;
    std::string note;
    try {
      r = rescorer.rescore(original, target, options.protocol, s.judging_only, rejudged, note);
    } catch (...) {
      status.end("eval");
      throw;
    }
    status.end("eval");
    status.done(0);
    store.append(r, file);
    ++(codeless(original.outcome) ? s.copied : rejudged ? s.rejudged : s.rescored);
    const std::string how = rejudged ? std::string("re-judged") : fmt::format("{:.1f}s", r.eval_seconds);
    const std::string line = fmt::format("[{}/{}] {}: {} -> {} ({}){}\n", index, s.attempts, what,
                                         outcome_text(original.outcome, original.speedup),
                                         outcome_text(r.outcome, r.speedup), how,
                                         note.empty() ? "" : ": " + note);
    status.print(progress, line);
  } catch (const std::exception& e) {
    s.errors.push_back(what + ": " + e.what());
    progress << "[" << index << "/" << s.attempts << "] " << what << ": not rescored: " << e.what() << "\n";
  }
}

}  // namespace

RescoreSummary rescore_run(const std::string& run_dir, const RescoreOptions& options, std::ostream& progress) {
  load_run_config_json(run_dir);  // a clear error where there is no run
  fs::path folder = fs::absolute(run_dir).lexically_normal();
  if (folder.filename().empty()) folder = folder.parent_path();
  RunStore store(folder.parent_path().string(), folder.filename().string());
  // The settings the candidates are evaluated under: as the run's driver
  // wrote them (sealed), never as someone changed them since.
  json config;
  try {
    config = json::parse(store.read_sealed("", "config.json"));
  } catch (const json::exception& e) {
    throw std::runtime_error((folder / "config.json").string() + ": not JSON (" + e.what() + ")");
  }
  // At the run's precision: its tolerance, its precision check.
  const Protocol target = at_precision(protocol_by_name(options.protocol), run_precision(config));  // throws naming them
  const std::string own = config.value("protocol", std::string("strict"));
  if (canonical_protocol_name(options.protocol) == canonical_protocol_name(own)) {
    throw std::invalid_argument((fs::path(run_dir) / "config.json").string() + ": '" + own +
                                "' is the run's own protocol, whose results are results.jsonl; rescore under another "
                                "one (" + protocol_choices() + ")");
  }
  const std::string file = rescore_results_file(options.protocol);
  const std::vector<AttemptRecord> records = store.load_results();
  if (records.empty()) {
    throw std::runtime_error((folder / RunStore::kResultsFile).string() +
                             ": no records; there is nothing to rescore until the run has finished attempts");
  }
  std::set<Key> done;
  for (const auto& r : store.load_results(file)) done.insert(key_of(r));

  RescoreSummary s;
  try {
    s.judging_only = same_measurements(at_precision(protocol_by_name(own), run_precision(config)), target);
  } catch (const std::invalid_argument&) {  // an imported run's protocol is another harness's
    s.judging_only = false;
  }
  s.results_file = (folder / file).string();
  s.attempts = static_cast<int>(records.size());
  ProblemRegistry registry(options.problems_dir);
  Builder builder(BuilderConfig::from_environment());
  auto make_evaluator = [&] { return std::make_unique<Evaluator>(builder, eval_options(config, options)); };
  // Made now where every candidate is evaluated again, so that a machine
  // that cannot evaluate (no CUDA for a GPU run) says so once, before any
  // attempt; a rescore that re-judges makes one only if an attempt needs it.
  std::unique_ptr<Evaluator> first = s.judging_only ? nullptr : make_evaluator();
  const int environment_retries = config.value("evaluation", json::object()).value("environment_retries", 2);
  AttemptRescorer rescorer(
      store, registry, [&]() { return first ? std::move(first) : make_evaluator(); }, environment_retries);
  int index = 0;
  StatusLine status(s.attempts);  // on a terminal: done, in flight, ETA
  for (const auto& original : records) {
    ++index;
    if (done.count(key_of(original))) {
      ++s.resumed;
      status.done(0);
      continue;
    }
    rescore_attempt(original, index, rescorer, target, options, store, file, status, progress, s);
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
  if (s.judging_only) {
    out << protocol << " measures what the run's protocol measured and differs only in judging rules: "
        << s.rejudged << " attempt(s) judged again from their stored observations (no build, no device)\n";
  }
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
