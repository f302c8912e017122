// Directory scan and name lookup for problem suites.
#include "evaluator/problem/registry.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <stdexcept>

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

namespace {

std::invalid_argument bad_selection(const std::string& text, const std::string& part, const std::string& why) {
  return std::invalid_argument("problem selection '" + text.substr(0, 200) + "': '" + part.substr(0, 60) + "' " + why +
                               "; write parts like L1 (a level), L1:1-20 (numbers 1 to 20 of level 1), L1:3,7-9,"
                               "L2:5");
}

// A whole number of at most 9 digits; nullopt otherwise.
std::optional<long> whole(const std::string& s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  return std::stol(s);
}

}  // namespace

std::vector<NumberedPart> parse_numbered_selection(const std::string& text) {
  std::vector<NumberedPart> out;
  std::optional<int> level;
  std::size_t from = 0;
  if (text.empty()) throw bad_selection(text, text, "is empty");
  while (from <= text.size()) {
    const std::size_t comma = std::min(text.find(',', from), text.size());
    std::string part = text.substr(from, comma - from);
    from = comma + 1;
    while (!part.empty() && part.front() == ' ') part.erase(part.begin());
    while (!part.empty() && part.back() == ' ') part.pop_back();
    if (part.empty()) throw bad_selection(text, part, "is an empty part");
    std::string range = part;
    if (part.front() == 'L' || part.front() == 'l') {
      const std::size_t colon = part.find(':');
      const auto n = whole(part.substr(1, colon == std::string::npos ? std::string::npos : colon - 1));
      if (!n || *n < 1) throw bad_selection(text, part, "does not name a level (L1, L2, ...)");
      level = static_cast<int>(*n);
      if (colon == std::string::npos) {
        out.push_back({*level, 0, 0});
        continue;
      }
      range = part.substr(colon + 1);
    } else if (!level) {
      throw bad_selection(text, part, "has no level before it");
    }
    const std::size_t dash = range.find('-');
    const auto lo = whole(range.substr(0, dash));
    const auto hi = dash == std::string::npos ? lo : whole(range.substr(dash + 1));
    if (!lo || !hi) throw bad_selection(text, part, "is not a number or a range N-M");
    if (*lo < 1 || *hi < *lo) throw bad_selection(text, part, "is not a range from a lower to a higher number (from 1)");
    out.push_back({*level, *lo, *hi});
  }
  return out;
}

std::vector<ProblemEntry> ProblemRegistry::select_numbered(const std::string& selection, const std::string& suite) const {
  const std::vector<NumberedPart> parts = parse_numbered_selection(selection);
  std::vector<bool> picked(entries_.size(), false);
  for (const auto& part : parts) {
    bool any = false;
    long first = -1, last = -1;
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      const ProblemEntry& e = entries_[i];
      if ((!suite.empty() && e.suite != suite) || e.level != part.level) continue;
      const long n = numeric_prefix(e.name);
      if (n < (1L << 30)) {
        first = first < 0 ? n : std::min(first, n);
        last = std::max(last, n);
      }
      if (part.lo == 0 || (n >= part.lo && n <= part.hi)) {
        picked[i] = true;
        any = true;
      }
    }
    if (!any) {
      const std::string what = "L" + std::to_string(part.level) +
                               (part.lo == 0 ? std::string()
                                             : ":" + std::to_string(part.lo) +
                                                   (part.hi != part.lo ? "-" + std::to_string(part.hi) : std::string()));
      throw std::invalid_argument(
          "problem selection '" + selection.substr(0, 200) + "': " + what + " picks no problem" +
          (suite.empty() ? std::string() : " of suite " + suite) +
          (first < 0 ? "; level " + std::to_string(part.level) + " has none (kloop problems list shows the levels)"
                     : "; level " + std::to_string(part.level) + " holds numbers " + std::to_string(first) + " to " +
                           std::to_string(last)));
    }
  }
  std::vector<ProblemEntry> out;
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (picked[i]) out.push_back(entries_[i]);
  }
  return out;
}

}  // namespace kloop
