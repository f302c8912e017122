#include "agent/report/kernelbench_tasks.h"

#include <filesystem>
#include <set>

#include "evaluator/problem/reference_source.h"

namespace kloop::report {
namespace {

namespace fs = std::filesystem;

// KernelBench's number of a task named "P_...".
std::optional<int> task_number(const std::string& name) {
  const std::size_t underscore = name.find('_');
  if (underscore == 0 || underscore == std::string::npos || underscore > 6) return std::nullopt;
  for (std::size_t i = 0; i < underscore; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return std::nullopt;
  }
  return std::stoi(name.substr(0, underscore));
}

}  // namespace

KernelBenchTasks::KernelBenchTasks(const ProblemRegistry& registry) {
  for (const auto& e : registry.list("kernelbench")) {
    const auto number = task_number(e.name);
    if (!number) continue;
    Task t{e, *number, "", ""};
    const ProblemSpec spec = registry.load(e);
    if (auto h = spec.provenance.find("reference_hash"); h != spec.provenance.end()) t.reference_hash = h->second;
    if (auto h = spec.provenance.find("inputs_hash"); h != spec.provenance.end()) t.inputs_hash = h->second;
    tasks_.push_back(t);
  }
}

IdentifiedTask KernelBenchTasks::identify(int level, int number, const std::string& reference_source) const {
  const ReferenceIdentity id = reference_identity(reference_source);
  const std::string& hash = id.model_hash;
  const Task* numbered = nullptr;
  std::vector<const Task*> same;
  for (const Task& t : tasks_) {
    if (t.entry.level != level) continue;
    if (t.number == number) numbered = &t;
    if (t.reference_hash == hash) same.push_back(&t);
  }
  IdentifiedTask out;
  if (numbered && !numbered->reference_hash.empty() && numbered->reference_hash == hash) {
    out.task = numbered->entry;
    if (!numbered->inputs_hash.empty() && numbered->inputs_hash != id.inputs_hash) {
      out.note = "its KernelBench version's get_inputs or get_init_inputs differs from kloop's upstream file (other "
                 "sizes or distributions); kloop judges it with the inputs its spec draws";
    }
    return out;
  }
  // Never judged at another number either: several tasks share a Model
  // (level 1's matmuls, 2_ShallowWideMLP and 3_DeepNarrowMLP) and tell
  // themselves apart by their inputs, which a version may change.
  std::string elsewhere;
  if (!same.empty()) {
    elsewhere = "; its Model is that of kloop's " + same.front()->entry.name +
                (same.size() > 1 ? " (and " + std::to_string(same.size() - 1) + " more)" : "") +
                ", not judged there: a task is its Model and its inputs";
  }
  if (!numbered) {
    out.why = "kloop has no level " + std::to_string(level) + " task numbered " + std::to_string(number) + elsewhere;
  } else if (numbered->reference_hash.empty()) {
    out.why = "kloop's " + numbered->entry.name + " records no provenance.reference_hash to tell its reference by "
              "(kloop problems hash --upstream PATH --write records it)";
  } else {
    out.why = "its reference differs from kloop's " + numbered->entry.name + " (Model hash " + hash + ", kloop's " +
              numbered->reference_hash + "): another KernelBench version's task " + std::to_string(number) +
              ", not kloop's" + elsewhere;
  }
  return out;
}

std::vector<std::string> KernelBenchTasks::whole_levels(const std::vector<int>& levels) const {
  const std::set<int> wanted(levels.begin(), levels.end());
  std::vector<std::string> names;
  for (const Task& t : tasks_) {
    if (wanted.count(t.entry.level)) names.push_back(t.entry.name);
  }
  return names;
}

std::string kernelbench_version_file(const std::string& checkout, int level, int number) {
  fs::path root = fs::path(checkout);
  std::error_code ec;
  if (fs::is_directory(root / "KernelBench", ec)) root /= "KernelBench";
  const fs::path folder = root / ("level" + std::to_string(level));
  if (!fs::is_directory(folder, ec)) return "";
  const std::string prefix = std::to_string(number) + "_";
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    const std::string f = e.path().filename().string();
    if (f.rfind(prefix, 0) == 0 && e.path().extension() == ".py" && e.is_regular_file(ec) && !e.is_symlink(ec)) {
      return e.path().string();
    }
  }
  return "";
}

}  // namespace kloop::report
