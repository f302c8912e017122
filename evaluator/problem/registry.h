// ProblemRegistry: the task suites on disk (problems/<suite>/<level>/NAME.yaml)
// and lookup by name.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "evaluator/problem/spec.h"

namespace kloop {

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
