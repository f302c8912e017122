// Loading a run folder for a report.
#include "agent/report/run_view.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include "agent/report/failure_kind.h"
#include "evaluator/protocol.h"

namespace kloop::report {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string scaffold_text(const json& s) {
  const int samples = s.value("samples", 1);
  const int turns = s.value("turns", 1);
  const std::string kind = s.value("kind", std::string("?"));
  if (kind == "beam") {
    return "beam, width " + std::to_string(s.value("width", 0)) + " x expand " + std::to_string(s.value("expand", 0)) +
           ", depth " + std::to_string(turns) + " (" + std::to_string(samples * turns) + " calls per problem)";
  }
  if (kind == "evolve") {
    return "evolve, population " + std::to_string(samples) + " x " + std::to_string(turns) + " generations, " +
           (s.value("crossover", true) ? std::to_string(s.value("parents", 2)) + " parents" : std::string("mutation")) +
           " (" + std::to_string(samples * turns) + " calls per problem)";
  }
  return s.value("kind", std::string("?")) + ", " + std::to_string(samples) + (samples == 1 ? " sample" : " samples") +
         " x " + std::to_string(turns) + (turns == 1 ? " turn" : " turns");
}

// The first file of `names` present in `dir`, relative to `run_dir`; "" if none.
std::string present_file(const fs::path& run_dir, const std::string& dir, const std::vector<std::string>& names) {
  for (const auto& n : names) {
    const fs::path rel = fs::path(dir) / n;
    if (fs::exists(run_dir / rel)) return rel.string();
  }
  return "";
}

// The verdict.json of an attempt, when it has one that parses.
std::optional<json> read_verdict(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  try {
    return json::parse(in);
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

Attempt attempt_of(const AttemptRecord& r, const fs::path& run_dir, const std::string& verdict_root) {
  Attempt a;
  a.record = r;
  if (r.attempt_dir.empty()) return a;
  a.code_file = present_file(run_dir, r.attempt_dir, {"candidate.cu", "candidate.cpp", "candidate.py"});
  if (a.code_file.empty()) a.code_file = present_file(run_dir, r.attempt_dir, {"response.txt"});
  a.feedback_file = present_file(run_dir, r.attempt_dir, {"feedback.txt"});
  const std::string verdict_dir =
      verdict_root.empty() ? r.attempt_dir : (fs::path(verdict_root) / r.attempt_dir).string();
  a.verdict_file = present_file(run_dir, verdict_dir, {"verdict.json"});
  if (r.outcome == Outcome::kIncorrect || r.outcome == Outcome::kIntegrityViolation) {
    std::optional<json> v = a.verdict_file.empty() ? std::nullopt : read_verdict(run_dir / a.verdict_file);
    a.failure_kind = failure_kind(r.outcome, r.message, v ? &*v : nullptr);
  }
  if (r.outcome == Outcome::kCorrect && !a.verdict_file.empty()) {
    std::optional<json> v = read_verdict(run_dir / a.verdict_file);
    if (v && v->contains("profile_digest")) a.profile_digest = v->value("profile_digest", "");
  }
  return a;
}

// Moves the problems the view's protocol excludes at the run's precision out of the denominator.
void drop_excluded(RunView& v, const ProblemRegistry& registry, Precision precision) {
  std::vector<SelectedProblem> kept;
  for (const auto& p : v.problems) {
    bool excluded = false;
    try {
      excluded = excluded_by_protocol(registry.load(p.name), v.protocol, precision);
    } catch (const std::exception&) {
      // A spec removed or broken since the run: keep the problem counted.
    }
    if (excluded) {
      v.excluded.push_back(p.name);
    } else {
      kept.push_back(p);
    }
  }
  v.problems = std::move(kept);
}

}  // namespace

std::string RunView::label() const { return run_name + " [" + protocol + "]"; }

std::string shared_label_prefix(const std::vector<RunView>& views) {
  if (views.size() < 2) return "";
  std::string shared = views.front().label();
  for (const auto& v : views) {
    const std::string l = v.label();
    std::size_t n = 0;
    while (n < shared.size() && n < l.size() && shared[n] == l[n]) ++n;
    shared.resize(n);
  }
  const std::size_t slash = shared.rfind('/');
  return slash == std::string::npos ? "" : shared.substr(0, slash + 1);
}

std::vector<std::string> distinct_labels(const std::vector<RunView>& views) {
  const std::string shared = shared_label_prefix(views);
  std::vector<std::string> out;
  std::set<std::string> seen;
  bool collide = false;
  for (const auto& v : views) {
    out.push_back(v.label().substr(shared.size()));
    collide = !seen.insert(out.back()).second || collide;
  }
  if (collide) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = "#" + std::to_string(i + 1) + " " + out[i];
  }
  return out;
}

std::string rescore_results_file(const std::string& protocol) { return "rescore-" + protocol + ".jsonl"; }
std::string rescore_verdict_root(const std::string& protocol) { return "rescore-" + protocol; }

json load_run_config_json(const std::string& run_dir) {
  const fs::path p = fs::path(run_dir) / "config.json";
  std::ifstream in(p);
  if (!in) {
    throw std::runtime_error(p.string() + ": not found; '" + run_dir +
                             "' is not a run folder (kloop run CONFIG writes runs/NAME/config.json)");
  }
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw std::runtime_error(p.string() + ": not valid JSON (" + e.what() + ")");
  }
}

std::vector<SelectedProblem> selected_problems(const json& config, const ProblemRegistry* registry,
                                               const std::vector<AttemptRecord>& records, const std::string& where) {
  const json sel = config.value("problems", json::object());
  std::map<std::string, int> record_levels;
  for (const auto& r : records) record_levels[r.problem] = r.level;
  std::vector<SelectedProblem> out;
  const std::vector<std::string> names = sel.value("names", std::vector<std::string>{});
  if (!names.empty()) {
    for (const auto& n : names) {
      SelectedProblem p{fs::path(n).filename().string(), 0};  // "level1/19_ReLU" is recorded as "19_ReLU"
      if (auto it = record_levels.find(p.name); it != record_levels.end()) p.level = it->second;
      if (registry) {
        try {
          ProblemEntry e = registry->find(n);
          p = {e.name, e.level};
        } catch (const std::exception&) {
          // A problem removed since the run: still in the denominator.
        }
      }
      out.push_back(p);
    }
    return out;
  }
  if (!registry) {
    throw std::runtime_error(where +
                             ": field 'problems' selects by suite and level; the problems folder is needed "
                             "to count them (give --problems DIR)");
  }
  if (sel.contains("select") && sel["select"].is_string()) {
    try {
      for (const auto& e : registry->select_numbered(sel["select"].get<std::string>(), sel.value("suite", std::string()))) {
        out.push_back({e.name, e.level});
      }
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(where + ": field 'problems.select': " + e.what());
    }
    return out;
  }
  std::optional<int> level;
  if (sel.contains("level") && sel["level"].is_number_integer()) level = sel["level"].get<int>();
  for (const auto& e : registry->list(sel.value("suite", std::string()), level)) out.push_back({e.name, e.level});
  return out;
}

std::vector<DeviceUse> device_use(const RunView& v) {
  std::vector<DeviceUse> out;
  for (const auto& a : v.attempts) {
    const AttemptRecord& r = a.record;
    if (codeless(r.outcome)) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const DeviceUse& d) { return d.device == r.device && d.gpu == r.gpu; });
    if (it == out.end()) it = out.insert(out.end(), {r.device, r.gpu, 0});
    ++it->attempts;
  }
  std::sort(out.begin(), out.end(), [](const DeviceUse& a, const DeviceUse& b) { return a.device < b.device; });
  return out;
}

std::vector<std::string> gpu_models(const std::vector<RunView>& views) {
  std::vector<std::string> out;
  for (const auto& v : views) {
    for (const auto& d : device_use(v)) {
      if (!d.gpu.empty() && std::find(out.begin(), out.end(), d.gpu) == out.end()) out.push_back(d.gpu);
    }
  }
  return out;
}

std::vector<std::string> run_protocols(const std::string& run_dir) {
  std::vector<std::string> out = {load_run_config_json(run_dir).value("protocol", std::string("strict"))};
  std::vector<std::string> rescored;
  for (const auto& entry : fs::directory_iterator(run_dir)) {
    const std::string f = entry.path().filename().string();
    const std::string prefix = "rescore-", suffix = ".jsonl";
    if (f.size() > prefix.size() + suffix.size() && f.rfind(prefix, 0) == 0 &&
        f.compare(f.size() - suffix.size(), suffix.size(), suffix) == 0) {
      std::string p = f.substr(prefix.size(), f.size() - prefix.size() - suffix.size());
      if (const std::size_t shard = p.find(".shard-"); shard != std::string::npos) p.resize(shard);  // a shard's file
      if (canonical_protocol_name(p) != canonical_protocol_name(out.front()) &&
          std::find(rescored.begin(), rescored.end(), p) == rescored.end()) {
        rescored.push_back(p);
      }
    }
  }
  std::sort(rescored.begin(), rescored.end());
  out.insert(out.end(), rescored.begin(), rescored.end());
  return out;
}

RunView load_run_view(const std::string& run_dir, const std::string& protocol, const ProblemRegistry* registry) {
  const json config = load_run_config_json(run_dir);
  // The absolute folder without a trailing '/', so that "runs/demo/" and "."
  // name their folder.
  fs::path folder = fs::absolute(run_dir).lexically_normal();
  if (folder.filename().empty()) folder = folder.parent_path();
  RunView v;
  v.run_dir = run_dir;
  v.run_name = config.value("name", folder.filename().string());
  const std::string own = config.value("protocol", std::string("strict"));
  v.protocol = protocol.empty() ? own : protocol;
  // An alias names its protocol's results (kernelbench: kernelbench-v0.1).
  v.rescored = canonical_protocol_name(v.protocol) != canonical_protocol_name(own);
  v.results_file = v.rescored ? rescore_results_file(v.protocol) : RunStore::kResultsFile;
  v.verdict_root = v.rescored ? rescore_verdict_root(v.protocol) : "";
  const fs::path results = fs::path(run_dir) / v.results_file;
  const RunStore store(folder.parent_path().string(), folder.filename().string());
  if (store.record_files(v.results_file).empty()) {
    throw std::runtime_error(results.string() + ": not found; " +
                             (v.rescored ? "run 'kloop rescore " + run_dir + " --protocol " + v.protocol + "' first"
                                         : "the run has no finished attempt yet (kloop run CONFIG resumes it)"));
  }
  const json provider = config.value("provider", json::object());
  v.model = provider.value("kind", std::string("?")) + ":" + provider.value("model", std::string("?"));
  const json prices = provider.value("prices", json::object());
  auto price = [&](const char* kind) -> std::optional<double> {
    if (prices.is_object() && prices.contains(kind) && prices[kind].is_number()) return prices[kind].get<double>();
    return std::nullopt;
  };
  v.prices.input = price("input").value_or(0);
  v.prices.cached_input = price("cached_input");
  v.prices.cache_write = price("cache_write");
  for (const auto& b : config.value("evaluation", json::object()).value("baselines", json::array())) {
    if (b.is_string()) v.baselines.push_back(b.get<std::string>());
  }
  const json scaffold = config.value("scaffold", json::object());
  v.scaffold = scaffold_text(scaffold);
  v.scaffold_kind = scaffold.value("kind", std::string());
  v.turns = scaffold.value("turns", 1);
  v.samples = scaffold.value("samples", 1);
  v.device = config.value("device", std::string("?"));

  v.record_files = store.record_files(v.results_file);
  const std::vector<AttemptRecord> records = store.load_results(v.results_file);
  v.problems = selected_problems(config, registry, records, (fs::path(run_dir) / "config.json").string());
  // A protocol of kloop's may leave degenerate tasks out; an imported run's
  // own verdicts (kernelbench_published) are another harness's, as they were.
  const std::vector<std::string> ours = protocol_names();
  const bool kloop_protocol =
      std::find(ours.begin(), ours.end(), canonical_protocol_name(v.protocol)) != ours.end();
  if (registry && kloop_protocol && protocol_by_name(v.protocol).exclude_degenerate) {
    // A run made before precisions ran in fp32.
    drop_excluded(v, *registry,
                  parse_precision(config.value("precision", std::string("fp32"))).value_or(Precision::kFp32));
  }
  for (const auto& r : records) v.attempts.push_back(attempt_of(r, run_dir, v.verdict_root));

  // Where the run itself stands, from its own records.
  const std::vector<AttemptRecord> own_records = v.rescored ? store.load_results(RunStore::kResultsFile) : records;
  std::set<std::string> selected;
  for (const auto& p : v.problems) selected.insert(p.name);
  std::map<std::pair<std::string, int>, bool> finished;
  for (const auto& r : own_records) {
    if (!selected.count(r.problem)) continue;
    bool& done = finished[{r.problem, r.sample}];
    done = done || (r.chain_done && (r.stop_reason != "turns" || r.turn >= v.turns));
  }
  v.chains = static_cast<int>(v.problems.size()) * v.samples;
  // An import (kloop import) has nothing to go on with: a task of its
  // levels without a kernel is a failure, not an unfinished chain.
  const bool imported = config.contains("imported_from");
  for (const auto& p : imported ? std::vector<SelectedProblem>{} : v.problems) {
    for (int s = 0; s < v.samples; ++s) {
      auto it = finished.find({p.name, s});
      if (it == finished.end() || !it->second) ++v.unfinished_chains;
    }
  }
  std::set<std::string> recorded_dirs;
  for (const auto& r : own_records) recorded_dirs.insert(r.attempt_dir);
  v.provider_calls =
      read_provider_calls(run_dir, std::vector<std::string>(selected.begin(), selected.end()), recorded_dirs);
  v.ledger = read_run_ledger(run_dir);
  if (v.rescored) {
    std::set<std::tuple<std::string, int, int>> rescored;
    for (const auto& r : records) rescored.insert({r.problem, r.sample, r.turn});
    for (const auto& r : own_records) {
      if (selected.count(r.problem) && !rescored.count({r.problem, r.sample, r.turn})) ++v.attempts_not_rescored;
    }
  }
  return v;
}

}  // namespace kloop::report
