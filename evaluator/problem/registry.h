// ProblemRegistry: the task suites on disk (problems/<suite>/<level>/NAME.yaml)
// and lookup by name.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "evaluator/problem/spec.h"

namespace kloop {

// A selection by level and KernelBench number, as `--problems` and a run
// config's `problems.select` write it: comma-separated parts, each
// `L<level>` (the whole level), `L<level>:<ranges>`, or a bare range that
// goes on with the level before it; a range is `N` or `N-M`:
//   "L1:1-20,L2:5"   "L1"   "L1:3,7-9,L2"   "l2:40"
struct NumberedPart {
  int level = 0;
  long lo = 0, hi = 0;  // 0, 0: every problem of the level
};
// Throws std::invalid_argument naming the part and the syntax.
std::vector<NumberedPart> parse_numbered_selection(const std::string& text);

struct ProblemEntry {
  std::string suite;
  int level = 0;
  std::string name;
  std::string spec_path;
};

class ProblemRegistry {
 public:
  // Scans `root` (which holds one folder per suite). Throws SpecError when
  // the folder does not exist.
  explicit ProblemRegistry(std::string root);

  // Entries sorted by suite, level and KernelBench's numeric prefix.
  std::vector<ProblemEntry> list(const std::string& suite = "", std::optional<int> level = std::nullopt) const;

  // Finds "19_ReLU", "level1/19_ReLU" or "kernelbench/level1/19_ReLU".
  // Throws SpecError naming close matches when there is no single match.
  ProblemEntry find(const std::string& name) const;
  // What a command selects: the named problems when there are names, else
  // list(suite, level).
  std::vector<ProblemEntry> select(const std::vector<std::string>& names, const std::string& suite,
                                   std::optional<int> level) const;
  // The problems of `suite` ("" = every suite) a numbered selection picks,
  // in the registry's order, each once. Throws std::invalid_argument
  // naming a part that picks nothing (and what its level holds).
  std::vector<ProblemEntry> select_numbered(const std::string& selection, const std::string& suite) const;
  ProblemSpec load(const ProblemEntry& entry) const;
  ProblemSpec load(const std::string& name) const { return load(find(name)); }
  const std::string& root() const { return root_; }

  // $KLOOP_PROBLEMS_DIR, else the source tree's problems/ folder.
  static std::string default_root();

 private:
  std::string root_;
  std::vector<ProblemEntry> entries_;
};

}  // namespace kloop
