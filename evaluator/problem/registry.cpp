// Directory scan and name lookup for problem suites.
#include "evaluator/problem/registry.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "evaluator/build/build_config.h"
#include "evaluator/build/environment.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;

long numeric_prefix(const std::string& name) {
  std::size_t i = 0;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  return i ? std::stol(name.substr(0, i)) : 1L << 30;
}

}  // namespace

std::string ProblemRegistry::default_root() {
  if (const char* env = std::getenv("KLOOP_PROBLEMS_DIR"); env && *env) return env;
  return data_dir() + "/problems";
}

ProblemRegistry::ProblemRegistry(std::string root) : root_(std::move(root)) {
  if (!fs::is_directory(root_)) {
    throw SpecError(root_ + ": no such problems folder (set KLOOP_PROBLEMS_DIR or pass --problems)");
  }
  static const std::regex kLevel(R"(level(\d+))");
  for (const auto& suite : fs::directory_iterator(root_)) {
    if (!suite.is_directory()) continue;
    for (const auto& level : fs::directory_iterator(suite.path())) {
      std::smatch m;
      std::string lname = level.path().filename().string();
      if (!level.is_directory() || !std::regex_match(lname, m, kLevel)) continue;
      for (const auto& f : fs::directory_iterator(level.path())) {
        if (f.path().extension() != ".yaml") continue;
        entries_.push_back({suite.path().filename().string(), std::stoi(m[1]), f.path().stem().string(),
                            f.path().string()});
      }
    }
  }
  std::sort(entries_.begin(), entries_.end(), [](const ProblemEntry& a, const ProblemEntry& b) {
    return std::make_tuple(a.suite, a.level, numeric_prefix(a.name), a.name) <
           std::make_tuple(b.suite, b.level, numeric_prefix(b.name), b.name);
  });
}

std::vector<ProblemEntry> ProblemRegistry::list(const std::string& suite, std::optional<int> level) const {
  std::vector<ProblemEntry> out;
  for (const auto& e : entries_) {
    if (!suite.empty() && e.suite != suite) continue;
    if (level && e.level != *level) continue;
    out.push_back(e);
  }
  return out;
}

ProblemEntry ProblemRegistry::find(const std::string& name) const {
  std::vector<ProblemEntry> matches;
  for (const auto& e : entries_) {
    std::string level_path = "level" + std::to_string(e.level) + "/" + e.name;
    if (name == e.name || name == level_path || name == e.suite + "/" + level_path) matches.push_back(e);
  }
  if (matches.size() == 1) return matches.front();
  if (matches.size() > 1) {
    std::string which;
    for (const auto& m : matches) which += "\n  " + m.suite + "/level" + std::to_string(m.level) + "/" + m.name;
    throw SpecError("problem '" + name + "' is ambiguous; name one of:" + which);
  }
  // Suggest names that contain the query, case-insensitively.
  auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
  };
  std::string hint;
  int shown = 0;
  for (const auto& e : entries_) {
    if (lower(e.name).find(lower(name)) != std::string::npos && shown++ < 5) hint += "\n  " + e.name;
  }
  throw SpecError("no problem named '" + name + "' under " + root_ +
                  (hint.empty() ? "; see `kloop problems list`" : "; did you mean:" + hint));
}

ProblemSpec ProblemRegistry::load(const ProblemEntry& entry) const {
  ProblemSpec s = load_problem_spec(entry.spec_path, entry.suite);
  if (s.level != entry.level) {
    throw SpecError(entry.spec_path + ": field 'level': says " + std::to_string(s.level) +
                    " but the file lives under level" + std::to_string(entry.level));
  }
  return s;
}

std::vector<ProblemEntry> ProblemRegistry::select(const std::vector<std::string>& names, const std::string& suite,
                                                  std::optional<int> level) const {
  if (names.empty()) return list(suite, level);
  std::vector<ProblemEntry> out;
  for (const auto& n : names) out.push_back(find(n));
  return out;
}

}  // namespace kloop
