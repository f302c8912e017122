#include "agent/report/kernelbench_import.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <stdexcept>
#include <tuple>

#include "agent/scaffold/run_config.h"
#include "agent/store/run_store.h"
#include "base/untrusted_tree.h"
#include "evaluator/build/content_hash.h"
#include "evaluator/problem/registry.h"

namespace kloop::report {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// What kloop reads from a folder someone else made (the import's input is
// data: no link followed, no file read whole whatever its size).
constexpr uint64_t kMaxKernelBytes = 4u << 20;    // a kernel file
constexpr uint64_t kMaxResultsBytes = 64u << 20;  // eval_results.json

struct KernelFile {
  int level = 0, problem = 0, sample = 0;
  fs::path path;
};

// KernelBench's eval_results.json: {"P": [{"sample_id": S, "compiled": .., "correctness": .., "runtime": ..}]}
// (older versions: {"P": {"S": {...}}}), keyed here by (problem, sample).
std::map<std::pair<int, int>, json> published_results(const fs::path& file) {
  std::map<std::pair<int, int>, json> out;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(file, ec))) return out;
  json j;
  try {
    j = json::parse(read_file_nofollow(file.string(), kMaxResultsBytes));
  } catch (const json::exception& e) {
    throw std::runtime_error(file.string() + ": not valid JSON (" + e.what() +
                             "); fix or remove it to import the kernels without KernelBench's verdicts");
  }
  if (!j.is_object()) throw std::runtime_error(file.string() + ": expected an object keyed by problem id");
  for (const auto& [problem, entries] : j.items()) {
    int p = 0;
    try {
      p = std::stoi(problem);
    } catch (const std::exception&) {
      continue;  // not a problem id (a summary field)
    }
    if (entries.is_array()) {
      for (const auto& e : entries) {
        if (e.is_object()) out[{p, e.value("sample_id", 0)}] = e;
      }
    } else if (entries.is_object()) {
      for (const auto& [sample, e] : entries.items()) {
        try {
          if (e.is_object()) out[{p, std::stoi(sample)}] = e;
        } catch (const std::exception&) {
        }
      }
    }
  }
  return out;
}

void set_published_verdict(AttemptRecord& r, const json& e) {
  const bool compiled = e.value("compiled", false);
  const bool correct = e.value("correctness", false);
  r.outcome = !compiled ? Outcome::kCompileError : correct ? Outcome::kCorrect : Outcome::kIncorrect;
  std::string m = std::string("KernelBench's own evaluation: compiled ") + (compiled ? "yes" : "no") +
                  ", correctness " + (correct ? "yes" : "no");
  if (e.contains("runtime") && e["runtime"].is_number() && e["runtime"].get<double>() > 0) {
    m += ", runtime " + std::to_string(e["runtime"].get<double>()) + " ms";
  }
  const json meta = e.value("metadata", json::object());
  for (const char* key : {"compilation_error", "runtime_error", "correctness_issue", "cuda_error", "other_error"}) {
    if (meta.contains(key)) {
      m += "; " + std::string(key) + ": " + (meta[key].is_string() ? meta[key].get<std::string>() : meta[key].dump());
      break;
    }
  }
  r.message = m;
  if (meta.contains("hardware") && meta["hardware"].is_string()) r.gpu = meta["hardware"];
}

}  // namespace

KernelBenchImportSummary import_kernelbench(const KernelBenchImportOptions& o) {
  const fs::path folder = fs::absolute(o.generations).lexically_normal();
  if (!fs::is_directory(folder)) throw std::runtime_error(o.generations + ": not a folder");
  static const std::regex kName(R"(level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py)");
  std::vector<KernelFile> files;
  std::vector<std::string> refused;
  for (const auto& entry : fs::directory_iterator(folder)) {
    std::smatch m;
    const std::string f = entry.path().filename().string();
    if (!std::regex_match(f, m, kName)) continue;
    std::error_code ec;
    if (!entry.is_symlink(ec) && entry.is_regular_file(ec)) {
      try {
        files.push_back({std::stoi(m[1]), std::stoi(m[2]), std::stoi(m[3]), entry.path()});
      } catch (const std::exception&) {
        refused.push_back(f + ": a number in its name is out of range");
      }
    } else {
      refused.push_back(f + ": a link or not a regular file; kloop imports regular files of the folder only");
    }
  }
  if (files.empty()) {
    throw std::runtime_error(o.generations +
                             ": no level_L_problem_P_sample_S_kernel.py file; give the folder KernelBench's "
                             "generate_samples.py wrote (runs/RUN_NAME)");
  }
  std::sort(files.begin(), files.end(), [](const KernelFile& a, const KernelFile& b) {
    return std::tie(a.level, a.problem, a.sample) < std::tie(b.level, b.problem, b.sample);
  });

  // KernelBench's problem P of level L is kloop's task named "P_...".
  ProblemRegistry registry(o.problems_dir);
  std::map<std::pair<int, int>, ProblemEntry> tasks;
  for (const auto& e : registry.list("kernelbench")) {
    const std::size_t underscore = e.name.find('_');
    try {
      if (underscore != std::string::npos) tasks[{e.level, std::stoi(e.name.substr(0, underscore))}] = e;
    } catch (const std::exception&) {
    }
  }

  std::string model = "unknown";
  std::error_code ec;
  if (fs::exists(fs::symlink_status(folder / "generation_config.yaml", ec))) {
    const json g = read_config_json((folder / "generation_config.yaml").string(), /*follow_links=*/false);
    if (g.contains("model_name") && g["model_name"].is_string()) model = g["model_name"].get<std::string>();
  }
  const auto published = published_results(folder / "eval_results.json");

  KernelBenchImportSummary s;
  s.skipped = refused;
  const std::string name = o.name.empty() ? folder.filename().string() : o.name;
  RunStore store(o.runs_dir, name);
  s.run_dir = store.path();
  std::set<std::string> problems;
  int samples = 1;
  std::vector<std::pair<KernelFile, ProblemEntry>> matched;
  for (const auto& f : files) {
    auto t = tasks.find({f.level, f.problem});
    if (t == tasks.end()) {
      s.skipped.push_back(f.path.filename().string() + ": kloop has no level " + std::to_string(f.level) +
                          " task numbered " + std::to_string(f.problem));
      continue;
    }
    problems.insert(t->second.name);
    samples = std::max(samples, f.sample + 1);
    matched.emplace_back(f, t->second);
  }
  json resolved = {{"name", name},
                   {"config_file", ""},
                   {"imported_from", {{"kind", "kernelbench"}, {"folder", folder.string()}}},
                   {"problems", {{"suite", "kernelbench"}, {"level", nullptr}, {"names", problems}}},
                   {"device", o.device},
                   {"protocol", kPublishedProtocol},
                   {"candidate_format", "kernelbench_python"},
                   {"seed", 1},
                   {"provider", {{"kind", "import"}, {"model", model}}},
                   {"scaffold", {{"kind", "best_of_k"}, {"samples", samples}, {"turns", 1}}},
                   {"evaluation", json::object()}};
  store.write_config(resolved, {"protocol", "candidate_format", "imported_from"});

  std::set<std::tuple<std::string, int, int>> present;
  for (const auto& r : store.load_results()) present.insert({r.problem, r.sample, r.turn});
  for (const auto& [f, task] : matched) {
    if (present.count({task.name, f.sample, 1})) {
      ++s.present;
      continue;
    }
    std::string code;
    try {
      code = read_file_nofollow(f.path.string(), kMaxKernelBytes);
    } catch (const std::runtime_error& e) {
      s.skipped.push_back(e.what());
      continue;
    }
    const std::string dir = store.attempt_dir(task.name, f.sample, 1);
    RunStore::write_text(dir + "/candidate.py", code);
    RunStore::write_text(dir + "/response.txt", code);
    AttemptRecord r;
    r.run = name;
    r.problem = task.name;
    r.level = task.level;
    r.sample = f.sample;
    r.turn = 1;
    r.protocol = kPublishedProtocol;
    r.device = o.device;
    r.model = model;
    r.chain_done = true;
    r.stop_reason = "turns";
    r.step = "fresh";
    r.attempt_dir = store.relative_attempt_dir(task.name, f.sample, 1);
    r.timestamp = utc_timestamp();
    auto p = published.find({f.problem, f.sample});
    if (p != published.end()) {
      set_published_verdict(r, p->second);
      ++s.published;
    } else {
      r.outcome = Outcome::kUnevaluated;
      r.message = "imported from " + f.path.string() + " without KernelBench's verdict (no eval_results.json entry)";
    }
    store.seal_files(r.attempt_dir, {"candidate.py", "response.txt"});
    store.append(r);
    ++s.imported;
  }
  return s;
}

}  // namespace kloop::report
