#include "agent/report/kernelbench_import.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "agent/report/kernelbench_tasks.h"
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

// One published kernel, before kloop knows its task.
struct Kernel {
  int level = 0, problem = 0, sample = 0;
  std::string origin;      // its file, or "level L task P of RELEASE"
  std::string code;
  std::string reference;   // the reference source its task is told by
  std::string reference_file;  // the KernelBench version's file name, when it came from one
  bool has_verdict = false;    // with a published verdict (else unevaluated)
  Outcome outcome = Outcome::kUnevaluated;
  std::optional<double> speedup;
  std::string message;
  std::string gpu;
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

void set_published_verdict(Kernel& r, const json& e) {
  r.has_verdict = true;
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

// Upstream's baseline timing file (results/timing/<hw>/baseline_time_torch.json):
// {"level1": {"19_ReLU.py": {"mean": ms, ...}}}, keyed here by (level, file name).
std::map<std::pair<int, std::string>, double> baseline_times(const std::string& file) {
  std::map<std::pair<int, std::string>, double> out;
  json j;
  try {
    j = json::parse(read_file_nofollow(file, kMaxResultsBytes));
  } catch (const json::exception& e) {
    throw std::runtime_error(file + ": not valid JSON (" + e.what() + "); give KernelBench's " +
                             "results/timing/<hardware>/baseline_time_torch.json");
  }
  if (!j.is_object()) throw std::runtime_error(file + ": expected an object keyed by level (\"level1\": {...})");
  for (const auto& [level, tasks] : j.items()) {
    if (level.rfind("level", 0) != 0 || !tasks.is_object()) continue;
    int l = 0;
    try {
      l = std::stoi(level.substr(5));
    } catch (const std::exception&) {
      continue;
    }
    for (const auto& [task, t] : tasks.items()) {
      if (t.is_object() && t.contains("mean") && t["mean"].is_number() && t["mean"].get<double>() > 0) {
        out[{l, task}] = t["mean"].get<double>();
      }
    }
  }
  if (out.empty()) throw std::runtime_error(file + ": no level's task has a positive \"mean\" (ms); not a baseline file");
  return out;
}

// The run from the kernels: each told its kloop task by its reference (or
// skipped with why), the whole of each level seen selected, one attempt per
// kernel with its published verdict.
KernelBenchImportSummary write_run(const KernelBenchImportOptions& o, const std::string& name,
                                   const json& imported_from, const std::string& model, std::vector<Kernel> kernels,
                                   KernelBenchImportSummary s) {
  std::sort(kernels.begin(), kernels.end(), [](const Kernel& a, const Kernel& b) {
    return std::tie(a.level, a.problem, a.sample) < std::tie(b.level, b.problem, b.sample);
  });
  ProblemRegistry registry(o.problems_dir);
  const KernelBenchTasks tasks(registry);
  std::set<int> levels;
  int samples = 1;
  std::vector<std::pair<Kernel, ProblemEntry>> matched;
  std::set<std::pair<std::string, int>> taken;
  for (auto& k : kernels) {
    levels.insert(k.level);
    const IdentifiedTask t = tasks.identify(k.level, k.problem, k.reference);
    if (!t.task) {
      s.skipped.push_back(k.origin + ": " + t.why);
      continue;
    }
    if (!taken.insert({t.task->name, k.sample}).second) {
      s.skipped.push_back(k.origin + ": another kernel of sample " + std::to_string(k.sample) + " is already kloop's " +
                          t.task->name);
      continue;
    }
    if (!t.note.empty()) s.notes.push_back(k.origin + ": " + t.note);
    samples = std::max(samples, k.sample + 1);
    matched.emplace_back(std::move(k), *t.task);
  }
  const std::vector<std::string> whole = tasks.whole_levels(std::vector<int>(levels.begin(), levels.end()));
  s.level_tasks = static_cast<int>(whole.size());
  RunStore store(o.runs_dir, name);
  s.run_dir = store.path();
  json resolved = {{"name", name},
                   {"config_file", ""},
                   {"imported_from", imported_from},
                   {"problems", {{"suite", "kernelbench"}, {"level", nullptr}, {"names", whole}}},
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
  for (const auto& [k, task] : matched) {
    if (present.count({task.name, k.sample, 1})) {
      ++s.present;
      continue;
    }
    const std::string dir = store.attempt_dir(task.name, k.sample, 1);
    RunStore::write_text(dir + "/candidate.py", k.code);
    RunStore::write_text(dir + "/response.txt", k.code);
    AttemptRecord r;
    r.run = name;
    r.problem = task.name;
    r.level = task.level;
    r.sample = k.sample;
    r.turn = 1;
    r.protocol = kPublishedProtocol;
    r.device = o.device;
    r.model = model;
    r.chain_done = true;
    r.stop_reason = "turns";
    r.step = "fresh";
    r.attempt_dir = store.relative_attempt_dir(task.name, k.sample, 1);
    r.timestamp = utc_timestamp();
    r.outcome = k.outcome;
    r.speedup = k.speedup;
    r.message = k.message;
    r.gpu = k.gpu;
    s.published += k.has_verdict ? 1 : 0;
    store.seal_files(r.attempt_dir, {"candidate.py", "response.txt"});
    store.append(r);
    ++s.imported;
  }
  return s;
}

// The first of `names` a record has, not null and not "".
const json* field(const json& record, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    auto it = record.find(n);
    if (it != record.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty())) return &*it;
  }
  return nullptr;
}

std::optional<int> as_int(const json* v) {
  if (!v) return std::nullopt;
  if (v->is_number_integer()) return v->get<int>();
  if (v->is_string()) {
    try {
      std::size_t used = 0;
      const int n = std::stoi(v->get<std::string>(), &used);
      if (used == v->get<std::string>().size()) return n;
    } catch (const std::exception&) {
    }
  }
  return std::nullopt;
}

// A release's records: a JSON list, an object of levels ({"1": [...]}),
// one record, or one record a line (JSONL).
std::vector<json> release_records(const std::string& file, const std::string& text) {
  std::vector<json> records;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception&) {
    std::istringstream in(text);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      try {
        records.push_back(json::parse(line));
      } catch (const json::exception& e) {
        throw std::runtime_error(file + ":" + std::to_string(n) + ": neither the file nor this line is JSON (" +
                                 e.what() + "); a release is a JSON list, an object of levels or JSONL");
      }
    }
    return records;
  }
  if (j.is_array()) return std::vector<json>(j.begin(), j.end());
  if (!j.is_object()) throw std::runtime_error(file + ": neither a list nor an object of records");
  if (field(j, {"level_id", "level"})) return {j};
  for (const auto& [level, items] : j.items()) {
    if (!items.is_array()) {
      throw std::runtime_error(file + ": field '" + level +
                               "' is not a list of records; a release is a list, an object of levels "
                               "({\"1\": [...]}) or JSONL");
    }
    for (json r : items) {
      if (r.is_object() && !field(r, {"level_id", "level"})) r["level"] = level;
      records.push_back(r);
    }
  }
  return records;
}

// Record i of a release as a kernel with its published verdict; none when
// it carries no kernel (counted) or cannot be told its task (listed).
std::optional<Kernel> release_kernel(const json& r, std::size_t i, const std::string& file_name,
                                     const KernelBenchImportOptions& o, KernelBenchImportSummary& s) {
  const std::string at = file_name + " record " + std::to_string(i + 1);
  if (!r.is_object()) throw std::runtime_error(at + ": not an object");
  const auto level = as_int(field(r, {"level_id", "level"}));
  const auto task = as_int(field(r, {"task_id", "problem_id", "task", "problem"}));
  if (!level || !task) {
    throw std::runtime_error(at + ": needs its level (level_id or level) and task number (task_id, problem_id, "
                             "task or problem) as integers");
  }
  Kernel k;
  k.level = *level;
  k.problem = *task;
  k.sample = as_int(field(r, {"sample_id", "sample"})).value_or(0);
  k.origin = "level " + std::to_string(k.level) + " task " + std::to_string(k.problem) + " of " + file_name;
  const json* code = field(r, {"custom_code", "kernel_src", "kernel_code", "code"});
  if (!code) {
    ++s.without_kernel;
    return std::nullopt;
  }
  if (!code->is_string()) throw std::runtime_error(at + ": its kernel code is not a string");
  k.code = code->get<std::string>();
  if (k.code.size() > kMaxKernelBytes) {
    s.skipped.push_back(k.origin + ": its kernel is " + std::to_string(k.code.size()) + " bytes, more than the " +
                        std::to_string(kMaxKernelBytes) + " kloop imports");
    return std::nullopt;
  }
  if (const json* ref = field(r, {"ref_code", "ref_arch_src", "reference"}); ref && ref->is_string()) {
    k.reference = ref->get<std::string>();
  } else if (!o.kernelbench.empty()) {
    const std::string path = kernelbench_version_file(o.kernelbench, k.level, k.problem);
    if (path.empty()) {
      s.skipped.push_back(k.origin + ": it carries no reference and " + o.kernelbench + " has no level" +
                          std::to_string(k.level) + "/" + std::to_string(k.problem) + "_*.py");
      return std::nullopt;
    }
    k.reference = read_file_nofollow(path, kMaxKernelBytes);
  } else {
    s.skipped.push_back(k.origin + ": it carries no reference code (ref_code); give --kernelbench PATH, the "
                        "KernelBench version it was made for, to tell its task");
    return std::nullopt;
  }
  // The release's own figure: a claimed speedup says it was correct.
  const json* claimed = field(r, {"score_default", "speedup", "claimed_speedup"});
  const json* correct = field(r, {"correctness", "correct"});
  if (correct && correct->is_boolean() && !correct->get<bool>()) {
    k.has_verdict = true;
    k.outcome = Outcome::kIncorrect;
    k.message = "the release marks it incorrect";
  } else if (claimed && claimed->is_number() && claimed->get<double>() > 0) {
    k.has_verdict = true;
    k.outcome = Outcome::kCorrect;
    k.speedup = claimed->get<double>();
    k.message = "the release claims a speedup of " + fmt::format("{:g}", *k.speedup);
  } else if (correct && correct->is_boolean()) {
    k.has_verdict = true;
    k.outcome = Outcome::kCorrect;
    k.message = "the release marks it correct and claims no speedup";
  } else {
    k.message = "the release claims no figure for it";
  }
  return k;
}

// The folder's kernel files, each with its KernelBench version's reference
// file (skipped with why when it has none, or a file is not plain).
std::vector<Kernel> folder_kernels(const fs::path& folder, const KernelBenchImportOptions& o,
                                   KernelBenchImportSummary& s) {
  static const std::regex kName(R"(level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py)");
  std::vector<Kernel> kernels;
  bool any = false;
  for (const auto& entry : fs::directory_iterator(folder)) {
    std::smatch m;
    const std::string f = entry.path().filename().string();
    if (!std::regex_match(f, m, kName)) continue;
    any = true;
    std::error_code ec;
    if (entry.is_symlink(ec) || !entry.is_regular_file(ec)) {
      s.skipped.push_back(f + ": a link or not a regular file; kloop imports regular files of the folder only");
      continue;
    }
    Kernel k;
    try {
      k.level = std::stoi(m[1]);
      k.problem = std::stoi(m[2]);
      k.sample = std::stoi(m[3]);
    } catch (const std::exception&) {
      s.skipped.push_back(f + ": a number in its name is out of range");
      continue;
    }
    k.origin = f;
    const std::string reference = kernelbench_version_file(o.kernelbench, k.level, k.problem);
    if (reference.empty()) {
      s.skipped.push_back(f + ": " + o.kernelbench + " has no KernelBench/level" + std::to_string(k.level) + "/" +
                          std::to_string(k.problem) + "_*.py: not the KernelBench version these kernels were made for?");
      continue;
    }
    try {
      k.reference = read_file_nofollow(reference, kMaxKernelBytes);
      k.code = read_file_nofollow(entry.path().string(), kMaxKernelBytes);
    } catch (const std::runtime_error& e) {
      s.skipped.push_back(e.what());
      continue;
    }
    k.reference_file = fs::path(reference).filename().string();
    kernels.push_back(std::move(k));
  }
  if (!any) {
    throw std::runtime_error(o.generations +
                             ": no level_L_problem_P_sample_S_kernel.py file; give the folder KernelBench's "
                             "generate_samples.py wrote (runs/RUN_NAME)");
  }
  return kernels;
}

}  // namespace

KernelBenchImportSummary import_kernelbench(const KernelBenchImportOptions& o) {
  const fs::path folder = fs::absolute(o.generations).lexically_normal();
  if (!fs::is_directory(folder)) throw std::runtime_error(o.generations + ": not a folder");
  if (o.kernelbench.empty() || !fs::is_directory(o.kernelbench)) {
    throw std::runtime_error(
        (o.kernelbench.empty() ? std::string("no KernelBench checkout named") : o.kernelbench + ": not a folder") +
        ": kloop tells each kernel's task by the reference file of the KernelBench version it was generated with, "
        "never by its number alone (another version's task 50 is another task); give --kernelbench PATH, a "
        "KernelBench checkout at that version (it holds KernelBench/level1/...)");
  }
  KernelBenchImportSummary s;
  std::vector<Kernel> kernels = folder_kernels(folder, o, s);
  std::string model = "unknown";
  std::error_code ec;
  if (fs::exists(fs::symlink_status(folder / "generation_config.yaml", ec))) {
    const json g = read_config_json((folder / "generation_config.yaml").string(), /*follow_links=*/false);
    if (g.contains("model_name") && g["model_name"].is_string()) model = g["model_name"].get<std::string>();
  }
  const auto published = published_results(folder / "eval_results.json");
  std::map<std::pair<int, std::string>, double> baseline;
  if (!o.baseline.empty()) baseline = baseline_times(o.baseline);
  for (Kernel& k : kernels) {
    auto p = published.find({k.problem, k.sample});
    if (p == published.end()) {
      k.message = "imported from " + k.origin + " without KernelBench's verdict (no eval_results.json entry)";
      continue;
    }
    set_published_verdict(k, p->second);
    // KernelBench's analysis: speedup = the baseline's mean / the kernel's runtime (ms).
    const double runtime = p->second.value("runtime", -1.0);
    auto b = baseline.find({k.level, k.reference_file});
    if (k.outcome == Outcome::kCorrect && runtime > 0 && b != baseline.end()) {
      k.speedup = b->second / runtime;
    } else if (!o.baseline.empty() && k.outcome == Outcome::kCorrect && b == baseline.end()) {
      k.message += "; no baseline time for level" + std::to_string(k.level) + "/" + k.reference_file + " in " +
                   o.baseline;
    }
  }
  const std::string name = o.name.empty() ? folder.filename().string() : o.name;
  json from = {{"kind", "kernelbench"}, {"folder", folder.string()},
               {"kernelbench", fs::absolute(o.kernelbench).lexically_normal().string()}};
  if (!o.baseline.empty()) from["baseline"] = fs::absolute(o.baseline).lexically_normal().string();
  return write_run(o, name, from, model, std::move(kernels), std::move(s));
}

KernelBenchImportSummary import_release(const KernelBenchImportOptions& o) {
  const fs::path file = fs::absolute(o.generations).lexically_normal();
  std::string text;
  try {
    text = read_file_nofollow(file.string(), kMaxResultsBytes);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(e.what()) + " (a release is a JSON or JSONL file of kernels)");
  }
  const std::vector<json> records = release_records(file.string(), text);
  if (records.empty()) throw std::runtime_error(file.string() + ": no record; a release holds one record per kernel");
  KernelBenchImportSummary s;
  std::vector<Kernel> kernels;
  std::string model = "unknown";
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (auto k = release_kernel(records[i], i, file.filename().string(), o, s)) kernels.push_back(std::move(*k));
    if (const json* m = field(records[i], {"model", "model_name"}); m && m->is_string()) model = m->get<std::string>();
  }
  if (kernels.empty() && s.skipped.empty()) {
    throw std::runtime_error(file.string() + ": no record carries kernel code (custom_code, kernel_src, kernel_code "
                             "or code)");
  }
  const std::string name = o.name.empty() ? file.stem().string() : o.name;
  const json from = {{"kind", "release"}, {"file", file.string()}};
  return write_run(o, name, from, model, std::move(kernels), std::move(s));
}

}  // namespace kloop::report
